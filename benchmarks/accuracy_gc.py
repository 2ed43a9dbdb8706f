"""Accuracy on a GC-heavy workload: the share of CPU time in the cyclic garbage collector,
as spprof and py-spy report it, against what the interpreter itself measures.

    python -m benchmarks.accuracy_gc                  # 5 rounds of 3 s per profiler
    python -m benchmarks.accuracy_gc --rounds 1 --seconds 0.5   # smoke

Ground truth: gc.callbacks, inside the workload, sum the thread's CPU clock from each
collection's "start" to its "stop" (time.thread_time). The workload (`make_cycles`) builds
cyclic garbage beside a large live heap, with a pseudo-random pause between batches so
collections do not run in step with a sampler's period.

spprof runs in process (`native=False`: the <GC> frame needs no native unwinding); its share
is the weight of the samples with a <GC> frame. py-spy (pinned in the Makefile's BENCH_TOOLS)
samples from outside at the same rate; it shows the collector only with --native, as C
frames (gc_collect_main and its callees on 3.12; collect/gc_collect_region elsewhere), so it
runs with --native and its share is the samples with such a frame. Error: |share - truth|
in points, which is also the total variation distance between the two-way split (GC, rest)
of the profile and of the truth. Each round runs every profiler once, in the same run, on
the same interpreter.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Optional

from benchmarks import tools

RATE_HZ = 100
# C functions of the collector, 3.9-3.15 (a py-spy --native frame is "name (file.c:line)").
GC_FUNCTIONS = (
    "gc_collect_main",
    "gc_collect_region",
    "gc_collect_young",
    "gc_collect_increment",
    "gc_collect_full",
    "gc_collect_with_callback",
    "gc_collect_generations",
    "collect_with_callback",
    "collect_generations",
    "_PyGC_Collect",
    "_Py_RunGC",
    "collect",
)


# -- the child: the workload and its own measure -------------------------------------------------

# The workload and its gc.callbacks measure are tests/scripts/gc_heavy.py's, which
# tests/test_gc_frame.py checks sample by sample: the benchmark measures the same thing.
_GC_HEAVY = Path(__file__).resolve().parent.parent / "tests" / "scripts" / "gc_heavy.py"


def _load_gc_heavy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gc_heavy", _GC_HEAVY)
    assert spec is not None and spec.loader is not None, _GC_HEAVY
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(profiler: str, seconds: float) -> None:
    live = [[[] for _ in range(50)] for _ in range(1000)]
    gc.collect()
    gc.set_threshold(2000, 5, 5)
    workload = _load_gc_heavy()
    gc.callbacks.append(workload.on_gc)
    if profiler == "py-spy":
        print("ready", flush=True)
        sys.stdin.readline()
    p = None
    if profiler == "spprof":
        import spprof

        p = spprof.Profiler(interval_ms=1000 / RATE_HZ)
        p.start()
    cpu0 = time.thread_time()
    workload.make_cycles(seconds)
    cpu = time.thread_time() - cpu0
    result: dict = {"truth": workload.gc_cpu[0] / cpu, "cpu_s": cpu, "live": len(live)}
    if p is not None:
        p.stop()
        rows = [
            (s.weight_ns, any(f.function_name == "<GC>" for f in s.frames))
            for s in p.get_samples()
            if s.thread_name == "MainThread"
        ]
        total = sum(w for w, _ in rows) or 1
        result["share"] = sum(w for w, gc_ in rows if gc_) / total
        result["samples"] = len(rows)
    print(json.dumps(result), flush=True)


# -- the driver ----------------------------------------------------------------------------------


def _is_gc_frame(frame: str) -> bool:
    name = frame.split(" (", 1)[0]
    return name in GC_FUNCTIONS


def _py_spy_share(raw: str) -> tuple[float, int]:
    """GC share and sample count of py-spy's raw (collapsed) output, main thread only."""
    total = in_gc = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or "make_cycles" not in stack:
            continue  # the set-up before "go", and other threads
        n = int(count)
        total += n
        if any(_is_gc_frame(f) for f in stack.split(";")):
            in_gc += n
    return (in_gc / total if total else 0.0), total


def _run_spprof(seconds: float) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.accuracy_gc",
        "--child",
        "spprof",
        "--seconds",
        str(seconds),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _run_py_spy(seconds: float) -> dict:
    exe = tools.py_spy_path()
    if exe is None:
        return {"error": "py-spy not installed"}
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.accuracy_gc",
        "--child",
        "py-spy",
        "--seconds",
        str(seconds),
    ]
    child_p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child_p.stdin is not None and child_p.stdout is not None
    if child_p.stdout.readline().strip() != "ready":
        child_p.kill()
        return {"error": "child did not start"}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.txt")
        spy = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(child_p.pid),
                "--native",
                "-r",
                str(RATE_HZ),
                "-f",
                "raw",
                "-o",
                path,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert spy.stdout is not None
        first = spy.stdout.readline()
        if "Sampling process" not in first:
            child_p.kill()
            child_p.wait()
            spy.wait()
            return {"error": f"py-spy could not attach: {first.strip()}"}
        child_p.stdin.write("go\n")
        child_p.stdin.flush()
        result = json.loads(child_p.stdout.readline())
        child_p.wait(timeout=600)
        spy.wait(timeout=60)
        with open(path) as f:
            result["share"], result["samples"] = _py_spy_share(f.read())
    return result


def measure(rounds: int, seconds: float, log=print) -> dict:
    runs: dict = {"spprof": [], "py-spy": []}
    for r in range(rounds):
        for name, run in (("spprof", _run_spprof), ("py-spy", _run_py_spy)):
            res = run(seconds)
            if "error" in res:
                log(f"  {name}: {res['error']}")
            else:
                res["error_points"] = 100.0 * abs(res["share"] - res["truth"])
                log(
                    f"  round {r + 1} {name:7}: GC {100 * res['share']:5.1f} % of "
                    f"{res['samples']} samples, truth {100 * res['truth']:5.1f} %, "
                    f"error {res['error_points']:.1f} points"
                )
            runs[name].append(res)
    return runs


def markdown(runs: dict, seconds: float) -> str:
    lines = [
        f"| profiler ({RATE_HZ} Hz, {seconds:g} s CPU per round) | GC share (median) "
        "| truth (median) | error, points (median, max) |",
        "| --- | --- | --- | --- |",
    ]
    for name, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            why = rs[0]["error"] if rs else "not run"
            lines.append(f"| {name} | {why} | | |")
            continue
        errs = [r["error_points"] for r in ok]
        lines.append(
            f"| {name} | {100 * statistics.median(r['share'] for r in ok):.1f} % "
            f"| {100 * statistics.median(r['truth'] for r in ok):.1f} % "
            f"| {statistics.median(errs):.1f}, {max(errs):.1f} |"
        )
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.accuracy_gc")
    ap.add_argument("--child", choices=["spprof", "py-spy"], help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=5)
    opts = ap.parse_args(argv)
    if opts.child:
        child(opts.child, opts.seconds)
        return 0
    print(f"GC-heavy accuracy, CPython {sys.version.split()[0]}:")
    runs = measure(opts.rounds, opts.seconds)
    print(markdown(runs, opts.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
