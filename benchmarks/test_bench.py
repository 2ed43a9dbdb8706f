"""pytest-benchmark timings: each workload under each in-process profiler, and spprof's
start/stop cycle.

These run in the pytest process (a profiler's state could leak from one benchmark into the
next; spprof's, cProfile's and pyinstrument's do not, as far as these tests see), so they are
per-call timings for tracking, not the overhead figures: those come from
`python -m benchmarks.run` (fresh process per measurement, interleaved with baselines).
py-spy and Austin (out of process) and Scalene (it runs the program) are only in the runner's
table.
"""

from __future__ import annotations

import pytest

import spprof
from benchmarks import tools
from benchmarks.workloads import WORKLOADS

IN_PROCESS = [tools.BASELINE] + [
    c for c in tools.CONFIGS if not c.out_of_process and not c.wraps_child
]


@pytest.mark.parametrize("config", IN_PROCESS, ids=[c.key for c in IN_PROCESS])
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_workload(benchmark, workload: str, config: tools.Config, sizes: dict, rounds: int):
    why = tools.available(config)
    if why:
        pytest.skip(why)
    func = WORKLOADS[workload].func
    size = sizes[workload]
    info: dict = {}

    def run() -> None:
        stop = tools.start(config)
        try:
            func(size)
        finally:
            info.update(stop())

    benchmark.group = workload
    benchmark.pedantic(run, rounds=rounds, iterations=1)
    benchmark.extra_info.update(info)
    if config.tool == "spprof" and size > WORKLOADS[workload].smoke:
        assert info["samples"] > 0


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_start_stop_cycle(benchmark, mode: str, rounds: int):
    """An empty session: start() then stop() (timers, drain thread, export)."""

    def cycle() -> None:
        spprof.start(interval_ms=1, mode=mode)
        spprof.stop()

    benchmark.group = "start-stop"
    benchmark.pedantic(cycle, rounds=rounds * 5, iterations=1)
    assert not spprof.is_active()


def test_runner_smoke_parses(tmp_path):
    """The runner's report writer copes with one tiny measurement (no subprocess tools)."""
    from benchmarks import run

    rc = run.main(
        [
            "--smoke",
            "--workloads",
            "json",
            "--configs",
            "spprof-cpu-1000",
            "--no-micro",
            "--no-exact",
            "--no-kernel",
            "--no-ab",
            "--output",
            str(tmp_path / "out.md"),
            "--json",
            str(tmp_path / "out.json"),
        ]
    )
    assert rc == 0
    assert "| json |" in (tmp_path / "out.md").read_text()


def test_exact_analysis_divides_added_instructions_by_captures():
    """Handler Ir per capture = its inclusive count / signals; the thread's added Ir per extra
    capture = (main Ir at the rate - at 1 Hz) / (captures at the rate - at 1 Hz); the threads'
    Ir split into per pass and per record; shares per native CPU second."""
    from benchmarks import exact

    def run(main: int, others: int, signals: int, drains: int, records: int) -> dict:
        return {
            "ir_main": main,
            "ir_others": others,
            "signals": signals,
            "drains": drains,
            "records_drained": records,
        }

    vg = {
        "empty": run(1_000, 0, 0, 0, 0),
        "none": run(1_001_000, 0, 0, 0, 0),
        "cpu-1": run(1_101_000, 500, 0, 5, 0),
        "cpu-100": dict(run(1_201_000, 2_500, 100, 10, 100), ir_handler=90_000),
    }
    nat = {
        "none": {"cpu_s": 0.5},
        "cpu-100": {"signals_per_s": 100.0, "drains_per_s": 4.0, "records_drained_per_s": 100.0},
    }
    m = exact.analyse(vg, nat)["modes"]["cpu-100"]
    assert m["captures"] == 100
    assert m["ir_per_capture"] == 900  # the handler's inclusive count / its signals
    assert m["ir_main_added_per_capture"] == 1_000
    assert m["ir_fixed_start_stop"] == 100_500
    assert m["ir_per_pass_or_census"] == 100
    assert m["ir_per_record"] == 15  # (2,500 - 10 passes x 100) / 100 records
    # 1,000,000 workload Ir in 0.5 s: 2e6 Ir per second; 100 captures x 900 Ir = 4.5 %.
    assert m["handler_pct"] == 4.5
    assert abs(m["threads_pct"] - 100 * (4 * 100 + 100 * 15) / 2e6) < 1e-9


def test_bootstrap_interval_brackets_the_median():
    import random

    from benchmarks import ab

    values = [1.0 + 0.01 * ((i * 7) % 13) for i in range(60)]
    med, lo, hi = ab.bootstrap_median(values, random.Random(3), 500)
    assert lo <= med <= hi
    assert lo > min(values) and hi < max(values)


def test_ab_signal_mode_delivers_the_rate_into_an_empty_handler():
    # The kernel-only baseline: no spprof session, the workload thread's own timer at 1 kHz
    # (250 expiries a CPU second on a 250 Hz tick, 1,000 on a 1,000 Hz one).
    import spprof
    from benchmarks import ab

    res = ab.run("nbody", "signal", 1000, 3, 0.1, 1)
    assert res["threads_pct_of_segment"] == 0.0
    assert 100 <= res["signals_per_cpu_s"] <= 1100, res
    assert not spprof.is_active()


@pytest.mark.parametrize("module", ["accuracy_short", "accuracy_gc"])
def test_accuracy_benchmarks_run_and_report_every_profiler(module: str, capsys):
    """The accuracy benchmarks at a tiny size, so they never rot: every row of the table is
    filled (a profiler that is not installed says so in its row)."""
    import importlib

    mod = importlib.import_module(f"benchmarks.{module}")
    args = ["--rounds", "1"] + (
        ["--scale", "0.1"] if module == "accuracy_short" else ["--seconds", "0.3"]
    )
    assert mod.main(args) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][2:]
    assert table and all("| spprof |" not in row or "%" in row for row in table)


def test_thread_start_benchmark_runs_and_fills_every_cell(capsys):
    """benchmarks/thread_start.py at a tiny size (a few fresh interpreters), so it never rots:
    one row per case, a figure for plain and for spprof in each."""
    from benchmarks import thread_start

    assert thread_start.main(["--smoke"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [r.split("|")[1].strip() for r in rows] == ["alive=1", "alive=20", "short"]
    assert all(row.count(" us") == 0 and row.count("x |") == 1 for row in rows), rows


def test_pass_cost_benchmark_reports_every_cell(capsys):
    """benchmarks/pass_cost.py at a tiny size: a row per mode and count of threads, each with
    passes measured (a drain that never ran would divide by one pass of nothing)."""
    from benchmarks import pass_cost

    assert pass_cost.main(["--smoke"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    cells = [[c.strip() for c in r.split("|")[1:-1]] for r in rows]
    assert [(c[0], c[1]) for c in cells] == [
        ("cpu", "1"),
        ("cpu", "50"),
        ("wall", "1"),
        ("wall", "50"),
    ]
    assert all(float(c[2]) > 0 and float(c[3]) > 0 and float(c[4]) > 0 for c in cells), cells


def test_pass_cost_benchmark_with_churn_starts_threads(capsys):
    """--churn: the measured span starts and joins threads, and passes still come."""
    from benchmarks import pass_cost

    assert pass_cost.main(["--smoke", "--churn", "--modes", "cpu"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    cells = [[c.strip() for c in r.split("|")[1:-1]] for r in rows]
    assert [(c[0], c[1]) for c in cells] == [("cpu", "1"), ("cpu", "50")]
    assert all(float(c[5]) > 0 and float(c[6]) > 100 for c in cells), cells


def test_fork_cost_benchmark_runs(capsys):
    """benchmarks/fork_cost.py at a tiny size: a row per configuration."""
    from benchmarks import fork_cost

    assert fork_cost.main(["--forks", "5", "--rounds", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [r.split("|")[1].strip() for r in rows] == ["plain", "cpu", "wall"]


def test_async_census_costs_at_most_twice_plain_wall_mode(capsys):
    """benchmarks/async_census_cost.py at a small size (300 tasks, 1.5 s): the census ran
    (about every 50 ms), and the process CPU of wall --async is within 2x that of wall mode,
    both measured in this run. The full-size figure is in docs/performance.md."""
    from benchmarks import async_census_cost

    assert async_census_cost.main(["--tasks", "300", "--seconds", "1.5", "--rounds", "1"]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][-1]
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert int(cells[4]) >= 15, row  # 1.5 s / 50 ms = 30, late ones aside
    assert float(cells[3].rstrip("x")) <= 2.0, row


def test_greenlet_census_costs_at_most_twice_plain_wall_mode(capsys):
    """benchmarks/greenlet_census_cost.py at a small size (300 gevent greenlets, 1.5 s): the
    census ran and saw the greenlets waiting, the process CPU of wall --greenlets is within 2x
    that of wall mode, both measured in this run, and a traced switch is timed. The full-size
    figures are in docs/performance.md."""
    pytest.importorskip("gevent")
    from benchmarks import greenlet_census_cost

    assert (
        greenlet_census_cost.main(["--greenlets", "300", "--seconds", "1.5", "--rounds", "1"]) == 0
    )
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    cells = [c.strip() for c in rows[1].split("|")[1:-1]]
    assert int(cells[4]) >= 15, rows  # 1.5 s / 50 ms = 30, late ones aside
    assert int(cells[6]) >= 15 * 250, rows  # nearly all 300 wait at each census
    assert float(cells[3].rstrip("x")) <= 2.0, rows
    # The traced run checks its trace function is installed (switch_ns); the two timings
    # differ by ~70 ns, under the noise of a loaded CI machine (608 ns plain, 539 traced).
    plain, traced = (float(c.split()[0]) for c in rows[3].split("|")[1:-1])
    assert 0 < plain < 1e5 and 0 < traced < 1e5, rows


def test_subprocess_family_benchmark_merges_every_child(capsys):
    """benchmarks/subprocess_family.py at a tiny size: a row per configuration, and the root
    merged at least the 10 children the pool made."""
    from benchmarks import subprocess_family

    assert subprocess_family.main(["--children", "10", "--rounds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[2:5]}
    assert list(rows) == ["plain", "cpu", "subprocesses"], lines
    assert int(rows["subprocesses"][5]) >= 10, lines  # merged
    assert int(rows["subprocesses"][4]) >= 2, lines  # most entries: a child's mark and its file


def test_native_pool_benchmark_reports_share_and_tvd_per_tool(capsys):
    """benchmarks/native_pool.py at a tiny size, so it never rots: a row per tool with the share
    of process CPU and the TVD over the threads (a tool not installed says so in its row), and
    spprof's split of the CPU time between the main thread and OpenBLAS's worker near the
    kernel's. Each thread's weight counts its own CPU timer's expiries, within about one 10 ms
    interval of its CPU time: 0.2 leaves room for a loaded machine, where each thread may get
    only some 20 samples; spprof before it sampled threads without Python state scores ~0.5."""
    import importlib.util
    import sys

    if importlib.util.find_spec("numpy") is None or not sys.platform.startswith("linux"):
        pytest.skip("needs numpy (Makefile DEV_DEPS) and /proc/self/task")
    from benchmarks import native_pool

    assert native_pool.main(["--rounds", "1", "--seconds", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][2:]
    cells = [[c.strip() for c in r.split("|")[1:-1]] for r in rows]
    assert [c[0] for c in cells] == ["spprof", "py-spy"], rows
    assert all(c[1] == "not installed" or "," in c[2] for c in cells), rows
    spprof_tvd = float(cells[0][2].split(",")[0])
    assert spprof_tvd <= 0.2, rows


def test_window_cost_benchmark_prints_a_row_per_stage(capsys):
    """benchmarks/window_cost.py at a tiny size: one row per stage, rows growing."""
    from benchmarks import window_cost

    assert window_cost.main(["--seconds", "1", "--stages", "2", "--windows", "5"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| ") and "us |" in r]
    assert len(rows) == 2, rows
    counts = [int(r.split("|")[1]) for r in rows]
    assert counts[1] > counts[0], rows


def test_native_libs_benchmark_prints_a_row_per_workload(capsys):
    """benchmarks/native_libs.py at a tiny size, so it never rots: a row per workload, with the
    walks and how many reached the thread's start, or the library named as not installed
    (pandas, scikit-learn and torch are the benchmark's own set-up, not DEV_DEPS)."""
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("native unwinding: Linux here")
    from benchmarks import native_libs

    assert native_libs.main(["--seconds", "0.2", "--workloads", "numpy", "torch"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| ")][1:]
    cells = [[c.strip() for c in r.split("|")[1:-1]] for r in rows]
    assert [c[0] for c in cells] == ["numpy", "torch"], rows
    for c in cells:
        assert c[1].startswith("not installed") or (int(c[1]) > 0 and "%" in c[2]), rows
        # The drain's GIL time per 1,000 samples: never 0 for a profile with samples.
        assert c[1].startswith("not installed") or float(c[7]) > 0, rows
        # ... and its CPU in that time is never more than the time.
        assert c[1].startswith("not installed") or 0 < float(c[8]) <= float(c[7]) + 0.05, rows
        # Module files were read for names, by the drain thread without the GIL: "N (T ms) / M".
        assert c[1].startswith("not installed") or int(c[9].split()[0]) > 0, rows


def test_native_libs_reads_py_spy_raw_stacks_as_a_user_would_count_them():
    """The py-spy side of native_libs' table: a raw line is one stack per count, root first;
    a frame with `file:line` is Python, one with a library is native."""
    from benchmarks import native_libs

    text = (
        "<module> (w.py:4);svd (numpy/linalg/_linalg.py:1822);dgemm_kernel (libopenblas.so) 3\n"
        "<module> (w.py:4);work (w.py:9) 1\n"
    )
    stacks = native_libs.read_raw(text)
    assert len(stacks) == 4
    assert stacks[0] == [("<module>", False), ("svd", False), ("dgemm_kernel", True)]
    # 3 of 4 samples end in native code; one native function named.
    assert native_libs.compare(stacks) == (4, 75.0, 1)


def test_callgrind_handler_says_where_a_native_capture_s_instructions_go():
    """benchmarks/callgrind_handler.py --native at a tiny size, so it never rots: a native
    capture counts more instructions than the walk alone, and the unwinder's parts (module
    lookup, CFI search and run, the step cache, its own work) are each reported."""
    import shutil
    import sys

    if not sys.platform.startswith("linux") or shutil.which("valgrind") is None:
        pytest.skip("callgrind: valgrind on Linux")
    from benchmarks import callgrind_handler

    r = callgrind_handler.instructions_per_capture(20, 0.3, 500, native=True)
    assert r["samples"] > 0, r
    per = r["unwinder_per_capture"]
    assert set(per) == {k for k, _ in callgrind_handler.PARTS} | {"unwind_own"}, r
    assert 0 < per["unwind_native"] < r["instructions_per_capture"], r
    # Most steps come from the cache after the first captures: it is looked up every frame.
    assert per["step_cache_lookup"] > 0, r


def test_census_share_benchmark_finds_the_census_walks_sharing():
    """benchmarks/census_share.py at a tiny size: deep threads walked by the census between
    their handler's records, and most records store only what the last one lacked (before
    every writer shared: 5 of 7,764)."""
    from benchmarks import census_share

    got = census_share.measure(threads=4, depth=60, seconds=0.5)
    assert got["records_drained"] > 50, got
    assert got["records_root_shared"] >= 0.5 * got["records_drained"], got
    assert got["records_without_base"] == 0, got
