"""A Profiler block that asks for waiting tasks or greenlets inside a wall-mode session that
counts neither (issue 26): the block gets a census of its own for its span (_censuses.py).
Before, such a block had the running samples only: no task or greenlet track. Each case runs
tests/scripts/census_window.py under the CLI in its own interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import SCRIPTS, run_python
from spprof._async_census import TRACK_SUFFIX as TASKS
from spprof._greenlet_census import TRACK_SUFFIX as GREENLETS


@pytest.mark.parametrize("kind", ["async", "greenlet"])
def test_a_window_asking_for_them_gets_its_waits_on_a_session_without(
    kind: str, tmp_path: Path
) -> None:
    """`spprof --mode wall script.py` (no --async, no --greenlets), and in it a
    `Profiler(async_tasks=True)` (`greenlets=True`) block in which napper waits 1 s: the
    block's profile has napper's wait on the track, from a census started for the block and
    made once more as it ends."""
    if kind == "greenlet":
        pytest.importorskip("gevent")  # the Makefile's DEV_DEPS
    out = tmp_path / "window.json"
    script = SCRIPTS / "census_window.py"
    r = run_python(
        "-m", "spprof", "-q", "--mode", "wall", "-o", str(tmp_path / "s.spprof"), str(script),
        kind, str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    track = TASKS if kind == "async" else GREENLETS
    napper = sum(
        weight
        for thread, weight, frames in data["samples"]
        if thread.endswith(track) and [f[0] for f in frames][-2:-1] == ["napper"]
    )
    # a census every 50 ms: up to one period of the wait falls after the last before it ends
    assert 0.85e9 <= napper <= 1.1e9, (napper / 1e9, data["samples"])
    assert data["stats"][f"{kind}_censuses"] >= 10


def test_a_threads_first_census_reaches_back_no_further_than_the_census_began() -> None:
    """A thread's first census weighs one period (50 ms), but never more than the census has
    run: its rows must not begin before the profile does, or the profile's own span cuts them
    (_waits.add_to pro-rates a row that sticks out). Before, a first census 41 ms after the
    start gave 2,000 waiting tasks 9 ms each from before it, and the profile's task track held
    17.5 s less than the census had counted (CI, 3.13, test_census_memory)."""
    from spprof._waits import WaitCensus

    census = WaitCensus(clock=lambda: 0, start_ns=5_000_000_000)
    now = census.start_ns + 41_000_000
    weight = census.weight(7, now)
    assert weight == 41_000_000
    census.add(7, ("wait_1",), 2000, 2000 * weight, now)
    (row,) = census.rows.values()
    assert row.since_ns == census.start_ns
    assert census.weight(7, now + 50_000_000) == 50_000_000  # then the time since the last
    assert census.weight(8, now + 900_000_000) == census.period_ns  # a thread first seen later
