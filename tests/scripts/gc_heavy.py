"""A GC-heavy workload, profiled, with its own measure of GC time (tests/test_gc_frame.py).

Usage: gc_heavy.py MODE NATIVE SECONDS [OUTPUT]. MODE is "cpu" or "wall", NATIVE "0" or "1".
`make_cycles` builds cyclic garbage beside a large live heap, so the collections it triggers
(automatic, not gc.collect()) take a good share of its time. gc.callbacks measure that share
with the thread's CPU clock from "start" to "stop", and note each collection's window on the
monotonic clock (the clock of Sample.timestamp_ns). Prints one JSON line: the measured GC
CPU, the thread's CPU, the windows, and per sample of the main thread its time, weight,
flags and function names.
With OUTPUT, the profile is also saved there (its format from the suffix).
"""

from __future__ import annotations

import gc
import json
import sys
import time

import spprof

gc_cpu = [0.0]
_started = [0.0]
windows: list[int] = []  # start, stop, start, stop, ... (monotonic ns)


def on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _started[0] = time.thread_time()
        windows.append(time.monotonic_ns())
    else:
        windows.append(time.monotonic_ns())
        gc_cpu[0] += time.thread_time() - _started[0]


def make_cycles(seconds: float) -> int:
    """Cyclic garbage: every collection it triggers finds pairs that only refer to each other."""
    made = 0
    seed = 12345
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        for _ in range(1000):
            # Lists, not instances: no Python __init__ runs, so the collection starts in
            # this frame on every version (at the allocation before 3.12, at the loop's
            # eval-breaker check from 3.12).
            a: list = []
            b = [a]
            a.append(b)
        made += 1000
        # Work that allocates nothing the GC tracks, for a pseudo-random while (inline: a
        # call could run the pending collection in another frame): collections then fall
        # at random phases of the sampling timer's tick, never in step with it.
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        spin, until = 0, seed % 20000
        while spin < until:
            spin += 1
    return made


def main() -> None:
    mode, native, seconds = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3])
    output = sys.argv[4] if len(sys.argv) > 4 else None
    # A live heap the collector walks each time (the old generations), built before the
    # profile starts; the thresholds make full collections come often.
    live = [[[] for _ in range(50)] for _ in range(1000)]
    gc.collect()
    gc.set_threshold(2000, 5, 5)
    gc.callbacks.append(on_gc)
    p = spprof.Profiler(interval_ms=1, mode=mode, native=native, output_path=output)
    p.start()
    cpu0, wall0 = time.thread_time(), time.monotonic()
    make_cycles(seconds)
    cpu, wall = time.thread_time() - cpu0, time.monotonic() - wall0
    p.stop()
    gc.callbacks.remove(on_gc)
    main_tid = next(s.native_thread_id for s in p.get_samples() if s.thread_name == "MainThread")
    rows = [
        (
            s.weight_ns,
            s.on_cpu,
            s.idle,
            s.runnable,
            [f.function_name for f in s.frames],
            s.timestamp_ns,
        )
        for s in p.get_samples()
        # A thread-end sample (the expiries owed at stop) is no capture: it repeats the last
        # stack, <GC> or not, and samples_in_gc counts captures.
        if s.native_thread_id == main_tid and not s.thread_end
    ]
    stats = p.profile.stats
    print(
        json.dumps(
            {
                "gc_cpu": gc_cpu[0],
                "cpu": cpu,
                "wall": wall,
                "live": len(live),
                "rows": rows,
                "samples_in_gc": stats.get("samples_in_gc"),
                "windows": windows,
            }
        )
    )


if __name__ == "__main__":
    main()
