"""Cost of os.fork under spprof: fork + child os._exit(0) + waitpid, plain and under spprof
(whose helper threads are stopped before the fork and started again after it, in the parent).

    python -m benchmarks.fork_cost                # 300 forks per measurement, 3 rounds
    python -m benchmarks.fork_cost --forks 20 --rounds 1   # smoke

Each measurement runs in a fresh interpreter; rounds interleave the configurations. The
figure is the median wall time per fork (the parent's: the fork, its hooks, the wait).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Optional

CONFIGS = ("plain", "cpu", "wall")


def child(config: str, forks: int) -> dict:
    if config != "plain":
        import spprof

        spprof.start(interval_ms=10, mode=config)
    t0 = time.perf_counter()
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    per_fork = (time.perf_counter() - t0) / forks
    if config != "plain":
        spprof.stop()
    return {"us_per_fork": per_fork * 1e6}


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--child", nargs=2, metavar=("CONFIG", "FORKS"))
    ap.add_argument("--forks", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        return 0
    runs: dict = {c: [] for c in CONFIGS}
    for _ in range(args.rounds):
        for c in CONFIGS:
            cmd = [sys.executable, "-m", "benchmarks.fork_cost", "--child", c, str(args.forks)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
            runs[c].append(json.loads(r.stdout.strip().splitlines()[-1])["us_per_fork"])
    plain = statistics.median(runs["plain"])
    print(
        f"CPython {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"{args.forks} forks x {args.rounds} rounds"
    )
    print("| config | us per fork | added |")
    print("|---|---|---|")
    for c in CONFIGS:
        med = statistics.median(runs[c])
        print(f"| {c} | {med:.0f} | {med - plain:+.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
