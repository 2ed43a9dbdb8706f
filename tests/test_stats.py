"""spprof.stats() is typed (SessionStats) and still reads like the dict it was."""

from __future__ import annotations

import json

import spprof
from spprof import SessionStats, _ext
from workloads import spin


def test_stats_are_typed_and_read_as_a_mapping():
    with spprof.Profiler(interval_ms=1):
        spin(0.1)
    st = spprof.stats()
    assert isinstance(st, SessionStats)
    assert isinstance(st.samples_captured, int) and st.samples_captured > 0
    assert st["timer"] == st.timer and st.get("samples_captured") == st.samples_captured
    assert st.mode == "cpu" and "wall_ticks" not in st and st.wall_ticks is None
    assert st.get("wall_ticks", 0) == 0
    raw = _ext.stats()
    assert st.as_dict() == raw and dict(st) == raw and set(st) == set(raw)
    json.dumps(st.as_dict())


def test_unknown_counters_are_kept():
    raw = {**_ext.stats(), "a_counter_from_a_newer_core": 7}
    st = SessionStats.from_native(raw)
    assert st.extra == {"a_counter_from_a_newer_core": 7}
    assert st["a_counter_from_a_newer_core"] == 7 and st.as_dict() == raw


def test_thread_table_is_typed():
    with spprof.Profiler(interval_ms=1) as p:
        spin(0.05)
    assert p.profile is not None
    table = p.profile.thread_table
    assert all(isinstance(t, spprof.ThreadRecord) for t in table)
    assert [t.serial for t in table] == list(range(len(table)))
