"""What a drain pass holds the GIL for, with 1, 1,000 and 5,000 threads alive.

    python -m benchmarks.pass_cost                   # the docs/performance.md table
    python -m benchmarks.pass_cost --smoke           # tiny: every cell once
    python -m benchmarks.pass_cost --modes cpu wall --rounds 3
    python -m benchmarks.pass_cost --churn           # the main thread starts and joins threads

Issue 24 ("Threads at scale"): every pass of the drain thread takes the GIL from the program
(at most every 250 ms when the rings are quiet), and what it does there grew with the threads
alive: with 5,000 threads waiting, a pass held the GIL for 12-17 ms (the /proc/self/task
listing, a CPU clock read per thread, walks of hash maps), so every Python thread stood still
for that long four times a second.

Each measurement runs in a fresh interpreter (`--child`): the session starts, `alive` threads
wait on an Event, and after a second of settling the session's own `drain_ns` (time its drain
held the GIL) and `drain_cpu_ns` are read over `--seconds` of quiet, divided by the passes
(`drains`) in that span, and the process's CPU over that span (spprof's threads': the
program only waits), as a share of one core. The figure is the median over rounds,
configurations interleaved. With `--churn` the main thread starts and joins threads with an
empty target over that span instead of sleeping (a thread-per-request program: every pass
registers and retires hundreds); the last column is then the program's CPU as well.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from typing import Optional

ALIVE = (1, 1_000, 5_000)
SECONDS = 3.0


def _churn(seconds: float) -> int:
    """Start and join threads with an empty target for `seconds`; how many."""
    starts, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        starts += 1
    return starts


def child(mode: str, alive: int, seconds: float, churn: bool = False) -> dict:
    """In the fresh interpreter: GIL held and CPU per drain pass, in microseconds."""
    import spprof
    from spprof import _ext

    release = threading.Event()
    spprof.start(interval_ms=10, mode=mode)
    waiting = [threading.Thread(target=release.wait, daemon=True) for _ in range(alive)]
    for t in waiting:
        t.start()
    time.sleep(1.0)  # every thread registered and found by a pass or two
    s0, p0, w0 = _ext.stats(), time.process_time(), time.monotonic()
    starts = 0
    if churn:
        starts = _churn(seconds)
    else:
        time.sleep(seconds)
    s1, p1, w1 = _ext.stats(), time.process_time(), time.monotonic()
    release.set()
    for t in waiting:
        t.join()
    spprof.stop()
    passes = max(1, s1["drains"] - s0["drains"])
    return {
        "passes": passes,
        "gil_us": (s1["drain_ns"] - s0["drain_ns"]) / passes / 1e3,
        "cpu_us": (s1["drain_cpu_ns"] - s0["drain_cpu_ns"]) / passes / 1e3,
        # Every thread of the program waits and its main thread sleeps: the process's CPU is
        # spprof's threads' (the drain, and in wall mode the census), as a share of one core.
        "own_pct": 100 * (p1 - p0) / (w1 - w0),
        "starts": starts,
    }


def _measure(mode: str, alive: int, seconds: float, churn: bool = False) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.pass_cost", "--child", mode, str(alive), str(seconds)]
    if churn:
        cmd.append("--churn")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def run(modes: list, rounds: int, alive: tuple, seconds: float, log, churn: bool = False) -> dict:
    """{mode: {alive: {"gil_us": median, "cpu_us": median, "passes": median}}}"""
    runs: dict = {(m, n): [] for m in modes for n in alive}
    for _ in range(rounds):
        for n in alive:
            for m in modes:  # interleaved: a load change hits every configuration
                runs[(m, n)].append(_measure(m, n, seconds, churn))
    out: dict = {m: {} for m in modes}
    for (m, n), rs in runs.items():
        keys = ("gil_us", "cpu_us", "own_pct", "passes", "starts")
        out[m][n] = {k: statistics.median(r[k] for r in rs) for k in keys}
        log(f"{m}, {n} alive: {out[m][n]['gil_us']:.0f} us of GIL per pass")
    return out


def markdown(result: dict, churn: bool = False) -> str:
    cpu = "process CPU" if churn else "spprof's CPU"
    lines = [
        "| mode | threads alive | GIL held per pass, us | drain CPU per pass, us "
        f"| {cpu}, % of a core | passes | threads started |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for m, by in result.items():
        for n, r in by.items():
            lines.append(
                f"| {m} | {n:,} | {r['gil_us']:.0f} | {r['cpu_us']:.0f} | {r['own_pct']:.2f} "
                f"| {r['passes']:.0f} | {r['starts']:.0f} |"
            )
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--child", nargs=3, metavar=("MODE", "ALIVE", "SECONDS"))
    ap.add_argument("--smoke", action="store_true", help="tiny counts, one round")
    ap.add_argument("--modes", nargs="+", default=["cpu", "wall"], choices=["cpu", "wall"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the result here")
    ap.add_argument(
        "--churn", action="store_true", help="start and join threads instead of sleeping"
    )
    args = ap.parse_args(argv)
    if args.child:
        mode, alive, seconds = args.child
        print(json.dumps(child(mode, int(alive), float(seconds), args.churn)))
        return 0
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    if args.smoke:
        result = run(args.modes, 1, (1, 50), 0.6, log, args.churn)
    else:
        result = run(args.modes, args.rounds, ALIVE, SECONDS, log, args.churn)
    print(markdown(result, args.churn))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {m: {str(n): r for n, r in by.items()} for m, by in result.items()}, f, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
