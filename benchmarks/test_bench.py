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
