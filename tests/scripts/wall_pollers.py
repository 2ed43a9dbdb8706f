"""N threads that poll (Event.wait with a short timeout, in a loop) for S seconds in wall mode.

argv: threads seconds timeout_ms. Prints JSON: per poller, the rows that hold its samples on
the poll's line (idle), those samples, and their weight; and the profile's row count. Used by
tests/test_wall_memory.py.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import spprof
from spprof._rows import FLAG_IDLE


def main() -> None:
    n, seconds, timeout_ms = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    done = threading.Event()
    ready = threading.Semaphore(0)
    spent: dict[str, int] = {}

    def poller() -> None:
        ready.release()
        t0 = time.monotonic_ns()
        while not done.is_set():
            done.wait(timeout_ms / 1000)  # POLL_LINE
        spent[threading.current_thread().name] = time.monotonic_ns() - t0

    threads = [threading.Thread(target=poller, name=f"poller-{i}") for i in range(n)]
    with spprof.Profiler(interval_ms=1, mode="wall") as p:
        for t in threads:
            t.start()
        for _ in threads:
            ready.acquire()
        time.sleep(seconds)
        done.set()
        for t in threads:
            t.join()
    prof = p.profile
    assert prof is not None
    with open(__file__) as src:
        line = next(
            i for i, s in enumerate(src.read().splitlines(), 1) if s.endswith("# POLL_LINE")
        )
    rows: dict[str, int] = {}
    samples: dict[str, int] = {}
    weight: dict[str, int] = {}
    threads_by_serial = prof.thread_table
    for _ts, w, stack, serial, flags, count in prof.iter_counted():
        name = threads_by_serial[serial].label
        at = [f.lineno for f in prof.stack_frames(stack) if f.function_name == "poller"]
        if not name.startswith("poller-") or at != [line] or not flags & FLAG_IDLE:
            continue
        rows[name] = rows.get(name, 0) + 1
        samples[name] = samples.get(name, 0) + count
        weight[name] = weight.get(name, 0) + w
    out = {"rows": rows, "samples": samples, "weight": weight, "spent": spent}
    gap = prof.stats["wall_longest_census_gap_ns"]
    print(json.dumps(out | {"row_count": prof.row_count, "longest_census_gap_ns": gap}))


if __name__ == "__main__":
    main()
