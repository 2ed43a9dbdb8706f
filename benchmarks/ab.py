"""Interleaved in-process A/B: spprof's overhead as a median ratio with a bootstrap interval.

    python -m benchmarks.ab WORKLOAD MODE RATE_HZ PAIRS SEGMENT_S [SEED]

MODE is spprof's (cpu, wall), or "signal": no spprof, the workload thread's CPU-clock timer at
RATE_HZ into an empty C handler (ks_arm in benchmarks/kernel_signal.c): what the kernel's timer
and signal delivery alone cost the same workload, measured the same way.

One process runs PAIRS pairs of segments of the same work (about SEGMENT_S of CPU each, the
workload's size calibrated first), one segment of each pair unprofiled and the other with spprof
started just before it and stopped just after, in a random order per pair. A segment's cost is
the CPU time of the program's threads (the process's CPU clock, CLOCK_PROCESS_CPUTIME_ID: user
and kernel time of every thread, ended ones included, so signal delivery counts and so does a
workload that runs in threads of its own, e.g. threads4) less, in the profiled one, what
spprof's own threads (drain, wall census) used during it (/proc/self/task/TID/schedstat), which
is then added back as their own share. ("main_thread" in the output names that program-thread
share; before, it was the calling thread's CPU clock, which a threaded workload barely moves:
threads4 never finished calibrating.) Start and stop are outside the segment,
and so is the threads' first 20 ms (their set-up, paid once per session); an unprofiled segment
waits the same 20 ms before it. Neighbouring segments
share the machine's state of the moment, so load from other processes cancels in each pair's
ratio as far as it can; what remains is spread, which the bootstrap interval (2,000 resamplings
of the pairs, 2.5-97.5 %) shows.
Prints one JSON line.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import spprof
from benchmarks import kernel
from benchmarks.workloads import WORKLOADS


def _tasks() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def _task_cpu_ns(tid: str) -> int:
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0])
    except OSError:  # ended
        return 0


def _calibrate(func: Callable[[int], object], segment_s: float) -> int:
    size = 1
    while True:
        c0 = time.process_time()  # the process's: a workload may run in threads of its own
        func(size)
        used = time.process_time() - c0
        if used >= segment_s / 4 or size >= 1 << 20:
            return max(1, round(size * segment_s / max(used, 1e-6)))
        size *= 2


class EmptySignal:
    """benchmarks/kernel_signal.c as a shared library in a temporary directory: start() arms
    the calling thread's CPU-clock timer into its empty handler, stop() deletes it and gives
    the signals handled."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        lib = Path(self._dir.name) / "kernel_signal.so"
        if not kernel.build(lib, shared=True):
            raise RuntimeError("the signal mode needs a C compiler (cc or gcc)")
        self._lib = ctypes.CDLL(str(lib), use_errno=True)
        self._lib.ks_arm.argtypes = [ctypes.c_int, ctypes.c_long]
        self._lib.ks_disarm.restype = ctypes.c_long

    def start(self, interval_ns: int) -> None:
        if self._lib.ks_arm(1, interval_ns) != 0:
            raise OSError(ctypes.get_errno(), "kernel_signal: could not arm the timer")

    def stop(self) -> int:
        return int(self._lib.ks_disarm())


def bootstrap_median(values: list[float], rng: random.Random, n: int = 2000) -> tuple:
    """The median and its 2.5-97.5 % bootstrap interval."""
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return statistics.median(values), meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def run(workload: str, mode: str, rate_hz: int, pairs: int, segment_s: float, seed: int) -> dict:
    func = WORKLOADS[workload].func
    size = _calibrate(func, segment_s)
    func(size)  # warm-up
    rng = random.Random(seed)
    empty = EmptySignal() if mode == "signal" else None
    off: list[float] = []
    on: list[float] = []
    on_main: list[float] = []
    on_threads: list[float] = []
    signals: list[int] = []
    for _ in range(pairs):
        for profiled in rng.sample([False, True], 2):
            if not profiled:
                # The same pause as before a profiled segment: a segment that follows a 20 ms
                # sleep ran ~3 % cheaper here than one that follows straight on (deep_stack,
                # 2026-11-30: -2.3 % and -3.3 % for spprof with the pause on its side only).
                time.sleep(0.02)
                c0 = time.process_time_ns()
                func(size)
                off.append(float(time.process_time_ns() - c0))
                continue
            before = _tasks()
            if empty is not None:
                empty.start(1_000_000_000 // rate_hz)
            else:
                spprof.start(interval_ms=1000.0 / rate_hz, mode=mode)
            ours = sorted(_tasks() - before)
            time.sleep(0.02)  # the new threads' first pass is a per-session cost, not per segment
            t0 = {t: _task_cpu_ns(t) for t in ours}
            c0 = time.process_time_ns()
            func(size)
            process = float(time.process_time_ns() - c0)
            threads = float(sum(_task_cpu_ns(t) - t0[t] for t in ours))
            main = process - threads  # the program's threads: the process less spprof's own
            if empty is not None:
                st: dict[str, Any] = {"signals": empty.stop()}
            else:
                st = spprof.stats()
                spprof.stop()
            on_main.append(main)
            on_threads.append(max(threads, 0.0))
            on.append(main + max(threads, 0.0))
            signals.append(int(st["signals"]))
    ratios = [b / a for a, b in zip(off, on)]
    main_ratios = [b / a for a, b in zip(off, on_main)]
    med, lo, hi = bootstrap_median(ratios, rng)
    mmed, mlo, mhi = bootstrap_median(main_ratios, rng)
    seg_s = statistics.median(off) / 1e9
    return {
        "workload": workload,
        "mode": mode,
        "rate_hz": rate_hz,
        "pairs": pairs,
        "size": size,
        "segment_cpu_s": seg_s,
        "overhead_pct": 100 * (med - 1),
        "interval_pct": [100 * (lo - 1), 100 * (hi - 1)],
        "main_thread_pct": 100 * (mmed - 1),
        "main_thread_interval_pct": [100 * (mlo - 1), 100 * (mhi - 1)],
        "threads_pct_of_segment": 100 * statistics.median(on_threads) / statistics.median(off),
        "signals_per_cpu_s": statistics.median(signals) / seg_s,
        "loadavg": os.getloadavg(),
    }


def main(argv: list[str]) -> int:
    seed = int(argv[5]) if len(argv) > 5 else 1
    res = run(argv[0], argv[1], int(argv[2]), int(argv[3]), float(argv[4]), seed)
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
