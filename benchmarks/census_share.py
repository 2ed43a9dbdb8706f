"""How many records share their root side when the wall census walks deep threads.

    python -m benchmarks.census_share                 # the docs/performance.md figures
    python -m benchmarks.census_share --threads 4 --seconds 1

Wall mode: `threads` threads, each `depth` calls deep, alternate 2 ms of CPU with 8 ms asleep,
so the census walks them (a record written by another thread) between their own handler's
records. A record stores only the frames its ring's last record lacked at its root end,
whoever wrote either (docs/architecture.md, "Records share their root side"). Prints the
session's record counts and the drain's time, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import spprof


def _leaf(stop: threading.Event) -> None:
    while not stop.is_set():
        end = time.thread_time() + 0.002
        while time.thread_time() < end:
            pass
        time.sleep(0.008)


def _down(depth: int, stop: threading.Event) -> None:
    if depth > 0:
        return _down(depth - 1, stop)
    return _leaf(stop)


def measure(threads: int, depth: int, seconds: float) -> dict[str, int]:
    stop = threading.Event()
    with spprof.Profiler(interval_ms=2, mode="wall"):
        workers = [threading.Thread(target=_down, args=(depth, stop)) for _ in range(threads)]
        for t in workers:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in workers:
            t.join()
    st = spprof.stats()
    keys = ("records_drained", "records_root_shared", "records_without_base", "drains", "drain_ns")
    return {k: st[k] for k in keys}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=20)
    ap.add_argument("--depth", type=int, default=120)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args(argv)
    print(json.dumps(measure(args.threads, args.depth, args.seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
