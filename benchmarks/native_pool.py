"""Accuracy on a native thread pool: how much of the process's CPU time a profile holds, and
how well it splits that time between the process's threads.

    python -m benchmarks.native_pool [--rounds 3] [--seconds 3] [--threads 2]

numpy matrix products with OpenBLAS's own pool (OPENBLAS_NUM_THREADS, threads with no Python
state), profiled by spprof (the API, started around the timed loop, 10 ms, CPU mode) and by
py-spy (`record -r 100 --threads`, its default rate) in the same run, rounds alternating.

Two figures per tool:
- share: the profile's CPU time over the process's (time.process_time(), every thread). spprof
  is compared with the loop's CPU time, py-spy (which attaches for the whole run) with the
  whole run's. A profile's CPU time: spprof's on-CPU sample weights; py-spy's samples x 10 ms
  (the active threads it saw). 1.00: all of it.
- TVD: the total variation distance between the profile's distribution of CPU time over the
  workload's threads (the main Python thread and each OpenBLAS worker, identified by OS thread
  id) and the truth: each thread's own CPU time, read by the workload from
  /proc/self/task/*/schedstat (ns; utime+stime of .../stat where schedstat reads 0) over the
  same window: for spprof the timed loop, for py-spy the whole run (each thread's CPU time since
  it began, read at the end). The workload's threads are those alive before the profiler
  starts; spprof's own threads are not among them (its summary reports them apart). 0: the
  profile splits the time between the threads as the kernel measured it; a thread the profile
  misses adds its true share.
Reported per tool: the median and min-max of the share, the median and max of the TVD, and the
main thread's median share of the threads' CPU time in the profile and in the truth.
docs/performance.md quotes a run. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from benchmarks import tools

WORKLOAD = """
import json, os, sys, time
import numpy as np

def thread_cpu_ns():
    # Every OS thread's own CPU time in ns, by OS thread id.
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
            if ns == 0:  # schedstat off in this kernel: utime + stime, in clock ticks
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ns = (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            continue  # the thread ended while we read
        out[str(tid)] = ns
    return out

a = np.random.default_rng(1).random((600, 600))
a @ a  # the pool starts on first use
pool = set(thread_cpu_ns())  # the workload's threads: main and OpenBLAS's workers
spprof = None
if os.environ.get("NATIVE_POOL_SPPROF"):
    import spprof
    spprof.start(interval_ms=10)
cpu0, t0 = time.process_time(), time.monotonic()
before = thread_cpu_ns()
while time.monotonic() - t0 < float(sys.argv[1]):
    a @ a
after = thread_cpu_ns()
out = {
    "loop_cpu_s": time.process_time() - cpu0,
    "main_tid": str(os.getpid()),
    "truth_loop_ns": {t: after[t] - before[t] for t in pool if t in before and t in after},
}
if spprof is not None:
    p = spprof.stop()
    out["sampled_s"] = sum(s.weight_ns for s in p.samples if s.on_cpu) / 1e9
    per_thread = {}
    for s in p.samples:
        if s.on_cpu:
            tid = str(s.native_thread_id)
            per_thread[tid] = per_thread.get(tid, 0) + s.weight_ns
    out["profile_ns"] = per_thread
# py-spy's window is the whole run: each thread's CPU time since it began
out["truth_run_ns"] = {t: ns for t, ns in thread_cpu_ns().items() if t in pool}
out["total_cpu_s"] = time.process_time()  # the whole process, start-up included
print(json.dumps(out))
"""

RATE_HZ = 100
# py-spy --threads puts "thread (<OS tid>)" or "thread (<OS tid>): <name>" outermost (Linux).
_PY_SPY_THREAD = re.compile(r"^thread \((\d+)\)")


def _last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON line in {text[-300:]!r}")


def _result(cpu_s: float, profile_s: float, profile: dict, truth: dict, main_tid: str) -> dict:
    """One round of one tool: share of process CPU, TVD over threads, main thread's shares."""
    total_p, total_t = sum(profile.values()) or 1, sum(truth.values()) or 1
    return {
        "cpu_s": cpu_s,
        "share": profile_s / cpu_s,
        "tvd": tools.tvd(profile, truth),
        "main_profile": profile.get(main_tid, 0) / total_p,
        "main_truth": truth.get(main_tid, 0) / total_t,
        "threads": len(truth),
    }


def run_spprof(script: Path, seconds: float, env: dict) -> dict:
    r = subprocess.run(
        [sys.executable, str(script), str(seconds)],
        capture_output=True,
        text=True,
        env=dict(env, NATIVE_POOL_SPPROF="1"),
        timeout=600,
        check=True,
    )
    out = _last_json(r.stdout)
    return _result(
        out["loop_cpu_s"],
        out["sampled_s"],
        out["profile_ns"],
        out["truth_loop_ns"],
        out["main_tid"],
    )


def py_spy_threads(raw: str) -> dict:
    """py-spy's raw (collapsed) `--threads` output: sampled seconds by OS thread id."""
    per_thread: dict[str, float] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        m = _PY_SPY_THREAD.match(stack)
        if m is None:
            raise ValueError(f"py-spy line without a thread frame: {line[:200]!r}")
        per_thread[m.group(1)] = per_thread.get(m.group(1), 0.0) + int(count) / RATE_HZ
    return per_thread


def run_py_spy(script: Path, seconds: float, env: dict, tmp: Path) -> Optional[dict]:
    spy = tools.py_spy_path()
    if spy is None:
        return None
    raw = tmp / "spy.txt"
    cmd = [spy, "record", "-r", str(RATE_HZ), "--threads", "-f", "raw", "-o", str(raw), "--"]
    r = subprocess.run(
        [*cmd, sys.executable, str(script), str(seconds)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    out = _last_json(r.stdout)
    profile = py_spy_threads(raw.read_text())
    cpu = out["total_cpu_s"]  # py-spy sampled the whole run
    return _result(cpu, sum(profile.values()), profile, out["truth_run_ns"], out["main_tid"])


def markdown(results: dict[str, list[dict]]) -> str:
    lines = [
        "| tool | share of process CPU in the profile (median, min-max) "
        "| TVD over threads (median, max) | main thread's share: profile / truth (median) |",
        "| --- | --- | --- | --- |",
    ]
    for tool, rs in results.items():
        if not rs:
            lines.append(f"| {tool} | not installed | | |")
            continue
        shares, tvds = [r["share"] for r in rs], [r["tvd"] for r in rs]
        main_p = statistics.median(r["main_profile"] for r in rs)
        main_t = statistics.median(r["main_truth"] for r in rs)
        lines.append(
            f"| {tool} | {statistics.median(shares):.2f} ({min(shares):.2f}-{max(shares):.2f}) "
            f"| {statistics.median(tvds):.3f}, {max(tvds):.3f} "
            f"| {100 * main_p:.1f} % / {100 * main_t:.1f} % |"
        )
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.native_pool")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=2)
    opts = ap.parse_args(argv)
    if not os.path.isdir("/proc/self/task"):
        print("native_pool: needs /proc/self/task (Linux) for the threads' CPU times")
        return 1
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(opts.threads))
    results: dict[str, list[dict]] = {"spprof": [], "py-spy": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        script = tmp / "pool.py"
        script.write_text(WORKLOAD)
        for n in range(opts.rounds):
            rounds = {"spprof": run_spprof(script, opts.seconds, env)}
            spy = run_py_spy(script, opts.seconds, env, tmp)
            if spy is not None:
                rounds["py-spy"] = spy
            for tool, r in rounds.items():
                results[tool].append(r)
                print(
                    f"  round {n + 1} {tool:7}: process CPU {r['cpu_s']:.2f} s, "
                    f"share {r['share']:.2f}, TVD {r['tvd']:.3f}, "
                    f"main thread {100 * r['main_profile']:.1f} % "
                    f"(truth {100 * r['main_truth']:.1f} %, {r['threads']} threads)"
                )
    print(
        f"Native thread pool (OPENBLAS_NUM_THREADS={opts.threads}, {opts.seconds:g} s), "
        f"CPython {sys.version.split()[0]}:"
    )
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
