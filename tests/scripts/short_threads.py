"""Short threads under spprof, the truth measured inside.

argv: WORKLOAD MODE TIMER INTERVAL_MS OUT.

WORKLOAD: "hash300" (300 threads one after another, each hashing ~7 ms with the GIL released
by hashlib) or "spin1000" (the main thread spins 1 s, then 1,000 threads one after another each
spin 2 ms). Every thread's function measures its own CPU time with its thread CPU clock; the
process's CPU over the session comes from the process CPU clock read right after start() and
right before stop(). OUT receives JSON: the truth and what the profile says (CPU seconds per
function, sampled CPU in total, thread-end samples).
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time

import spprof

_truth: dict[str, float] = {"thread_work": 0.0, "main_spin": 0.0}
_lock = threading.Lock()
_BUF = b"x" * (64 << 10)  # hashlib releases the GIL above 2 KiB


def hash_for(seconds: float) -> None:
    t0 = time.thread_time()
    h = hashlib.sha256()
    while time.thread_time() - t0 < seconds:
        h.update(_BUF)
    with _lock:
        _truth["thread_work"] += time.thread_time() - t0


def spin_for(seconds: float) -> None:
    t0 = time.thread_time()
    n = 0
    while time.thread_time() - t0 < seconds:
        n += 1
    with _lock:
        _truth["thread_work"] += time.thread_time() - t0


def main_spin(seconds: float) -> None:
    t0 = time.thread_time()
    n = 0
    while time.thread_time() - t0 < seconds:
        n += 1
    _truth["main_spin"] += time.thread_time() - t0


def one_after_another(target, count: int, seconds: float) -> None:
    for _ in range(count):
        t = threading.Thread(target=target, args=(seconds,))
        t.start()
        t.join()


def main() -> None:
    workload, mode, timer, interval_ms, out = sys.argv[1:6]
    spprof.start(interval_ms=float(interval_ms), mode=mode, timer=timer)
    cpu0 = time.process_time()
    if workload == "hash300":
        one_after_another(hash_for, 300, 0.007)
    elif workload == "spin1000":
        main_spin(1.0)
        one_after_another(spin_for, 1000, 0.002)
    else:
        raise SystemExit(f"unknown workload {workload!r}")
    cpu1 = time.process_time()
    profile = spprof.stop()
    stats = spprof.stats()
    samples = profile.samples
    on_cpu = [s for s in samples if s.on_cpu and not s.idle and not s.runnable]
    ended = [s for s in samples if getattr(s, "thread_end", False)]
    work = "hash_for" if workload == "hash300" else "spin_for"
    by_function: dict[str, float] = {}
    for s in on_cpu:
        for name in {f.function_name for f in s.frames}:
            by_function[name] = by_function.get(name, 0.0) + s.weight_ns / 1e9
    result = {
        "truth": {
            "process_cpu": cpu1 - cpu0,
            "thread_work": _truth["thread_work"],
            "main_spin": _truth["main_spin"],
        },
        "profile": {
            "cpu": sum(s.weight_ns for s in on_cpu) / 1e9,
            "thread_work": by_function.get(work, 0.0),
            "main_spin": by_function.get("main_spin", 0.0),
            "thread_table_cpu": sum(t.cpu_ns for t in profile.threads) / 1e9,
            "thread_end_samples": len(ended),
            "thread_end_weight": sum(s.weight_ns for s in ended) / 1e9,
            # spprof's own threads (drain, wall census): in the process's CPU, never sampled
            "spprof_threads_cpu": profile.stats.get("cpu_spprof_threads_ns", 0) / 1e9,
            "samples_in_profiler": profile.stats.get("samples_in_profiler", 0),
        },
        "stats": {
            k: stats.get(k)
            for k in (
                "timer",
                "signals",
                "timer_overruns",
                "thread_end_samples",
                "thread_end_expiries",
                "thread_end_ns",
                "threads_unsampled",
                "threads_unsampled_cpu_ns",
                "samples_dropped",
                # where a counted thread-end record could go instead of the profile
                "records_unknown_thread",
                "dropped_memory_limit",
                "idle_samples_folded",
                "ring_rewinds",
                "threads_rejoined",
            )
        },
        # the CPU balance: where the process's CPU went that no sample holds (a failed share
        # check shows whether an outlier is teardown, threads missed between scans, or neither)
        "balance": {
            k: profile.stats.get(k)
            for k in (
                "cpu_process_ns",
                "cpu_profile_ns",
                "cpu_spprof_threads_ns",
                "cpu_ended_between_scans_ns",
                "cpu_unsampled_threads_ns",
                "cpu_before_found_ns",
                "cpu_signal_blocked_ns",
                "cpu_unaccounted_ns",
            )
        },
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
