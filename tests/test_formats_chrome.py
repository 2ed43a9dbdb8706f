"""Chrome trace event output: parsed as JSON and checked the way a timeline viewer draws it
(per-thread tracks named by "M" events; "X" events that nest and come in time order)."""

from __future__ import annotations

import json

from spprof import _rows as rowlayout
from spprof.output import render
from test_formats_common import MS, real_profile, small_profile

EPS = 0.0015  # microseconds: timestamps carry three decimals


def load_trace(profile) -> dict:
    doc = json.loads(render(profile, "chrome"))
    assert isinstance(doc["traceEvents"], list)
    return doc


def tracks(doc: dict) -> tuple[dict[int, str], dict[int, list[dict]]]:
    names = {
        e["tid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    events: dict[int, list[dict]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            events.setdefault(e["tid"], []).append(e)
    return names, events


def check_nesting(events: list[dict]) -> None:
    """Events in file order are sorted by start and properly nested (no partial overlap)."""
    open_: list[dict] = []
    last_ts = -1.0
    for e in events:
        assert e["dur"] >= 0
        assert e["ts"] >= last_ts - EPS, "events of a thread must come in start order"
        last_ts = e["ts"]
        while open_ and e["ts"] >= open_[-1]["ts"] + open_[-1]["dur"] - EPS:
            open_.pop()
        if open_:
            parent = open_[-1]
            assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + EPS, (parent, e)
        open_.append(e)


def top_level_sequence(events: list[dict], depth: int) -> list[str]:
    """Names of the events at `depth` (0 = outermost) in time order."""
    out, open_ = [], []
    for e in events:
        while open_ and e["ts"] >= open_[-1]["ts"] + open_[-1]["dur"] - EPS:
            open_.pop()
        if len(open_) == depth:
            out.append(e["name"])
        open_.append(e)
    return out


def test_each_thread_gets_a_named_track_of_nested_events():
    doc = load_trace(small_profile())
    names, events = tracks(doc)
    assert names == {4000: "MainThread", 4001: "worker"}
    for evs in events.values():
        check_nesting(evs)
    assert all(e["pid"] == 4242 for e in doc["traceEvents"])


def test_main_thread_timeline_shows_hot_then_cold_then_hot():
    _, events = tracks(load_trace(small_profile()))
    main = events[4000]
    assert top_level_sequence(main, 0) == ["<module>"]
    assert top_level_sequence(main, 1) == ["main"]
    # hot's two lines (12 and 13) are one function: one event until cold interrupts it.
    assert top_level_sequence(main, 2) == ["Work.hot", "cold", "Work.hot"]
    hot1, cold, hot2 = [e for e in main if e["name"] in ("Work.hot", "cold")]
    assert abs(hot1["dur"] - 6 * MS / 1000) < 1  # 6 ms of samples, microseconds
    assert abs(cold["dur"] - 2 * MS / 1000) < 1
    assert hot1["ts"] + hot1["dur"] <= cold["ts"] + EPS <= hot2["ts"] + EPS
    assert cold["args"] == {"file": "/app/prog.py", "line": 17}
    module = main[0]
    assert module["name"] == "<module>" and abs(module["dur"] - 10_000) < 1


def test_worker_track_starts_when_the_worker_ran():
    _, events = tracks(load_trace(small_profile()))
    worker = events[4001]
    assert [e["name"] for e in worker] == ["Thread.run", "wait"]
    # first sample at t0 + 2 ms + 400 ns with 1 ms weight: the track starts at 1.0004 ms
    assert abs(worker[0]["ts"] - 1000.4) < EPS and abs(worker[0]["dur"] - 3000) < EPS


def test_a_gap_in_sampling_closes_every_frame():
    p = small_profile()
    t0 = p.start_ns
    rows = [(t0 + 1 * MS, MS, 0, 0, 2), (t0 + 2 * MS, MS, 0, 0, 2), (t0 + 50 * MS, MS, 0, 0, 2)]
    p.rows = b"".join(rowlayout.pack(*r) for r in rows)
    _, events = tracks(load_trace(p))
    main = events[4000]
    assert top_level_sequence(main, 0) == ["<module>", "<module>"]
    assert abs(main[0]["dur"] - 2000) < EPS


def test_a_first_sample_heavier_than_the_time_since_start_is_not_drawn_before_it():
    # A thread's timer starts at a random phase: its first sample may come 0.4 ms after start()
    # and stand for a whole 1 ms interval. Old code drew it from -0.6 ms (a CI run of
    # test_real_profile_timeline caught -549 us).
    p = small_profile()
    t0 = p.start_ns
    rows = [(t0 + MS * 4 // 10, MS, 0, 0, 2), (t0 + MS * 14 // 10, MS, 0, 0, 2)]
    p.rows = b"".join(rowlayout.pack(*r) for r in rows)
    _, events = tracks(load_trace(p))
    main = events[4000]
    assert min(e["ts"] for e in main) == 0.0, main
    check_nesting(main)
    assert abs(main[0]["dur"] - 1400) < EPS  # from start() to the last sample


def test_real_profile_timeline(tmp_path):
    p = real_profile(tmp_path)
    doc = load_trace(p)
    names, events = tracks(doc)
    by_name = {v: k for k, v in names.items()}
    assert {"MainThread", "warm-worker"} <= set(by_name)
    for evs in events.values():
        check_nesting(evs)
    main = events[by_name["MainThread"]]
    # The longest event below main() on the main thread is hot_function.
    below_main = [e for e in main if e["name"] not in ("<module>", "main")]
    assert max(below_main, key=lambda e: e["dur"])["name"] == "hot_function"
    worker = events[by_name["warm-worker"]]
    assert any(e["name"] == "warm_function" for e in worker)
    # The worker ran 0.3 s, inside the main thread's 1.2 s.
    end = max(e["ts"] + e["dur"] for e in main)
    assert all(e["ts"] + e["dur"] <= end + 50_000 for e in worker)
