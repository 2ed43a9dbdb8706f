"""The benchmark runner: the overhead table and the micro-figures of docs/performance.md.

    python -m benchmarks.run                 # full run (about 80 minutes on 2 cores)
    python -m benchmarks.run --smoke         # every measurement once, tiny sizes (~90 s)
    python -m benchmarks.run --workloads nbody,json --repeats 7 --no-micro

Overhead: every measurement is a fresh process (benchmarks/child.py) that times only the
workload. For each workload, `--repeats` rounds; each round runs every configuration once, in
an order rotated from round to round, with an unprofiled baseline run before the first and
after every third configuration (B c c c B c c c B ...). A run's slowdown is its wall time over
the mean of the two baselines around it, so drift in machine load cancels as far as it can.
The table gives the median slowdown and the min-max over the rounds.

py-spy and Austin run out of process: the child waits until `py-spy record --pid` says it is
sampling (Austin: until its output file has its header), then runs. Their own CPU time (from
wait4) is reported per second of the target's workload and added to the target's CPU in the
CPU table. Scalene runs the child itself (`python -m scalene run --cpu-only`): its threads'
CPU is in the child's process CPU time.

The other parts (`--no-exact`, `--no-kernel`, `--no-ab` skip them): exact instruction counts
under callgrind (benchmarks/exact.py), the kernel's cost per signal (benchmarks/kernel.py) and
the interleaved in-process A/B with bootstrap intervals (benchmarks/ab.py); the report adds
them up against the A/B interval.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from benchmarks import tools
from benchmarks.workloads import WORKLOADS

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 600


def _child_cmd(module: str, *args: object) -> list:
    return [sys.executable, "-m", module, *map(str, args)]


def _last_json(text: str) -> dict:
    """The last line of `text` that is a JSON object (a wrapper may print after the child)."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON line in {text[-300:]!r}")


def _run_json(
    cmd: list, prefix: Optional[list] = None, timeout: float = TIMEOUT_S, env: Optional[dict] = None
) -> dict:
    full = (prefix or []) + cmd
    out = subprocess.run(
        full, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(full)} failed ({out.returncode}): {out.stderr}")
    return _last_json(out.stdout)


def run_once(workload: str, size: int, config: tools.Config) -> dict:
    """One fresh-process measurement of `workload` under `config`."""
    cmd = _child_cmd("benchmarks.child", workload, size, config.key)
    if config.wraps_child:
        return _run_scalene(workload, size, config)
    if config.tool == "austin":
        return _run_austin([*cmd, "--wait"], config.rate_hz)
    if not config.out_of_process:
        return _run_json(cmd)
    return _run_py_spy([*cmd, "--wait"], config.rate_hz)


def _run_scalene(workload: str, size: int, config: tools.Config) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "scalene.json")
        res = _run_json(
            [
                sys.executable,
                "-m",
                "scalene",
                "run",
                "--cpu-only",
                "--cpu-sampling-rate",
                str(1.0 / config.rate_hz),
                "-o",
                out,
                str(REPO / "benchmarks" / "child.py"),
                "---",
                workload,
                str(size),
                config.key,
            ],
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        try:
            prof = json.loads(Path(out).read_text())
            res["info"] = {"files": len(prof.get("files", {}))}
        except (OSError, ValueError):
            res["info"] = {"files": None}
    return res


def _run_austin(cmd: list, rate_hz: int) -> dict:
    exe = tools.austin_path()
    assert exe is not None
    child = subprocess.Popen(
        cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        raise RuntimeError("child did not start")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "austin.out")
        austin = subprocess.Popen(
            [exe, "-i", f"{1_000_000 // rate_hz}us", "-o", path, "-p", str(child.pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Austin writes its header once it is attached and sampling.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and austin.poll() is None:
            if os.path.exists(path) and "# mode:" in Path(path).read_text(errors="replace"):
                break
            time.sleep(0.02)
        else:
            child.kill()
            child.wait()
            err = austin.stderr.read() if austin.stderr else ""
            austin.kill()
            austin.wait()
            raise RuntimeError(f"austin could not attach: {err[-300:]}")
        child.stdin.write("go\n")
        child.stdin.flush()
        result = json.loads(child.stdout.readline())
        child.wait(timeout=TIMEOUT_S)
        _, _, usage = os.wait4(austin.pid, 0)
        austin.returncode = 0
        samples = sum(
            1 for ln in Path(path).read_text(errors="replace").splitlines() if ln and ln[0] != "#"
        )
        result["info"] = {"samples": samples, "tool_cpu_s": usage.ru_utime + usage.ru_stime}
    return result


def _run_py_spy(cmd: list, rate_hz: int) -> dict:
    child = subprocess.Popen(
        cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        raise RuntimeError("child did not start")
    with tempfile.TemporaryDirectory() as tmp:
        spy = subprocess.Popen(
            [
                tools.py_spy_path(),
                "record",
                "--pid",
                str(child.pid),
                "-r",
                str(rate_hz),
                "-f",
                "raw",
                "-o",
                os.path.join(tmp, "out.txt"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert spy.stdout is not None
        first = spy.stdout.readline()  # "py-spy> Sampling process 100 times a second..."
        if "Sampling process" not in first:
            child.kill()
            child.wait()
            spy.wait()
            raise RuntimeError(f"py-spy could not attach: {first}{spy.stdout.read()}")
        child.stdin.write("go\n")
        child.stdin.flush()
        result = json.loads(child.stdout.readline())
        child.wait(timeout=TIMEOUT_S)
        _, status, usage = os.wait4(spy.pid, 0)
        spy.returncode = (
            os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status
        )
        tail = spy.stdout.read()
        m = re.search(r"Samples: (\d+) Errors: (\d+)", tail)
        result["info"] = {
            "samples": int(m.group(1)) if m else None,
            "errors": int(m.group(2)) if m else None,
            "tool_cpu_s": usage.ru_utime + usage.ru_stime,
        }
    return result


def overhead(
    workloads: list, configs: list, repeats: int, smoke: bool, log, results: dict, checkpoint
) -> dict:
    for name in workloads:
        w = WORKLOADS[name]
        size = w.smoke if smoke else w.full
        per: dict = collections.defaultdict(list)
        base_walls: list = []
        base_cpus: list = []
        for r in range(repeats):
            order = configs[r % len(configs) :] + configs[: r % len(configs)]
            seq: list = []
            for i, c in enumerate(order):
                if i % 3 == 0:
                    seq.append(tools.BASELINE)
                seq.append(c)
            seq.append(tools.BASELINE)
            runs = [(c, run_once(name, size, c)) for c in seq]
            bases = [i for i, (c, _) in enumerate(runs) if c == tools.BASELINE]
            for i, (c, res) in enumerate(runs):
                if c == tools.BASELINE:
                    base_walls.append(res["wall_s"])
                    base_cpus.append(res["cpu_s"])
                    continue
                before = max(b for b in bases if b < i)
                after = min(b for b in bases if b > i)
                base = (runs[before][1]["wall_s"] + runs[after][1]["wall_s"]) / 2
                res["slowdown"] = res["wall_s"] / base
                base_cpu = (runs[before][1]["cpu_s"] + runs[after][1]["cpu_s"]) / 2
                # An out-of-process profiler's own CPU counts as the cost it is.
                cpu = res["cpu_s"] + res.get("info", {}).get("tool_cpu_s", 0.0)
                res["cpu_slowdown"] = cpu / base_cpu if base_cpu > 0 else None
                per[c.key].append(res)
            log(
                f"{name:<20} round {r + 1}/{repeats}  base {statistics.median(base_walls):.2f}s  "
                + " ".join(f"{c.key}={per[c.key][-1]['slowdown']:.3f}" for c in configs)
            )
        results[name] = {
            "size": size,
            "baseline_wall_s": base_walls,
            "baseline_cpu_s": base_cpus,
            "runs": dict(per),
        }
        checkpoint()
    return results


# -- micro-figures -----------------------------------------------------------------------------

_SIGNAL_KERNEL = (
    "arch_do_signal_or_restart",
    "signal_setup_done",
    "get_signal",
    "__x64_sys_rt_sigreturn",
    "restore_sigcontext",
    "fpu__restore_sig",
)
_TIMER_KERNEL = (
    "run_posix_cpu_timers",
    "handle_posix_cpu_timers",
    "posix_cpu_timers_work",
    "cpu_timer_fire",
    "send_sigqueue",
    "posixtimer_send_sigqueue",
)
_CONTROL = ("Session::", "py_", "StackStore", "Resolver", "ThreadTable::add", "module_")


def _perf_buckets(data: str, tid: int) -> collections.Counter:
    """Sample counts of thread `tid` by where the handler's cost goes."""
    text = subprocess.run(
        ["perf", "script", "-i", data, "-F", "tid,ip,sym,dso"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    buckets: collections.Counter = collections.Counter()
    for block in text.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if not lines or not lines[0].strip().isdigit() or int(lines[0]) != tid:
            continue
        frames = [ln.strip().split(" ", 1)[-1] for ln in lines[1:]]
        buckets["total"] += 1
        ours = [f for f in frames if "spprof" in f and "_ext" in f]
        if ours and not any(c in ours[0] for c in _CONTROL):
            faults = any("exc_page_fault" in f for f in frames)
            kernel_sig = any(any(k in f for k in _SIGNAL_KERNEL) for f in frames)
            if kernel_sig:
                buckets["signal delivery (kernel)"] += 1
            elif faults:
                buckets["handler: ring page first touch"] += 1
            else:
                buckets["handler (user)"] += 1
        elif any(any(k in f for k in _SIGNAL_KERNEL) for f in frames) or any(
            "__restore_rt" in f for f in frames
        ):
            buckets["signal delivery (kernel)"] += 1
        elif any(any(k in f for k in _TIMER_KERNEL) for f in frames):
            buckets["timer expiry (kernel)"] += 1
    return buckets


def handler_cost(depths: list, seconds: float, rate_hz: int, log) -> dict:
    """Nanoseconds per signal at each stack depth, from perf record on a CPU-mode loop."""
    out: dict = {}
    if shutil.which("perf") is None:
        return {"skipped": "perf not installed"}
    period_ns = 50_000
    for depth in depths:
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "perf.data")
            try:
                res = _run_json(
                    _child_cmd("benchmarks.micro", "handler", depth, seconds, rate_hz),
                    prefix=[
                        "perf",
                        "record",
                        "-q",
                        "-e",
                        "cpu-clock",
                        "-c",
                        str(period_ns),
                        "-g",
                        "-o",
                        data,
                        "--",
                    ],
                )
            except RuntimeError as e:
                return {"skipped": f"perf record failed: {str(e)[-300:]}"}
            buckets = _perf_buckets(data, res["tid"])
        signals = max(res["signals"], 1)
        per_signal = {k: v * period_ns / signals for k, v in buckets.items() if k != "total"}
        res["perf_samples"] = dict(buckets)
        res["ns_per_signal"] = per_signal
        res["handler_ns"] = per_signal.get("handler (user)", 0.0)
        res["total_ns"] = sum(per_signal.values())
        out[depth] = res
        log(
            f"handler depth {depth}: {res['signals']} signals, "
            f"{ {k: round(v) for k, v in per_signal.items()} }"
        )
    return out


def resolver_cost(seconds: float, log) -> dict:
    runs = {
        k: _run_json(_child_cmd("benchmarks.micro", "resolver", k, seconds))
        for k in ("idle", "known", "new")
    }
    idle, known, new = runs["idle"], runs["known"], runs["new"]
    per_drain = idle["drain_cpu_ns"] / max(idle["drains"], 1)
    per_known = (known["drain_cpu_ns"] - known["drains"] * per_drain) / max(known["records"], 1)
    new_extra = (
        new["drain_cpu_ns"] - new["drains"] * per_drain - new["records"] * per_known
    ) / max(new["distinct_stacks"] - known["distinct_stacks"], 1)
    per_stack_bytes = (new["memory_bytes"] - known["memory_bytes"]) / max(
        new["distinct_stacks"] - known["distinct_stacks"], 1
    )
    out = {
        "runs": runs,
        "drain_idle_ns_per_period": per_drain,
        "known_ns_per_record": per_known,
        "new_ns_per_stack_extra": new_extra,
        "bytes_per_distinct_stack": per_stack_bytes,
    }
    log("resolver: %s" % {k: round(v) for k, v in out.items() if k != "runs"})
    return out


def profiler_threads_cost(seconds: float, sleepers: int, log) -> dict:
    out = {}
    for mode in ("cpu", "wall"):
        for rate in (100, 1000):
            res = _run_json(
                _child_cmd("benchmarks.micro", "threads", mode, rate, seconds, sleepers)
            )
            res["pct_of_a_core"] = 100.0 * res["profiler_cpu_ns"] / 1e9 / res["elapsed_s"]
            res["signals_per_s"] = res["signals"] / res["elapsed_s"]
            out[f"{mode}-{rate}"] = res
            log(
                f"profiler threads, {mode} {rate} Hz: {res['pct_of_a_core']:.2f} % of a core, "
                f"{res['signals_per_s']:.0f} signals/s"
            )
    return out


def stop_latency(samples: int, threads: int, log) -> dict:
    res = _run_json(_child_cmd("benchmarks.micro", "stop", samples, threads))
    log(f"stop: {res}")
    return res


def thread_churn(count: int, log) -> dict:
    out = {}
    for mode in ("off", "cpu", "wall"):
        cmd = _child_cmd("benchmarks.micro", "churn", count, mode)
        res = _run_json(cmd, timeout=TIMEOUT_S + count / 500)
        res["rss_growth"] = res["rss_after"] - res["rss_before"]
        out[mode] = res
        log(
            f"churn {count} threads, {mode}: RSS +{res['rss_growth'] / 1e6:.1f} MB, "
            f"{res['us_per_thread']:.0f} us per thread"
        )
    return out


def rss_growth(seconds: float, log) -> dict:
    res = _run_json(_child_cmd("benchmarks.micro", "rss", seconds), timeout=seconds + TIMEOUT_S)
    log(
        f"rss {seconds:.0f}s: {res['rss_warm'] / 1e6:.1f} MB -> {res['rss_end'] / 1e6:.1f} MB, "
        f"{res['samples']} samples"
    )
    return res


# -- exact counts, kernel share, A/B cross-check ------------------------------------------------

AB_CONFIGS = (("cpu", 100), ("cpu", 1000), ("wall", 100), ("wall", 1000))


def ab_runs(workloads: list, pairs: int, segment_s: float, log) -> dict:
    out: dict = {}
    for name in workloads:
        for mode, rate in AB_CONFIGS:
            res = _run_json(
                _child_cmd("benchmarks.ab", name, mode, rate, pairs, segment_s),
                timeout=TIMEOUT_S + pairs * segment_s * 4,
            )
            out[f"{name}/{mode}-{rate}"] = res
            lo, hi = res["interval_pct"]
            log(
                f"A/B {name} {mode} {rate} Hz: {res['overhead_pct']:+.2f} % "
                f"[{lo:+.2f}, {hi:+.2f}] over {pairs} pairs, load {res['loadavg'][0]:.1f}"
            )
    return out


def budget(report: dict) -> list:
    """Rows adding (a) callgrind's user-space share, (b) signals x the kernel's cost per
    signal, (c) spprof's threads, next to the A/B interval, per workload, mode and rate."""
    ex = report.get("exact", {})
    kern = report.get("kernel", {})
    thr = report.get("micro", {}).get("threads_alone", {})
    ab = report.get("ab", {})
    if "skipped" in kern or not kern:
        return []
    # tgkill to an empty handler: send + delivery + return, resolved by a tight loop whatever
    # the load. The CPU-timer figure (expiry in the tick instead of the send) rests on a
    # difference of two ~2 s spins and on a loaded machine does not resolve (the report shows
    # it beside this one).
    kernel_ns = kern["ops"]["send_and_deliver_ns"]
    rows = []
    for key, r in ab.items():
        name, cfg = key.split("/")
        e = ex.get(name, {}).get("modes", {}).get(cfg) if isinstance(ex.get(name), dict) else None
        user = e["handler_pct"] if e else None
        kernel = r["signals_per_cpu_s"] * kernel_ns / 1e9 * 100
        t = thr.get(cfg)
        # Per CPU second of the busy thread, as the A/B segments are.
        threads = 100.0 * t["profiler_cpu_ns"] / 1e9 / t["busy_cpu_s"] if t else None
        parts = [x for x in (user, kernel, threads) if x is not None]
        total = sum(parts) if len(parts) == 3 else None
        lo, hi = r["interval_pct"]
        rows.append(
            {
                "workload": name,
                "config": cfg,
                "user_pct": user,
                "kernel_pct": kernel,
                "threads_pct": threads,
                "sum_pct": total,
                "ab_pct": r["overhead_pct"],
                "ab_interval": [lo, hi],
                "contained": None if total is None else lo <= total <= hi,
                "signals_per_s": r["signals_per_cpu_s"],
            }
        )
    return rows


# -- machine and report --------------------------------------------------------------------------


def _cmd_out(cmd: list) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def machine() -> dict:
    lscpu = dict(
        (k.strip(), v.strip())
        for k, _, v in (ln.partition(":") for ln in _cmd_out(["lscpu"]).splitlines())
    )
    tool_versions = {}
    for mod in ("pyinstrument", "yappi", "scalene", "austin-dist"):
        try:
            from importlib.metadata import version

            tool_versions[mod] = version(mod)
        except Exception:  # not installed
            tool_versions[mod] = None
    spy = tools.py_spy_path()
    tool_versions["py-spy"] = _cmd_out([spy, "--version"]) if spy else None
    return {
        "cpu": "{}, {} CPUs ({})".format(
            lscpu.get("Model name", "?"),
            lscpu.get("CPU(s)", "?"),
            lscpu.get("Hypervisor vendor", "bare metal"),
        ),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        # The commit the installed spprof was built from, when the caller knows it.
        "spprof_commit": os.environ.get("SPPROF_BENCH_COMMIT")
        or _cmd_out(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
        "tools": tool_versions,
        "loadavg_start": os.getloadavg(),
    }


def _pct(x: float) -> str:
    return "%+.1f %%" % ((x - 1) * 100)


def _cell(runs: list, key: str = "slowdown") -> str:
    s = [r[key] for r in runs if r.get(key) is not None]
    if not s:
        return "-"
    med = statistics.median(s)
    if len(s) == 1:
        return _pct(med)
    return f"{_pct(med)} ({_pct(min(s))} .. {_pct(max(s))})"


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "Machine: {}; Linux {}; {} {}; spprof {}.".format(
            m["cpu"], m["kernel"], m["implementation"], m["python"], m["spprof_commit"]
        ),
        "Load average (1/5/15 min) at start {}, at end {}.".format(
            "/".join(f"{x:.2f}" for x in m["loadavg_start"]),
            "/".join(f"{x:.2f}" for x in report.get("loadavg_end", ())),
        ),
        "Command: `{}`".format(report["command"]),
        "",
    ]
    ov = report.get("overhead", {})
    if ov:
        configs = [tools.Config.parse(k) for k in report["configs"]]
        lines.append(
            f"Slowdown of the workload's wall time, median over {report['repeats']} rounds "
            "(min .. max); baseline = unprofiled median."
        )
        lines.append("")
        lines.append("| workload | baseline | " + " | ".join(c.label for c in configs) + " |")
        lines.append("| --- | ---: | " + " | ".join("---:" for _ in configs) + " |")
        for name, res in ov.items():
            cells = []
            for c in configs:
                if c.key in report.get("unavailable", {}):
                    cells.append("n/a")
                elif c.key in res["runs"]:
                    cells.append(_cell(res["runs"][c.key]))
                else:
                    cells.append("-")
            lines.append(
                "| {} | {:.2f} s | {} |".format(
                    name, statistics.median(res["baseline_wall_s"]), " | ".join(cells)
                )
            )
        lines.append("")
        if any("baseline_cpu_s" in res for res in ov.values()):
            inproc = [c for c in configs]
            lines.append(
                "CPU time of the whole process during the workload (all threads, os.times; "
                "py-spy and Austin: plus the profiler process's own CPU from wait4, which "
                "includes its start-up and attach), same runs, same statistics:"
            )
            lines.append("")
            lines.append("| workload | baseline | " + " | ".join(c.label for c in inproc) + " |")
            lines.append("| --- | ---: | " + " | ".join("---:" for _ in inproc) + " |")
            for name, res in ov.items():
                cells = [
                    _cell(res["runs"][c.key], "cpu_slowdown") if c.key in res["runs"] else "n/a"
                    for c in inproc
                ]
                base_cpu = statistics.median(res.get("baseline_cpu_s") or [0.0])
                lines.append(f"| {name} | {base_cpu:.2f} s | {' | '.join(cells)} |")
            lines.append("")
        un = report.get("unavailable", {})
        for k, why in un.items():
            lines.append(f"- {tools.Config.parse(k).label}: n/a, {why}.")
        lines.append("")
        lines.append(
            "Samples per run (median) for the samplers, and the out-of-process profilers' own "
            "CPU time per second of the target's workload:"
        )
        lines.append("")
        # pyinstrument's session.sample_count is not a count of stack samples, Scalene's JSON
        # has none: left out.
        samplers = [
            c
            for c in configs
            if c.rate_hz and c.key not in un and c.tool not in ("pyinstrument", "scalene")
        ]
        outside = [c for c in configs if c.out_of_process and c.key not in un]
        lines.append(
            "| workload | "
            + " | ".join([c.label for c in samplers] + [f"{c.tool} CPU" for c in outside])
            + " |"
        )
        lines.append("| --- | " + " | ".join("---:" for _ in samplers + outside) + " |")
        for name, res in ov.items():
            cells = []
            for c in samplers:
                runs = res["runs"].get(c.key, [])
                vals = [
                    r["info"].get("samples") for r in runs if r["info"].get("samples") is not None
                ]
                cells.append(f"{statistics.median(vals):.0f}" if vals else "-")
            for c in outside:
                own = [
                    r["info"].get("tool_cpu_s", r["info"].get("py_spy_cpu_s", 0.0)) / r["wall_s"]
                    for r in res["runs"].get(c.key, [])
                ]
                cells.append("%.1f %%" % (100 * statistics.median(own)) if own else "-")
            lines.append("| {} | {} |".format(name, " | ".join(cells)))
        lines.append("")
    lines.extend(_markdown_exact(report))
    mic = report.get("micro", {})
    if mic:
        lines.append("Micro-figures:")
        lines.append("")
        h = mic.get("handler", {})
        if "skipped" in h:
            lines.append("- handler: skipped ({})".format(h["skipped"]))
        else:
            for depth, r in h.items():
                parts = ", ".join(f"{k} {v:.0f} ns" for k, v in sorted(r["ns_per_signal"].items()))
                lines.append(
                    f"- handler at depth {depth}: {r['total_ns']:.0f} ns per signal in total "
                    f"({parts}); {r['signals']} signals, {r['overruns']} timer overruns, "
                    f"deepest stack {r['observed_depth']}"
                )
        rz = mic.get("resolver")
        if rz:
            lines.append(
                f"- drain: {rz['drain_idle_ns_per_period'] / 1000:.0f} us of CPU per pass "
                f"with nothing to drain; resolver {rz['known_ns_per_record']:.0f} ns per "
                f"record of a known stack; {rz['new_ns_per_stack_extra']:.0f} ns more per new "
                f"stack ({rz['runs']['new']['distinct_stacks']} new stacks)"
            )
            lines.append(
                f"- memory: {rz['bytes_per_distinct_stack']:.0f} bytes per distinct stack "
                "(stacks of about 36 frames; memory_bytes difference between the new-stack "
                "and known-stack runs)"
            )
        for pt in (mic.get("threads"), mic.get("threads_alone")):
            for r in (pt or {}).values():
                lines.append(
                    f"- profiler threads, {r['mode']} mode {r['rate_hz']} Hz, 1 busy + "
                    f"{r['sleepers']} sleeping threads, {r['elapsed_s']:.1f} s: "
                    f"{r['profiler_cpu_ns'] / 1e6:.1f} ms of CPU = {r['pct_of_a_core']:.2f} % of a "
                    f"core ({r['profiler_threads']} threads); {r['signals_per_s']:.0f} signals/s; "
                    f"{r['wall_censuses']} wall censuses, {r['wall_signals_sent']} census signals"
                )
        st = mic.get("stop")
        if st:
            lines.append(
                f"- stop(): {st['stop_s'] * 1000:.1f} ms after {st['samples_stored']} samples "
                f"stored ({st['threads']} threads, wall mode 1 kHz); materialising "
                f"Profile.samples afterwards: {st['materialise_samples_s']:.1f} s"
            )
        ch = mic.get("churn")
        if ch:
            off = ch["off"]
            for mode in ("cpu", "wall"):
                r = ch[mode]
                lines.append(
                    f"- {r['count']:,} short threads one after another, {mode} mode: RSS "
                    f"+{r['rss_growth'] / 1e6:.1f} MB "
                    f"(unprofiled +{off['rss_growth'] / 1e6:.1f} MB), "
                    f"{r['us_per_thread']:.0f} us per thread "
                    f"(unprofiled {off['us_per_thread']:.0f}), "
                    f"{r['threads_seen']:,} threads seen, at most {r['threads_alive_max']} alive, "
                    f"per-thread memory {r['thread_memory_bytes'] / 1e6:.1f} MB"
                )
        rs = mic.get("rss")
        if rs:
            lines.append(
                f"- RSS over a {rs['seconds']:.0f} s CPU-mode 1 kHz session with "
                f"{rs['distinct_stacks']} recurring stacks: {rs['rss_warm'] / 1e6:.1f} MB after "
                f"warm-up, {rs['rss_end'] / 1e6:.1f} MB at the end "
                f"(+{(rs['rss_end'] - rs['rss_warm']) / 1e6:.1f} MB); {rs['samples']} samples, "
                f"memory_bytes {rs['memory_bytes'] / 1e6:.1f} MB; "
                f"stop() {rs['stop_s'] * 1000:.1f} ms"
            )
        lines.append("")
    return "\n".join(lines)


def _f(x: Optional[float], fmt: str = "%.3f %%") -> str:
    return "-" if x is None else fmt % x


def _markdown_exact(report: dict) -> list:
    lines: list = []
    ex = report.get("exact")
    if ex:
        if "skipped" in ex:
            lines += [f"Exact counts: skipped ({ex['skipped']}).", ""]
        else:
            lines += [
                "(a) User-space cost counted by callgrind (instructions, deterministic): "
                "spprof's signal handler per capture (`on_sample_signal` inclusive / signals), "
                "everything the workload thread did more than in the 1 Hz run per extra "
                "capture (handler + GIL hand-offs to the drain, whose passes follow wall time: "
                "a cross-check), the profiler threads' Ir per pass or census and per record, "
                "start+stop once, and the shares of the workload's instructions per native CPU "
                "second at the native capture rate:",
                "",
                "| workload | mode | signals | handler Ir/capture | thread Ir/extra capture "
                "| Ir/pass or census | Ir/record | start+stop Ir | native captures/s "
                "| handler share | threads share |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            ]
            for name, res in ex.items():
                for cfg, m in res["modes"].items():
                    lines.append(
                        f"| {name} | {cfg.replace('-', ' ')} Hz | {m['signals']} | "
                        f"{_f(m['ir_per_capture'], '%.0f')} | "
                        f"{_f(m['ir_main_added_per_capture'], '%.0f')} | "
                        f"{_f(m['ir_per_pass_or_census'], '%.0f')} | "
                        f"{_f(m['ir_per_record'], '%.0f')} | {m['ir_fixed_start_stop']:,} | "
                        f"{_f(m['native_captures_per_s'], '%.0f')} | "
                        f"{_f(m['handler_pct'])} | {_f(m['threads_pct'])} |"
                    )
            lines += [
                "",
                "Workload instructions: "
                + "; ".join(
                    f"{n} {r['ir_workload']:,} Ir in {r['native_cpu_s']:.3f} s native CPU"
                    for n, r in ex.items()
                ),
                "",
            ]
    eh = report.get("exact_handler")
    if eh:
        cells = [
            f"depth {d}: {r['instructions_per_capture']} instructions per capture "
            f"({r['samples']} captures)"
            for d, r in eh.items()
            if r.get("instructions_per_capture")
        ]
        if cells:
            lines += [
                "The handler alone (callgrind, `capture_into` inclusive, CPU mode, "
                f"Python {next(iter(eh.values()))['python']}): " + "; ".join(cells) + ".",
                "",
            ]
    k = report.get("kernel")
    if k:
        if "skipped" in k:
            lines += [f"Kernel cost: skipped ({k['skipped']}).", ""]
        else:
            o, tc, tm = k["ops"], k["timer_cpu"], k["timer_mono"]
            lines += [
                "(b) The kernel's cost per signal (benchmarks/kernel_signal.c, minimum over "
                f"{o['repeats']} repeats): a bare system call {o['syscall_ns']:.0f} ns; tgkill "
                f"of an ignored signal {o['send_ignored_ns']:.0f} ns; tgkill delivered to an "
                f"empty handler {o['send_and_deliver_ns']:.0f} ns, so delivery and "
                f"rt_sigreturn {o['delivery_ns']:.0f} ns. Thread CPU-clock timer at 1 kHz "
                f"(what spprof arms): {tc['ns_per_expiry']:.0f} ns per expiry and delivery "
                f"({tc['signals']} signals; resolution about "
                f"{2e-3 * tc['spin_ns_off'] / max(tc['signals'], 1):.0f} ns if the spins "
                "repeat within 0.2 %); CLOCK_MONOTONIC timer at 10 kHz: "
                f"{tm['ns_per_expiry']:.0f} ns per expiry ({tm['signals']} signals; its own "
                "timer interrupt, which spprof does not use).",
                "",
            ]
    rows = budget(report)
    if rows:
        lines += [
            "(d) Interleaved in-process A/B (benchmarks/ab.py; median ratio of the segment's "
            "thread CPU + spprof's threads' CPU, 95 % bootstrap interval) against the sum of "
            "(a) handler instructions share, (b) the A/B's signals per CPU second x tgkill "
            "send + delivery, (c) spprof's threads per CPU second of a busy thread (micro "
            "`threads`, no other threads):",
            "",
            "| workload | mode | signals/s | (a) user | (b) kernel | (c) threads | sum "
            "| A/B median [95 %] | sum inside |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in rows:
            lo, hi = r["ab_interval"]
            inside = "-" if r["contained"] is None else ("yes" if r["contained"] else "no")
            lines.append(
                f"| {r['workload']} | {r['config'].replace('-', ' ')} Hz | "
                f"{r['signals_per_s']:.0f} | {_f(r['user_pct'])} | {_f(r['kernel_pct'])} | "
                f"{_f(r['threads_pct'])} | {_f(r['sum_pct'])} | "
                f"{r['ab_pct']:+.2f} % [{lo:+.2f}, {hi:+.2f}] | {inside} |"
            )
        lines.append("")
    return lines


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round, short micro")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--configs", default=",".join(c.key for c in tools.CONFIGS))
    ap.add_argument("--no-overhead", action="store_true")
    ap.add_argument("--no-micro", action="store_true")
    ap.add_argument("--no-exact", action="store_true", help="skip the callgrind counts")
    ap.add_argument("--no-kernel", action="store_true", help="skip the kernel signal costs")
    ap.add_argument("--no-ab", action="store_true", help="skip the interleaved A/B")
    ap.add_argument("--ab-workloads", default="nbody,deep_stack")
    ap.add_argument("--ab-pairs", type=int, default=150)
    ap.add_argument("--ab-segment", type=float, default=0.15, help="CPU seconds per segment")
    ap.add_argument("--exact-workloads", default="nbody,deep_stack")
    ap.add_argument("--rss-seconds", type=float, default=60.0)
    ap.add_argument("--output", help="write the markdown here (else stdout)")
    ap.add_argument("--json", help="write every raw measurement here")
    ap.add_argument("--from-json", help="only re-render the markdown of an earlier --json file")
    args = ap.parse_args(argv)
    if args.from_json:
        text = markdown(json.loads(Path(args.from_json).read_text()))
        if args.output:
            Path(args.output).write_text(text + "\n")
        else:
            print(text)
        return 0
    repeats = 1 if args.smoke else args.repeats

    def log(msg: str) -> None:
        print("[{}] {}".format(time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)

    report: dict = {
        "command": " ".join(
            ["python -m benchmarks.run", *(argv if argv is not None else sys.argv[1:])]
        ),
        "machine": machine(),
        "repeats": repeats,
    }
    log("machine: {}".format(report["machine"]))
    configs = [tools.Config.parse(k) for k in args.configs.split(",") if k]
    unavailable = {}
    for c in configs:
        why = tools.available(c)
        if why is None and (c.out_of_process or c.wraps_child):
            # py-spy and Austin need ptrace permission (root, CAP_SYS_PTRACE or ptrace_scope
            # 0); Scalene must be able to run the child: try each once.
            try:
                run_once("json", WORKLOADS["json"].smoke, c)
            except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
                why = f"{c.tool} could not profile the target here ({str(e).strip()[-200:]})"
        if why:
            unavailable[c.key] = why
            log(f"skipping {c.label}: {why}")
    report["configs"] = [c.key for c in configs]
    report["unavailable"] = unavailable
    if not args.no_overhead:
        runnable = [c for c in configs if c.key not in unavailable]
        report["overhead"] = {}

        def checkpoint() -> None:
            if args.json:
                Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n")

        overhead(
            args.workloads.split(","),
            runnable,
            repeats,
            args.smoke,
            log,
            report["overhead"],
            checkpoint,
        )
    if not args.no_micro:
        micro: dict = {}
        micro["handler"] = handler_cost([10, 50, 200], 0.5 if args.smoke else 8.0, 1000, log)
        micro["resolver"] = resolver_cost(0.5 if args.smoke else 10.0, log)
        micro["threads"] = profiler_threads_cost(0.5 if args.smoke else 4.0, 16, log)
        # (c) of the budget: one busy thread and nothing else, as in the A/B segments.
        micro["threads_alone"] = profiler_threads_cost(0.5 if args.smoke else 4.0, 0, log)
        micro["stop"] = stop_latency(2000 if args.smoke else 100_000, 10 if args.smoke else 60, log)
        micro["rss"] = rss_growth(2.0 if args.smoke else args.rss_seconds, log)
        micro["churn"] = thread_churn(2000 if args.smoke else 100_000, log)
        report["micro"] = micro
    if not args.no_exact:
        from benchmarks import exact

        report["exact"] = exact.measure(args.exact_workloads.split(","), args.smoke, log)
        from benchmarks import callgrind_handler

        # The handler alone (capture_into inclusive) per depth, CPU mode at 1 kHz.
        report["exact_handler"] = {}
        for depth in (50,) if args.smoke else (10, 50, 200):
            r = callgrind_handler.instructions_per_capture(depth, 0.2 if args.smoke else 2.0, 1000)
            report["exact_handler"][depth] = r
            log(f"callgrind handler depth {depth}: {r}")
    if not args.no_kernel:
        from benchmarks import kernel

        report["kernel"] = kernel.measure(args.smoke)
        log(f"kernel: {report['kernel']}")
    if not args.no_ab:
        report["ab"] = ab_runs(
            args.ab_workloads.split(",")[: 1 if args.smoke else None],
            4 if args.smoke else args.ab_pairs,
            0.02 if args.smoke else args.ab_segment,
            log,
        )
    report["loadavg_end"] = os.getloadavg()
    text = markdown(report)
    if args.output:
        Path(args.output).write_text(text + "\n")
    else:
        print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
