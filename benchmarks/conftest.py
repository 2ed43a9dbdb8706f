"""pytest-benchmark settings for benchmarks/test_bench.py.

SPPROF_BENCH_SIZE=smoke (make bench-smoke: tiny sizes, run once with --benchmark-disable) or
quick (default, make bench: a tenth of the full sizes, a few rounds). The overhead table of
docs/performance.md comes from `python -m benchmarks.run`, not from these timings.
"""

from __future__ import annotations

import os

import pytest

from benchmarks.workloads import WORKLOADS


def _size_mode() -> str:
    mode = os.environ.get("SPPROF_BENCH_SIZE", "quick")
    if mode not in ("smoke", "quick"):
        raise pytest.UsageError(f"SPPROF_BENCH_SIZE must be smoke or quick, not {mode!r}")
    return mode


@pytest.fixture(scope="session")
def size_mode() -> str:
    return _size_mode()


@pytest.fixture(scope="session")
def sizes(size_mode: str) -> dict:
    if size_mode == "smoke":
        return {name: w.smoke for name, w in WORKLOADS.items()}
    return {name: max(w.smoke, w.full // 10) for name, w in WORKLOADS.items()}


@pytest.fixture(scope="session")
def rounds(size_mode: str) -> int:
    return 1 if size_mode == "smoke" else 3
