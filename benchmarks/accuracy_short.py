"""Accuracy on short threads and on periodic work: per-function shares of CPU time as spprof
and py-spy report them, against what the workload measures with thread CPU clocks.

    python -m benchmarks.accuracy_short                      # 3 rounds per case and profiler
    python -m benchmarks.accuracy_short --rounds 1 --scale 0.2   # smoke

Cases (issue 23, "Every CPU second"):
- `spin1000`: the main thread spins 1 s in `main_work`, then 1,000 threads one after another
  each spin 2 ms in `thread_work` (a thread-per-request server in miniature). Before the random
  timer phase and the thread-end samples, spprof gave `thread_work` 0 % (truth about 67 %).
- `periodic`: one thread alternates 10 ms in `tick_a` and 20 ms in `tick_b` (a 30 ms period
  against a 10 ms sampling interval: a sampler in lock-step with it is biased).

Both profilers sample at 100 Hz. spprof runs in process (CPU mode); py-spy 0.4.3 (pinned in the
Makefile's BENCH_TOOLS) runs the child under `py-spy record -f raw`. A profile's share of a
function is the weight of the samples with it on the stack, among the case's functions; the
error is the total variation distance (TVD) of those shares from the truth's. Each round
runs every profiler on every case, in the same run, on the same interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from benchmarks import tools

RATE_HZ = 100
CASES = {"spin1000": ("main_work", "thread_work"), "periodic": ("tick_a", "tick_b")}


# -- the child: the workloads and their own measure ----------------------------------------------

_cpu: dict[str, float] = {}
_lock = threading.Lock()


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _measured(name: str, seconds: float) -> None:
    t0 = time.thread_time()
    _spin(seconds)
    with _lock:
        _cpu[name] = _cpu.get(name, 0.0) + time.thread_time() - t0


def main_work(seconds: float) -> None:
    _measured("main_work", seconds)


def thread_work(seconds: float) -> None:
    _measured("thread_work", seconds)


def tick_a(seconds: float) -> None:
    _measured("tick_a", seconds)


def tick_b(seconds: float) -> None:
    _measured("tick_b", seconds)


def run_case(case: str, scale: float) -> None:
    if case == "spin1000":
        main_work(1.0 * scale)
        for _ in range(max(1, int(1000 * scale))):
            t = threading.Thread(target=thread_work, args=(0.002,))
            t.start()
            t.join()
    else:
        for _ in range(max(1, int(100 * scale))):
            tick_a(0.010)
            tick_b(0.020)


def child(profiler: str, case: str, scale: float) -> None:
    p = None
    if profiler == "spprof":
        import spprof

        p = spprof.Profiler(interval_ms=1000 / RATE_HZ)
        p.start()
    run_case(case, scale)
    result: dict = {"truth": dict(_cpu)}
    if p is not None:
        p.stop()
        weights = dict.fromkeys(CASES[case], 0)
        for s in p.get_samples():
            for name in {f.function_name for f in s.frames} & weights.keys():
                weights[name] += s.weight_ns
        result["profile"] = weights
    print(json.dumps(result), flush=True)


# -- the driver ----------------------------------------------------------------------------------


def _last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON line in {text[-300:]!r}")


def _shares(weights: dict, names: tuple) -> dict:
    total = sum(weights.get(n, 0) for n in names) or 1
    return {n: weights.get(n, 0) / total for n in names}


def tvd(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a[k] - b[k]) for k in a)


def _child_cmd(profiler: str, case: str, scale: float) -> list:
    return [
        sys.executable,
        "-m",
        "benchmarks.accuracy_short",
        "--child",
        profiler,
        "--case",
        case,
        "--scale",
        str(scale),
    ]


def run_spprof(case: str, scale: float) -> dict:
    cmd = _child_cmd("spprof", case, scale)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    return _last_json(r.stdout)


def run_py_spy(case: str, scale: float) -> dict:
    exe = tools.py_spy_path()
    if exe is None:
        return {"error": "py-spy not installed"}
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.txt")
        cmd = [exe, "record", "-r", str(RATE_HZ), "-f", "raw", "-o", raw, "--"]
        cmd += _child_cmd("py-spy", case, scale)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not os.path.exists(raw):
            return {"error": f"py-spy failed: {(r.stderr or r.stdout).strip()[-200:]}"}
        result = _last_json(r.stdout)
        weights = dict.fromkeys(CASES[case], 0)
        with open(raw) as f:
            for line in f:
                stack, _, count = line.rstrip("\n").rpartition(" ")
                names = {frame.split(" (", 1)[0] for frame in stack.split(";")}
                for name in names & weights.keys():
                    weights[name] += int(count)
        result["profile"] = weights
        return result


def measure(rounds: int, scale: float, log=print) -> dict:
    runs: dict = {(case, tool): [] for case in CASES for tool in ("spprof", "py-spy")}
    for r in range(rounds):
        for case, names in CASES.items():
            for tool, run in (("spprof", run_spprof), ("py-spy", run_py_spy)):
                res = run(case, scale)
                if "error" not in res:
                    truth = _shares(res["truth"], names)
                    got = _shares(res["profile"], names)
                    res["tvd"] = tvd(got, truth)
                    res["share"], res["true_share"] = got[names[1]], truth[names[1]]
                    second = names[1]
                    log(
                        f"  round {r + 1} {case:8} {tool:7}: {second} {100 * got[second]:5.1f} % "
                        f"(truth {100 * truth[second]:5.1f} %), TVD {res['tvd']:.3f}"
                    )
                else:
                    log(f"  {case} {tool}: {res['error']}")
                runs[(case, tool)].append(res)
    return runs


def markdown(runs: dict) -> str:
    lines = [
        f"| case | profiler ({RATE_HZ} Hz) | share of the second function (median) "
        "| truth (median) | TVD (median, max) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for (case, tool), rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            lines.append(f"| {case} | {tool} | {rs[0]['error'] if rs else 'not run'} | | |")
            continue
        tvds = [r["tvd"] for r in ok]
        lines.append(
            f"| {case} | {tool} | {100 * statistics.median(r['share'] for r in ok):.1f} % "
            f"| {100 * statistics.median(r['true_share'] for r in ok):.1f} % "
            f"| {statistics.median(tvds):.3f}, {max(tvds):.3f} |"
        )
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.accuracy_short")
    ap.add_argument("--child", choices=["spprof", "py-spy"], help=argparse.SUPPRESS)
    ap.add_argument("--case", choices=list(CASES), help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="workload size (1: 3 s of CPU)")
    opts = ap.parse_args(argv)
    if opts.child:
        child(opts.child, opts.case, opts.scale)
        return 0
    print(f"Short-thread and periodic accuracy, CPython {sys.version.split()[0]}:")
    print(markdown(measure(opts.rounds, opts.scale)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
