"""Accuracy on a native thread pool: how much of the process's CPU time a profile holds.

    python -m benchmarks.native_pool [--rounds 3] [--seconds 3] [--threads 2]

numpy matrix products with OpenBLAS's own pool (OPENBLAS_NUM_THREADS, threads with no Python
state), profiled by spprof (CLI, 10 ms, CPU mode) and by py-spy (`record -r 100`, its
default) in the same run, rounds alternating. The workload measures its own process CPU time
(time.process_time(): every thread): spprof (the API, started around the timed loop) is
compared with the loop's CPU time, py-spy (which attaches for the whole run) with the whole
run's. A profile's CPU time: spprof's on-CPU sample weights; py-spy's samples x 10 ms (the
active threads it saw). Reported per tool: the median share of the process's CPU in the profile
(1.00: all of it) and the min-max over rounds. docs/performance.md quotes a run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import tools

WORKLOAD = """
import json, os, sys, time
import numpy as np
a = np.random.default_rng(1).random((600, 600))
a @ a  # the pool starts on first use
spprof = None
if os.environ.get("NATIVE_POOL_SPPROF"):
    import spprof
    spprof.start(interval_ms=10)
cpu0, t0 = time.process_time(), time.monotonic()
while time.monotonic() - t0 < float(sys.argv[1]):
    a @ a
out = {"loop_cpu_s": time.process_time() - cpu0}
if spprof is not None:
    p = spprof.stop()
    out["sampled_s"] = sum(s.weight_ns for s in p.samples if s.on_cpu) / 1e9
out["total_cpu_s"] = time.process_time()  # the whole process, start-up included (py-spy's window)
print(json.dumps(out))
"""


def _last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON line in {text[-300:]!r}")


def run_spprof(script: Path, seconds: float, env: dict, tmp: Path) -> float:
    r = subprocess.run(
        [sys.executable, str(script), str(seconds)],
        capture_output=True,
        text=True,
        env=dict(env, NATIVE_POOL_SPPROF="1"),
        timeout=600,
        check=True,
    )
    out = _last_json(r.stdout)
    return out["sampled_s"] / out["loop_cpu_s"]


def run_py_spy(script: Path, seconds: float, env: dict, tmp: Path) -> float:
    spy = tools.py_spy_path()
    raw = tmp / "spy.txt"
    r = subprocess.run(
        [
            spy,
            "record",
            "-r",
            "100",
            "-f",
            "raw",
            "-o",
            str(raw),
            "--",
            sys.executable,
            str(script),
            str(seconds),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    cpu = _last_json(r.stdout)["total_cpu_s"]  # py-spy sampled the whole run
    samples = sum(
        int(line.rsplit(" ", 1)[1]) for line in raw.read_text().splitlines() if line.strip()
    )
    return samples * 0.01 / cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=2)
    opts = ap.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(opts.threads))
    results: dict[str, list[float]] = {"spprof": [], "py-spy": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        script = tmp / "pool.py"
        script.write_text(WORKLOAD)
        for _ in range(opts.rounds):
            results["spprof"].append(run_spprof(script, opts.seconds, env, tmp))
            if tools.py_spy_path():
                results["py-spy"].append(run_py_spy(script, opts.seconds, env, tmp))
    for tool, shares in results.items():
        if not shares:
            print(f"{tool:8} not installed")
            continue
        print(
            f"{tool:8} share of process CPU in the profile: median {statistics.median(shares):.2f} "
            f"(min {min(shares):.2f}, max {max(shares):.2f}, {len(shares)} rounds)"
        )


if __name__ == "__main__":
    main()
