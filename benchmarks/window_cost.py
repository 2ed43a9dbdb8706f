"""Cost of a window's end as a session grows (issue 25, windows on a running session).

A session samples a busy thread at 1 ms; every `--every` seconds the main thread times a
short window (`spprof.Profiler()` inside the session) end to end. With time marks a window
reads only the rows since its start, so the cost stays flat as the session's rows grow; a
full scan grows with them. Prints a markdown row per stage: session rows, median window end.

    python benchmarks/window_cost.py [--seconds S] [--windows N] [--mode wall --threads 8]

CPU mode adds rows at the kernel tick's pace (~250/s per running thread at CONFIG_HZ=250);
wall mode with more threads reaches 100,000+ rows within a minute.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import spprof


def _burn_until(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(i * i for i in range(2000))


def _window_us(windows: int) -> float:
    costs = []
    for _ in range(windows):
        p = spprof.Profiler(thread="current")
        p.start()
        sum(range(1000))
        t0 = time.perf_counter()
        p.stop()
        costs.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(costs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="session length")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--windows", type=int, default=200, help="windows timed per stage")
    ap.add_argument("--mode", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--threads", type=int, default=2, help="busy threads")
    args = ap.parse_args(argv)
    stop = threading.Event()
    busy = [threading.Thread(target=_burn_until, args=(stop,)) for _ in range(args.threads)]
    spprof.start(interval_ms=1, mode=args.mode)
    for t in busy:
        t.start()
    print("| session rows | window end (median) |")
    print("|---|---|")
    try:
        for _ in range(args.stages):
            time.sleep(args.seconds / args.stages)
            rows = spprof.stats().get("sample_rows", 0)  # the store's rows, what a window reads
            print(f"| {rows} | {_window_us(args.windows):.0f} us |")
    finally:
        stop.set()
        for t in busy:
            t.join()
        spprof.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
