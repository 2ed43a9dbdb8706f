"""How complete `--native` walks are on the data libraries people profile (issue 28).

    python -m benchmarks.native_libs [--python PY] [--seconds 3] [--rounds 1] [--workloads ...]

Each workload runs in a fresh interpreter (`PY`, default this one) for `--seconds` of CPU under
`spprof.Profiler(interval_ms=1, native=True)`: numpy (matmul and SVD of 1500x1500, OpenBLAS),
pandas (groupby and merge on 2M rows), scikit-learn (a random forest fit) and torch (a CPU MLP
training step, two threads). A library that is not installed in `PY` is reported as such. The
set-up is the benchmark's, never a test's: a venv with the pinned wheels and spprof,

    python3.11 -m venv /tmp/nl && /tmp/nl/bin/pip install numpy==2.2.6 pandas==2.3.3 \\
        scikit-learn==1.7.2 torch==2.13.0 && /tmp/nl/bin/pip install .

With `--py-spy PATH`, each workload also runs with `py-spy record --native -r 1000` attached
once it has warmed up, and a second table sets the two side by side on the samples of threads
that run Python: how many, the share whose innermost frame is native (a Python leaf in these
workloads means the native walk found nothing), the native frame labels, and the wall
time the asked CPU seconds took (py-spy stops the process for each sample).

Per workload: the native walks, how many reached the thread's start (`bottom`), every other
stop reason, the frames found by the leaf heuristic and by the frame-pointer fallback
(`native_leaf_steps`, `native_fp_steps`), the capture time per sample (`capture_ns`, on
whatever machine runs it: compare runs of one machine only), and the time the drain held the
GIL per 1,000 samples (`drain_ns`: building stacks and naming native frames, time the
program's threads could not run Python) and the drain's CPU in it (`drain_cpu_ns`), and the
module files read for names: by the drain thread without the GIL (how many, and how long the
reads took: `symbol_files_read_off_gil`, `symbol_file_read_ns`) and with it
(`symbol_files_read_under_gil`: the stop's last pass, when a module was first met there).
docs/native-unwinding.md quotes runs before and after the stack-reading expressions, the
leaf heuristic and the realigned-kernel search, and the drain's time before and after
symbols came from the module's own table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from typing import Optional

WORKLOADS = ("numpy", "pandas", "sklearn", "torch")

# The child: imports the library, warms up, then profiles `seconds` of CPU of the work.
CHILD = textwrap.dedent(
    """
    import json, sys, time
    name, seconds = sys.argv[1], float(sys.argv[2])
    try:
        if name == "numpy":
            import numpy as np
            rng = np.random.default_rng(0)
            a = rng.standard_normal((1500, 1500))
            def work():
                np.linalg.svd(a @ a.T, compute_uv=False)
        elif name == "pandas":
            import numpy as np, pandas as pd
            rng = np.random.default_rng(0)
            df = pd.DataFrame({"k": rng.integers(0, 1000, 2_000_000), "v": rng.random(2_000_000)})
            other = pd.DataFrame({"k": np.arange(1000), "w": np.arange(1000.0)})
            def work():
                df.groupby("k")["v"].agg(["mean", "sum", "std"])
                df.merge(other, on="k").sort_values("v")
        elif name == "sklearn":
            import numpy as np
            from sklearn.ensemble import RandomForestClassifier
            rng = np.random.default_rng(0)
            x = rng.standard_normal((4000, 20)); y = (x[:, 0] + x[:, 1] > 0).astype(int)
            def work():
                RandomForestClassifier(n_estimators=20, n_jobs=1, random_state=0).fit(x, y)
        elif name == "torch":
            import torch
            torch.set_num_threads(2)
            torch.manual_seed(0)
            nn = torch.nn
            m = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10))
            opt = torch.optim.SGD(m.parameters(), lr=0.01)
            x = torch.randn(512, 256); y = torch.randint(0, 10, (512,))
            def work():
                for _ in range(5):
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(m(x), y).backward()
                    opt.step()
        else:
            raise SystemExit("unknown workload " + name)
    except ImportError as exc:
        print(json.dumps({"missing": str(exc)}))
        raise SystemExit(0)
    work()
    if len(sys.argv) > 3:  # for py-spy: the same work, no spprof, once py-spy is attached
        print("ready", flush=True)
        time.sleep(1.0)  # py-spy attaches; an idle thread is not sampled
        t0, w0 = time.process_time(), time.perf_counter()
        while time.process_time() - t0 < seconds:
            work()
        print(json.dumps({"wall_s": time.perf_counter() - w0}))
        raise SystemExit(0)
    import spprof  # before the clocks start: its import is no part of the work
    t0, w0 = time.process_time(), time.perf_counter()
    with spprof.Profiler(interval_ms=1, native=True) as p:
        while time.process_time() - t0 < seconds:
            work()
    wall_s = time.perf_counter() - w0
    s = p.profile.stats
    keys = ("samples_captured", "native_unwinds", "native_stop_reasons", "native_leaf_steps",
            "native_fp_steps", "capture_ns", "drain_ns", "drain_cpu_ns",
            "symbol_files_read_off_gil", "symbol_file_read_ns", "symbol_files_read_under_gil")
    out = {k: s.get(k) for k in keys}
    out["wall_s"] = wall_s
    # What py-spy can be compared on: the samples of threads that run Python.
    stacks = [[(f.function_name, f.is_native) for f in x.frames] for x in p.get_samples()]
    out["stacks"] = [st for st in stacks if any(not native for _, native in st)]
    print(json.dumps(out))
    """
)


def run_one(python: str, name: str, seconds: float) -> dict:
    r = subprocess.run(
        [python, "-c", CHILD, name, str(seconds)], capture_output=True, text=True, timeout=600
    )
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_pyspy(pyspy: str, python: str, name: str, seconds: float, out: str) -> dict:
    """The same work with `py-spy record --native` at 1 kHz attached once the child has
    imported and warmed up (as spprof's window starts then), its raw (collapsed) stacks read
    back: each line `frame;frame;... count`, a frame `name (file:line)` or `name (library)`."""
    child = subprocess.Popen(
        [python, "-c", CHILD, name, str(seconds), "plain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert child.stdout is not None
    first = child.stdout.readline().strip()
    if first != "ready":
        child.wait(timeout=600)
        return json.loads(first) if first.startswith("{") else {"error": f"child: {first!r}"}
    argv = [pyspy, "record", "--native", "-r", "1000", "-f", "raw", "-o", out]
    r = subprocess.run(
        [*argv, "--pid", str(child.pid)], capture_output=True, text=True, timeout=600
    )
    last = child.stdout.read().strip().splitlines()
    child.wait(timeout=600)
    if r.returncode != 0 or not os.path.exists(out):
        return {"error": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]}
    with open(out) as f:
        stacks = read_raw(f.read())
    return {"stacks": stacks, "wall_s": json.loads(last[-1])["wall_s"] if last else 0.0}


def read_raw(text: str) -> list[list[tuple[str, bool]]]:
    """py-spy's raw output as one stack per sample, root first, each frame (name, native)."""
    stacks = []
    for line in text.splitlines():
        path, _, count = line.rpartition(" ")
        frames = []
        for frame in path.split(";"):
            fn, _, where = frame.partition(" (")
            # A Python frame names its file and line; a native one its library.
            frames.append((fn, not where.rstrip(")").rpartition(":")[2].isdigit()))
        stacks.extend([frames] * int(count))
    return stacks


def compare(stacks: list) -> tuple[int, float, int]:
    """Samples of Python threads, the share whose innermost frame is native (the program is
    in C/C++ in these workloads: a Python leaf means the native walk found nothing), and the
    distinct native frame labels (functions for spprof; py-spy labels a frame it cannot
    symbolize by its address)."""
    n = len(stacks)
    native_leaf = sum(1 for st in stacks if st and st[-1][1])
    names = {fn for st in stacks for fn, native in st if native}
    return n, (100.0 * native_leaf / n if n else 0.0), len(names)


def side_by_side(name: str, ours: list[dict], theirs: list[dict]) -> str:
    bad = [r for r in ours + theirs if "missing" in r or "error" in r]
    if bad:
        return f"| {name} | {bad[0].get('missing') or bad[0].get('error')} |" + " |" * 3
    a = compare([st for r in ours for st in r["stacks"]])
    b = compare([st for r in theirs for st in r["stacks"]])
    wa, wb = sum(r["wall_s"] for r in ours), sum(r["wall_s"] for r in theirs)
    return (
        f"| {name} | {a[0]} / {b[0]} | {a[1]:.1f} % / {b[1]:.1f} % | {a[2]} / {b[2]} "
        f"| {wa:.2f} / {wb:.2f} |"
    )


def merge(runs: list[dict]) -> dict:
    out: dict = {"native_stop_reasons": {}}
    for r in runs:
        for k, v in r.items():
            if k == "native_stop_reasons":
                for reason, n in (v or {}).items():
                    out[k][reason] = out[k].get(reason, 0) + n
            elif isinstance(v, int):
                out[k] = out.get(k, 0) + v
    return out


def row(name: str, runs: list[dict]) -> str:
    bad = [r for r in runs if "missing" in r or "error" in r]
    if bad:
        why = bad[0].get("missing") or bad[0].get("error")
        state = "not installed" if "missing" in bad[0] else "failed"
        return f"| {name} | {state}: {why} |" + " |" * 8
    m = merge(runs)
    walks = m.get("native_unwinds", 0)
    stops = dict(m["native_stop_reasons"])
    bottom = stops.pop("bottom", 0)
    share = f"{bottom} ({100.0 * bottom / walks:.1f} %)" if walks else "0"
    others = (
        ", ".join(f"{k} {v}" for k, v in sorted(stops.items(), key=lambda kv: -kv[1])) or "none"
    )
    samples = m.get("samples_captured", 0)
    capture = f"{m.get('capture_ns', 0) / samples / 1000:.1f}" if samples else "-"
    # The drain's GIL time (stats drain_ns: building stacks, naming native frames) per 1,000
    # samples, in ms: what the profiled program's threads wait for the GIL because of it.
    drain = f"{m.get('drain_ns', 0) / samples / 1000:.1f}" if samples else "-"
    # Its CPU in that time (drain_cpu_ns): less when the drain, GIL held, waited for a core.
    drain_cpu = f"{m.get('drain_cpu_ns', 0) / samples / 1000:.1f}" if samples else "-"
    # Module files read for names, summed over the rounds: off the GIL (count and ms) / with it.
    files = (
        f"{m.get('symbol_files_read_off_gil', 0)} ({m.get('symbol_file_read_ns', 0) / 1e6:.0f} ms)"
        f" / {m.get('symbol_files_read_under_gil', 0)}"
    )
    return (
        f"| {name} | {walks} | {share} | {others} | {m.get('native_leaf_steps', 0)} "
        f"| {m.get('native_fp_steps', 0)} | {capture} | {drain} | {drain_cpu} | {files} |"
    )


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--python", default=sys.executable, help="the interpreter with the libraries")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    ap.add_argument(
        "--py-spy",
        metavar="PATH",
        help="also run each workload under `PATH record --native -r 1000` and print a table "
        "of the two side by side",
    )
    args = ap.parse_args(argv)
    print(f"{args.python}, {args.seconds} s of CPU per round, {args.rounds} round(s), 1 ms")
    head = "| workload | walks | reached the start | other stops | leaf steps | fp steps |"
    print(
        head + " capture us | drain GIL ms / 1,000 samples | of which CPU "
        "| files read off the GIL (ms) / with it |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    ours: dict[str, list[dict]] = {}
    for name in args.workloads:
        runs = ours[name] = [run_one(args.python, name, args.seconds) for _ in range(args.rounds)]
        print(row(name, runs), flush=True)
    if args.py_spy:
        print()
        print("spprof / py-spy --native, 1 kHz, samples of the threads that run Python:")
        print(
            "| workload | samples | native leaf | native frame labels "
            "| wall s for the CPU seconds asked |"
        )
        print("|---|---:|---:|---:|---:|")
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.workloads:
                out = os.path.join(tmp, f"{name}.txt")
                theirs = [
                    run_pyspy(args.py_spy, args.python, name, args.seconds, out)
                    for _ in range(args.rounds)
                ]
                print(side_by_side(name, ours[name], theirs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
