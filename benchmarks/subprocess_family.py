"""Cost of --subprocesses with many short children: a fork pool with maxtasksperchild=1 runs
CHILDREN tiny tasks, so every task is a new child process that starts a session, writes its
profile and ends; the root merges them all at stop.

    python -m benchmarks.subprocess_family                    # 1,000 children, 3 rounds
    python -m benchmarks.subprocess_family --children 20 --rounds 1   # smoke

Configurations, each in a fresh interpreter, rounds interleaved: plain (no spprof), cpu (the
CLI, children not profiled) and subprocesses (the CLI with --subprocesses). Reported: wall
time per child (medians), the root's merge at stop (stats["subprocesses_merge_ns"]) and
while it ran (["subprocesses_early_merge_ns"], _family_files.py), the most entries the
family directory held (counted by a thread of the program's every 10 ms), the children
merged and lost.
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
import json, multiprocessing, os, sys, threading, time

def task(i):
    return sum(range(2000))

def count(family, most, done):
    while not done.wait(0.01):
        most[0] = max(most[0], len(os.listdir(family)))

if __name__ == "__main__":
    most, done = [0], threading.Event()
    family = json.loads(os.environ.get("SPPROF_SUBPROCESSES", "{}")).get("dir")
    if family:  # the family directory's entries, counted while the pool runs
        threading.Thread(target=count, args=(family, most, done)).start()
    t0 = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(2, maxtasksperchild=1) as pool:
        pool.map(task, range(int(sys.argv[1])), chunksize=1)
    print("WALL", time.perf_counter() - t0)
    done.set()
    print("MOST", most[0])
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
        row["early_s"] = stats["subprocesses_early_merge_ns"] / 1e9
        row["most_entries"] = int(r.stdout.split("MOST")[1].split()[0])
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
    head = ("config", "ms/child", "merge s", "early s", "most", "merged", "lost")
    print(f"{head[0]:<14} " + " ".join(f"{h:>8}" for h in head[1:]))
    for c in CONFIGS:
        rows = runs[c]
        per = statistics.median(r["s_per_child"] for r in rows) * 1e3
        cells = ["-"] * 5
        if c == "subprocesses":
            cells = [
                f"{statistics.median(r['merge_s'] for r in rows):.2f}",
                f"{statistics.median(r['early_s'] for r in rows):.2f}",
                str(max(r["most_entries"] for r in rows)),
                str(min(r["merged"] for r in rows)),
                str(max(r["lost"] for r in rows)),
            ]
        print(f"{c:<14} {per:>8.2f} " + " ".join(f"{x:>8}" for x in cells))
    print(json.dumps(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
