"""Windows on a running session (tests/test_windows.py): one case per process.

    python windows.py CASE OUT.json

Each case prints nothing of its own on stdout; it writes what the test checks to OUT.json:
per profile, the sampled weight per function (anywhere on the stack) and the files on its
stacks.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import spprof


def burn(seconds: float) -> int:
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += sum(i * i % 7 for i in range(500))
    return n


def f_window(seconds: float) -> int:
    return burn(seconds)


def g_outside(seconds: float) -> int:
    return burn(seconds)


def a_thread_work(seconds: float) -> int:
    return burn(seconds)


def b_thread_work(seconds: float) -> int:
    return burn(seconds)


def inner_part(seconds: float) -> int:
    return burn(seconds)


def weights(profile: spprof.Profile) -> dict[str, int]:
    """Sampled ns per function name, each sample counted once per function on its stack."""
    out: dict[str, int] = {}
    for s in profile.samples:
        for name in {f.function_name for f in s.frames}:
            out[name] = out.get(name, 0) + s.weight_ns
    return out


def summary(profile: spprof.Profile) -> dict[str, object]:
    return {
        "weights": weights(profile),
        "files": sorted({f.filename for s in profile.samples for f in s.frames}),
        "roots": sorted({s.frames[0].function_name for s in profile.samples if s.frames}),
        "threads": sorted({s.native_thread_id for s in profile.samples}),
        "metadata": profile.metadata,
        "stats": {k: v for k, v in profile.stats.items() if k.startswith(("window", "samples_in"))},
        "samples": profile.sample_count,
    }


def case_before_inside_after() -> dict[str, object]:
    """g before, f in a block, g after; a second block asks for settings the session lacks."""
    spprof.start(interval_ms=5)
    g_outside(0.3)
    with spprof.Profiler() as p:
        f_window(0.4)
    g_outside(0.3)
    with spprof.Profiler(interval_ms=20, mode="wall") as q:
        f_window(0.05)
    with spprof.Profiler(interval_ms=20, mode="wall") as r:  # said once, not twice
        f_window(0.05)

    @spprof.profile()
    def decorated() -> int:
        return f_window(0.2)

    decorated()
    session = spprof.stop()
    assert p.profile is not None and q.profile is not None and r.profile is not None
    return {
        "window": summary(p.profile),
        "asked": summary(q.profile),
        "decorated": summary(decorated.last_profile),  # type: ignore[attr-defined]
        "session": summary(session),
    }


def case_two_threads() -> dict[str, object]:
    """Two threads, each in a thread="current" block; the blocks overlap in time. Thread A
    also opens a labelled block inside its own (nested)."""
    spprof.start(interval_ms=5)
    both_in = threading.Barrier(2)
    results: dict[str, object] = {}

    def run_a() -> None:
        with spprof.Profiler(thread="current") as p:
            both_in.wait()
            a_thread_work(0.3)
            with spprof.Profiler(labels={"route": "/inner"}, thread="current") as inner:
                inner_part(0.2)
            both_in.wait()
        assert inner.profile is not None and p.profile is not None
        inner.profile.save(sys.argv[2] + ".pb.gz", "pprof")
        inner.profile.save(sys.argv[2] + ".speedscope.json", "speedscope")
        results["a"] = summary(p.profile)
        results["a_native_id"] = threading.get_native_id()
        results["inner"] = summary(inner.profile)

    def run_b() -> None:
        with spprof.Profiler(thread="current") as p:
            both_in.wait()
            b_thread_work(0.3)
            both_in.wait()
        assert p.profile is not None
        results["b"] = summary(p.profile)
        results["b_native_id"] = threading.get_native_id()

    threads = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results["session"] = summary(spprof.stop())
    return results


def case_runner_frames() -> dict[str, object]:
    """Run under `python -m spprof`: a window on the CLI's session, and a forked child that
    starts its own session (a gunicorn post_fork hook does the same)."""
    out: dict[str, object] = {}
    with spprof.Profiler() as p:
        f_window(0.2)
    assert p.profile is not None
    out["window"] = summary(p.profile)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        spprof.start(interval_ms=5)
        f_window(0.3)
        child = spprof.stop()
        child.save(sys.argv[2] + ".collapsed.txt", "collapsed")
        with os.fdopen(write, "w") as w:
            json.dump(summary(child), w, default=str)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as r:
        out["child"] = json.load(r)
    os.waitpid(pid, 0)
    return out


def case_orphaned() -> dict[str, object]:
    """A window whose session stops first, and one a forked child leaves: no exception."""
    spprof.start(interval_ms=5)
    w = spprof.Profiler()
    w.start()
    spprof.stop()
    ended = w.stop()
    spprof.start(interval_ms=5)
    read, write = os.pipe()
    with spprof.Profiler() as p:
        pid = os.fork()
        if pid == 0:
            os.close(read)
    if pid == 0:  # the child left the block: its window has no session
        assert p.profile is not None
        os.write(write, json.dumps(p.profile.stats).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as r:
        child = json.load(r)
    os.waitpid(pid, 0)
    spprof.stop()
    return {"ended": ended.stats, "ended_samples": ended.sample_count, "child": child}


def case_fixed_length_closed_late() -> dict[str, object]:
    """A control window of 0.3 s (`spprof record --pid --duration`, a --subprocesses family's
    endpoint window in a worker) closed 0.55 s late, as when the drain that serves it waits
    for a core or the GIL: f inside it, g after its end."""
    from spprof import _session

    spprof.start(interval_ms=5)
    window = _session._control_window(0.3)
    assert window is not None
    f_window(0.25)
    g_outside(0.6)
    profile = _session._close_window(window, _session._metadata(window.session))
    spprof.stop()
    assert profile is not None
    return {"window": summary(profile), "duration_ns": profile.duration_ns}


CASES = {
    "fixed_length_closed_late": case_fixed_length_closed_late,
    "orphaned": case_orphaned,
    "before_inside_after": case_before_inside_after,
    "two_threads": case_two_threads,
    "runner_frames": case_runner_frames,
}

if __name__ == "__main__":
    result = CASES[sys.argv[1]]()
    with open(sys.argv[2], "w") as fh:
        json.dump(result, fh, default=str)
