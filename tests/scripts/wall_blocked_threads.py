"""N threads blocked in Event.wait() for S seconds under spprof: prints JSON figures.

argv: mode threads seconds interval_ms memory_limit_mb [rss] [extra=N] ("rss": figures only;
extra=N: N more threads start a third into the wait, and block elsewhere).
Used by tests/test_wall_memory.py and the RSS figures in docs/performance.md
("Blocked threads in wall mode").
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time

import spprof


def main() -> None:
    mode, n, seconds, interval_ms, limit_mb = (
        sys.argv[1],
        int(sys.argv[2]),
        float(sys.argv[3]),
        float(sys.argv[4]),
        float(sys.argv[5]),
    )
    threading.stack_size(256 * 1024)  # thousands of threads: keep their stacks small
    go = threading.Event()
    release = threading.Event()
    ready = threading.Semaphore(0)
    spans: dict[str, tuple[int, int]] = {}

    wholes: dict[str, int] = {}
    lives: dict[str, int] = {}  # from just before t.start(): its start-up and registration too
    started: dict[str, int] = {}

    def blocked() -> None:
        tr = time.monotonic_ns()
        ready.release()
        go.wait()  # GO_LINE
        t0 = time.monotonic_ns()
        release.wait()  # WAIT_LINE
        t1 = time.monotonic_ns()
        name = threading.current_thread().name
        spans[name] = (t0, t1)
        wholes[name] = t1 - tr
        lives[name] = t1 - started[name]

    opts = sys.argv[6:]
    extra = int(next((o[len("extra=") :] for o in opts if o.startswith("extra=")), 0))
    threads = [threading.Thread(target=blocked, name=f"blocked-{i}") for i in range(n)]
    others = [threading.Thread(target=release.wait, name=f"other-{i}") for i in range(extra)]
    with spprof.Profiler(interval_ms=interval_ms, mode=mode, memory_limit_mb=limit_mb) as p:
        for t in threads:
            started[t.name] = time.monotonic_ns()
            t.start()
        for _ in threads:
            ready.acquire()
        go.set()
        time.sleep(seconds / 3)
        early = dict(spprof.stats())  # a third into the wait: what the rest of it adds
        for t in others:
            t.start()
        time.sleep(seconds - seconds / 3)
        during = dict(spprof.stats())
        rss_during = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        release.set()
        for t in threads + others:
            t.join()
    prof = p.profile
    assert prof is not None
    rss_stopped = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if "rss" in opts:  # figures only: no per-sample analysis (its objects dwarf the profile)
        print(
            json.dumps(
                {
                    "during": {k: v for k, v in during.items() if isinstance(v, (int, float))},
                    "after": {
                        k: v for k, v in dict(prof.stats).items() if isinstance(v, (int, float))
                    },
                    "rss_max": rss_during,
                    "rss_max_end": rss_stopped,
                }
            )
        )
        return
    with open(__file__) as src:
        text = src.read().splitlines()
    wait_line = next(i for i, line in enumerate(text, 1) if line.rstrip().endswith("# WAIT_LINE"))
    go_line = next(i for i, line in enumerate(text, 1) if line.rstrip().endswith("# GO_LINE"))
    # Per blocked thread: its idle rows on the line of the measured wait, and its weight there
    # off CPU (idle, or runnable: released and waiting for a CPU through a census period).
    # weight_any: every sample on that line, idle or not (a thread released from the wait
    # that waits for the GIL, or a CPU, to return from it is still on the line, not idle).
    rows: dict[str, int] = {}
    weight: dict[str, int] = {}
    weight_any: dict[str, int] = {}
    # Off-CPU weight on either wait: the thread's whole time blocked, whichever line it went
    # to, and released, waiting for a CPU through a whole census period (runnable).
    weight_both: dict[str, int] = {}
    # Off-CPU weight on the lines after the measured wait: a long wait is visited every 2nd to
    # 8th census, and a visit that finds the thread released and blocked again (on the GIL, 300
    # threads released at once) puts the time since the last visit there, its wait's end too
    # (docs/architecture.md, "Long waits").
    weight_after: dict[str, int] = {}
    for s in prof.samples:
        at = [f.lineno for f in s.frames if f.function_name == "blocked"]
        if not s.thread_name.startswith("blocked-"):
            continue
        if (s.idle or s.runnable) and at in ([wait_line], [go_line]):
            weight_both[s.thread_name] = weight_both.get(s.thread_name, 0) + s.weight_ns
        if (s.idle or s.runnable) and len(at) == 1 and at[0] > wait_line:
            weight_after[s.thread_name] = weight_after.get(s.thread_name, 0) + s.weight_ns
        if at != [wait_line]:
            continue
        weight_any[s.thread_name] = weight_any.get(s.thread_name, 0) + s.weight_ns
        if s.idle:
            rows[s.thread_name] = rows.get(s.thread_name, 0) + 1
        if s.idle or s.runnable:
            weight[s.thread_name] = weight.get(s.thread_name, 0) + s.weight_ns
    print(
        json.dumps(
            {
                "early": {k: v for k, v in early.items() if isinstance(v, (int, float))},
                "during": {k: v for k, v in during.items() if isinstance(v, (int, float))},
                "after": {k: v for k, v in dict(prof.stats).items() if isinstance(v, (int, float))},
                "rss_max": rss_during,
                "rss_max_end": rss_stopped,
                # What the profile holds: rows (a folded wait is one) and the samples they are.
                "rows_held": len(prof.rows) // 24,
                "samples_held": prof.sample_count,
                "rows": rows,
                "weight": weight,
                "weight_any": weight_any,
                "spans": {k: v[1] - v[0] for k, v in spans.items()},
                "weight_both": weight_both,
                "weight_after": weight_after,
                "wholes": wholes,
                "lives": lives,
            }
        )
    )


if __name__ == "__main__":
    main()
