"""spprof's user-space cost counted exactly: whole-process instruction counts under callgrind.

    python -m benchmarks.exact [--smoke] [--workloads nbody,deep_stack]

For each workload, the same fixed amount of work runs under
`valgrind --tool=callgrind --separate-threads=yes` unprofiled and with spprof in CPU and wall
mode at 1 Hz (next to no captures: start, stop and the idle threads), 100 Hz and 1 kHz.
Instruction counts are deterministic (PYTHONHASHSEED fixed, one thread at a time), so machine
load does not move them. Per configuration:

- the workload thread's added instructions per capture:
  (main-thread Ir at the rate - main-thread Ir at 1 Hz) / (captures at the rate - at 1 Hz),
  which is the handler plus whatever the captures cost the interpreter (GIL hand-offs to the
  drain);
- the profiler's threads (drain, wall census): Ir per drain pass, per record drained and per
  census, solved from the runs' thread totals and the session's counters;
- the fixed cost of start + stop (1 Hz run - unprofiled), paid once per session.

Under valgrind the program runs ~50x slower, so captures and passes per unit of work are not
those of a native run. The added fraction is therefore rebuilt for a native second of the
workload: (native captures/s x Ir per capture + native drain passes/s x Ir per pass + records/s
x Ir per record + censuses/s x Ir per census) / (workload Ir per native CPU second). Native
captures, passes and CPU seconds come from the same child run natively (median of 5 runs). This
is a share of instructions, not of time: the handler's instructions are load-heavy and likely
slower per instruction than the workload's (docs/performance.md).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parent.parent
# Sizes under callgrind: ~0.05 s of native CPU (the handler's count is exact whatever the
# number of captures); natively NATIVE_SCALE times more, for steady capture rates.
SIZES = {"nbody": 16, "deep_stack": 12, "recursion": 80}
NATIVE_SCALE = 8
SMOKE_SIZES = {"nbody": 2, "deep_stack": 2, "recursion": 4}
# "empty": unprofiled at size 0, the interpreter's start-up and imports, subtracted from "none".
CONFIGS = ("empty", "none", "cpu-1", "cpu-100", "cpu-1000", "wall-1", "wall-100", "wall-1000")
_STAT_KEYS = (
    "signals",
    "samples_stored",
    "samples_captured",
    "timer_overruns",
    "drains",
    "records_drained",
    "drain_ns",
    "wall_ticks",
    "wall_walks",
    "wall_idle_records",
    "wall_signals_sent",
)


def child(workload: str, size: int, config: str) -> dict[str, Any]:
    """One run: the workload under `config` (none, empty or MODE-RATE); the session's counters."""
    import spprof
    from benchmarks.workloads import WORKLOADS

    func = WORKLOADS[workload].func
    out: dict[str, Any] = {"workload": workload, "size": size, "config": config}
    if config == "empty":
        size = 0
    elif config != "none":
        mode, rate = config.split("-")
        spprof.start(interval_ms=1000.0 / int(rate), mode=mode)
    c0 = time.thread_time()
    func(size)
    out["cpu_s"] = time.thread_time() - c0
    if config not in ("none", "empty"):
        spprof.stop()
        st = spprof.stats()
        out.update({k: int(st.get(k) or 0) for k in _STAT_KEYS})
    return out


def _child_cmd(workload: str, size: int, config: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.exact", "child", workload, str(size), config]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONHASHSEED="0")


def _thread_totals(prefix: str) -> list[int]:
    """Ir of each thread's callgrind file (`prefix-01`, `-02`, ...), in thread order.

    `totals:` (every cost in the file), not `summary:`, which leaves out what ran in signal
    handler context: the handler itself."""
    totals = []
    for path in sorted(glob.glob(prefix + "-*")):
        text = Path(path).read_text(errors="replace")
        m = re.search(r"^totals:\s*(\d+)", text, re.M)
        totals.append(int(m.group(1)) if m else 0)
    return totals


def _handler_inclusive(path: str) -> int:
    """Inclusive Ir of spprof's signal handler (on_sample_signal) in one thread's file."""
    if shutil.which("callgrind_annotate") is None:
        return 0
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    best = 0
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s.*signal_handler\.cpp:spprof::on_sample_signal\(", line)
        if m:
            best = max(best, int(m.group(1).replace(",", "")))
    return best


def under_callgrind(workload: str, size: int, config: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "cg.out")
        run = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--separate-threads=yes",
                "--fair-sched=yes",
                f"--callgrind-out-file={prefix}",
                *_child_cmd(workload, size, config),
            ],
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            raise RuntimeError(f"callgrind run failed: {run.stderr[-500:]}")
        res: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
        threads = _thread_totals(prefix)
        first = sorted(glob.glob(prefix + "-*"))
        res["ir_handler"] = _handler_inclusive(first[0]) if first and config != "none" else 0
    # Thread 1 is the main thread (the workload); the others are spprof's (drain, census):
    # these workloads start no threads of their own.
    res["ir_threads"] = threads
    res["ir_main"] = threads[0] if threads else 0
    res["ir_others"] = sum(threads[1:])
    return res


def native(workload: str, size: int, config: str, runs: int) -> dict[str, Any]:
    """The same child natively, `runs` times: median CPU seconds and counters per CPU second."""
    results = []
    for _ in range(runs):
        out = subprocess.run(
            _child_cmd(workload, size, config),
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med: dict[str, Any] = {"runs": results}
    med["cpu_s"] = statistics.median(r["cpu_s"] for r in results)
    for k in ("signals", "drains", "records_drained", "wall_ticks"):
        if k in results[0]:
            med[f"{k}_per_s"] = statistics.median(r[k] / r["cpu_s"] for r in results)
    return med


def _per(num: float, den: float) -> Optional[float]:
    return num / den if den else None


def analyse(vg: dict[str, dict[str, Any]], nat: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per mode and rate: Ir per capture, per drain pass, per record, per census; % added."""
    base = vg["none"]
    startup = vg["empty"]["ir_main"] if "empty" in vg else 0
    ir_per_native_s = (base["ir_main"] - startup) / nat["none"]["cpu_s"]
    out: dict[str, Any] = {
        "ir_startup": startup,
        "ir_workload": base["ir_main"] - startup,
        "native_cpu_s": nat["none"]["cpu_s"],
        "ir_per_native_cpu_s": ir_per_native_s,
        "modes": {},
    }
    for mode in ("cpu", "wall"):
        # Without the 1 Hz run (smoke), the unprofiled run stands in: start/stop then count
        # as captures.
        low = vg.get(f"{mode}-1") or dict(
            base, signals=0, drains=0, records_drained=0, wall_ticks=0
        )
        fixed = low["ir_main"] + low["ir_others"] - base["ir_main"] - base["ir_others"]
        for rate in (100, 1000):
            hi = vg.get(f"{mode}-{rate}")
            if hi is None:
                continue
            caps = hi["signals"] - low["signals"]
            # The handler, exactly: its inclusive count over the signals it ran for.
            per_capture = _per(hi.get("ir_handler", 0), hi["signals"])
            # Everything the workload thread did more than at 1 Hz, per capture: the handler
            # plus the GIL hand-offs to the drain, whose passes follow wall time (so differ
            # from run to run under valgrind): a cross-check, not exact.
            main_per_capture = _per(hi["ir_main"] - low["ir_main"], caps)
            # Profiler threads: passes cost a + records x b. Two runs, two unknowns.
            d_passes = hi["drains"] - low["drains"]
            d_records = hi["records_drained"] - low["records_drained"]
            per_pass = _per(low["ir_others"], low["drains"] + low.get("wall_ticks", 0))
            per_record = None
            if per_pass is not None and d_records:
                per_record = (
                    hi["ir_others"] - (hi["drains"] + hi.get("wall_ticks", 0)) * per_pass
                ) / hi["records_drained"]
            n = nat[f"{mode}-{rate}"]
            added_per_s = (per_capture or 0.0) * n.get("signals_per_s", 0.0)
            threads_per_s = 0.0
            if per_pass is not None:
                # Native drains every 250 ms plus 50 ms wake-ups and censuses every 10 ms: the
                # counters of the native run carry both.
                threads_per_s += per_pass * (
                    n.get("drains_per_s", 0.0) + n.get("wall_ticks_per_s", 0.0)
                )
            if per_record is not None:
                threads_per_s += per_record * n.get("records_drained_per_s", 0.0)
            out["modes"][f"{mode}-{rate}"] = {
                "captures": caps,
                "ir_per_capture": per_capture,
                "ir_main_added_per_capture": main_per_capture,
                "signals": hi["signals"],
                "drains": hi["drains"],
                "drains_at_1hz": low["drains"],
                "ir_fixed_start_stop": fixed,
                "ir_per_pass_or_census": per_pass,
                "ir_per_record": per_record,
                "passes_delta": d_passes,
                "native_captures_per_s": n.get("signals_per_s"),
                "handler_pct": 100.0 * added_per_s / ir_per_native_s,
                "threads_pct": 100.0 * threads_per_s / ir_per_native_s,
                "total_pct": 100.0 * (added_per_s + threads_per_s) / ir_per_native_s,
            }
    return out


def measure(workloads: list[str], smoke: bool, log: Any = None) -> dict[str, Any]:
    if shutil.which("valgrind") is None:
        return {"skipped": "valgrind is not installed"}
    sizes = SMOKE_SIZES if smoke else SIZES
    configs = ("none", "cpu-1000") if smoke else CONFIGS
    out: dict[str, Any] = {}
    for w in workloads:
        vg = {c: under_callgrind(w, sizes[w], c) for c in configs}
        scale = 1 if smoke else NATIVE_SCALE
        nat = {
            c: native(w, sizes[w] * scale, c, 1 if smoke else 5) for c in configs if c != "empty"
        }
        # The unprofiled native CPU of the callgrind size, for the workload's Ir per second.
        nat["none"]["cpu_s"] /= scale
        res = {"size": sizes[w], "callgrind": vg, "native": nat, **analyse(vg, nat)}
        out[w] = res
        if log:
            log(
                f"exact {w}: "
                + ", ".join(
                    f"{k} {v['ir_per_capture'] or 0:.0f} Ir/capture {v['total_pct']:.3f} %"
                    for k, v in res["modes"].items()
                )
            )
    return out


def main(argv: list[str]) -> int:
    if argv and argv[0] == "child":
        print(json.dumps(child(argv[1], int(argv[2]), argv[3])), flush=True)
        return 0
    ap = argparse.ArgumentParser(prog="python -m benchmarks.exact")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--workloads", default="nbody,deep_stack")
    args = ap.parse_args(argv)
    res = measure(args.workloads.split(","), args.smoke, lambda m: print(m, file=sys.stderr))
    print(json.dumps(res, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
