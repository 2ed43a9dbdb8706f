"""Thread start cost: start()+join() of a thread with 1, 1,000 and 5,000 threads alive, and
100,000 short threads one after another, plain and under spprof, in the same run.

    python -m benchmarks.thread_start                 # the docs/performance.md table
    python -m benchmarks.thread_start --smoke         # tiny: every case once, small counts
    python -m benchmarks.thread_start --modes cpu wall --rounds 3

Issue 24 ("Threads at scale"): on 3.12+ a thread start cost more the more threads were alive
(1,000 alive: 200 us plain, 833 us under spprof), because every new thread's threading
profile hook made sys.setprofile re-instrument the code all threads were running (PEP 669).
Goal: at most +15 us per start on every version whatever the number alive; 100,000 short
threads within 1.1x of plain.

Each measurement runs in a fresh interpreter (`--child`): the alive threads wait on an Event,
the session starts (none for plain), then `starts` threads that run an empty target are
started and joined one at a time. The figure is the median over rounds of the wall time per
start+join, rounds of the configurations interleaved, so a load change on the machine hits
plain and spprof alike. Process CPU time per start is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Optional

ALIVE = (1, 1_000, 5_000)
STARTS = 2_000
SHORT_THREADS = 100_000
GOAL_US = 15.0
GOAL_RATIO = 1.1


def _cpu() -> float:
    return time.process_time()  # every thread's, spprof's own included


def _short_target() -> None:
    sum(range(100))  # a little Python, so the thread is a thread that ran


def child(mode: str, alive: int, starts: int, short: bool) -> dict:
    """In the fresh interpreter: the measurement for one (mode, alive) case."""
    release = threading.Event()
    if mode != "plain":
        import spprof

        spprof.start(interval_ms=10, mode=mode)
    sleepers = [threading.Thread(target=release.wait, daemon=True) for _ in range(alive)]
    for t in sleepers:
        t.start()
    target = _short_target if short else (lambda: None)
    c0, t0 = _cpu(), time.perf_counter()
    for _ in range(starts):
        t = threading.Thread(target=target)
        t.start()
        t.join()
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    release.set()
    for t in sleepers:
        t.join()
    if mode != "plain":
        spprof.stop()
    return {"wall_us": wall / starts * 1e6, "cpu_us": cpu / starts * 1e6, "wall_s": wall}


def _measure(mode: str, alive: int, starts: int, short: bool) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.thread_start",
        "--child",
        mode,
        str(alive),
        str(starts),
    ]
    if short:
        cmd.append("--short")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def run(modes: list, rounds: int, starts: int, short_threads: int, alive: tuple, log) -> dict:
    """{case: {mode: {"wall_us": median, "cpu_us": median, ...}}}; cases "alive=N" and "short"."""
    configs = ["plain", *modes]
    cases: list = [(f"alive={n}", n, starts, False) for n in alive]
    if short_threads:
        cases.append(("short", 0, short_threads, True))
    out: dict = {}
    for name, n, count, short in cases:
        runs: dict = {c: [] for c in configs}
        for _ in range(rounds):
            for c in configs:  # interleaved: a load change hits every configuration
                runs[c].append(_measure(c, n, count, short))
        out[name] = {
            c: {
                k: statistics.median(r[k] for r in runs[c]) for k in ("wall_us", "cpu_us", "wall_s")
            }
            for c in configs
        }
        for c in modes:
            out[name][c]["added_us"] = out[name][c]["wall_us"] - out[name]["plain"]["wall_us"]
            out[name][c]["ratio"] = out[name][c]["wall_us"] / out[name]["plain"]["wall_us"]
        log(f"{name}: " + ", ".join(f"{c} {out[name][c]['wall_us']:.1f} us" for c in configs))
    return out


def markdown(result: dict, modes: list) -> str:
    lines = [
        "| case | plain us/start (cpu) | "
        + " | ".join(f"{m}: us/start (cpu), added, ratio" for m in modes)
        + " |",
        "|---|---|" + "---|" * len(modes),
    ]
    for name, by in result.items():
        p = by["plain"]
        cells = [
            f"{by[m]['wall_us']:.1f} ({by[m]['cpu_us']:.1f}), "
            f"{by[m]['added_us']:+.1f}, {by[m]['ratio']:.2f}x"
            for m in modes
        ]
        lines.append(
            f"| {name} | {p['wall_us']:.1f} ({p['cpu_us']:.1f}) | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--child", nargs=3, metavar=("MODE", "ALIVE", "STARTS"))
    ap.add_argument("--short", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="tiny counts, one round")
    ap.add_argument("--modes", nargs="+", default=["cpu"], choices=["cpu", "wall"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the result here")
    ap.add_argument(
        "--alive",
        nargs="+",
        type=int,
        default=list(ALIVE),
        help="threads alive (default: %(default)s)",
    )
    ap.add_argument("--no-short", action="store_true", help="leave out the 100,000 short threads")
    args = ap.parse_args(argv)
    if args.child:
        mode, alive, starts = args.child[0], int(args.child[1]), int(args.child[2])
        print(json.dumps(child(mode, alive, starts, args.short)))
        return 0
    if args.smoke:
        result = run(args.modes, 1, 20, 200, (1, 20), lambda m: print(m, file=sys.stderr))
    else:
        result = run(
            args.modes,
            args.rounds,
            STARTS,
            0 if args.no_short else SHORT_THREADS,
            tuple(args.alive),
            lambda m: print(m, file=sys.stderr),
        )
    print(f"CPython {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(markdown(result, args.modes))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
