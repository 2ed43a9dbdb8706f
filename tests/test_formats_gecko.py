"""The Firefox Profiler format (-f gecko, *.gecko.json): the processed profile format at
version 57, checked against its documented schema (the Profiler's src/types/profile.ts and
markers.ts at that version, the CHANGELOG-formats.md entries up to 57), then read back:
one track per thread, its samples' stacks, weights, categories and markers."""

from __future__ import annotations

import json

import pytest

from spprof import Frame, _rows
from spprof.output import FORMATS, guess_format, render
from spprof.output.gecko import PROCESSED_VERSION
from test_formats_common import MS, real_profile, small_profile

# ---- the documented schema (profile.ts, processed version 57) ----------------------------

# Required keys of ProfileMeta (optional ones are checked by type only when present).
META_REQUIRED = {
    "interval": (int, float),
    "startTime": (int, float),
    "processType": int,
    "product": str,
    "stackwalk": int,
    "version": int,
    "preprocessedProfileVersion": int,
    "markerSchema": list,
}
META_OPTIONAL = {
    "categories": list,
    "debug": bool,
    "symbolicated": bool,
    "profilingStartTime": (int, float),
    "profilingEndTime": (int, float),
    "platform": str,
    "oscpu": str,
    "abi": str,
    "misc": str,
    "arguments": str,
    "importedFrom": str,
    "initialSelectedThreads": list,
    "keepProfileThreadOrder": bool,
}
CATEGORY_COLORS = {
    "transparent", "purple", "green", "orange", "yellow", "lightblue", "blue", "brown",
    "magenta", "red", "lightred", "darkgrey", "grey",
}  # fmt: skip
MARKER_DISPLAY = {
    "marker-chart", "marker-table", "timeline-overview", "timeline-memory", "timeline-ipc",
    "timeline-fileio", "stack-chart",
}  # fmt: skip
MARKER_FORMATS = {
    "url", "file-path", "sanitized-string", "string", "unique-string", "flow-id",
    "terminating-flow-id", "duration", "time", "seconds", "milliseconds", "microseconds",
    "nanoseconds", "bytes", "percentage", "integer", "decimal", "pid", "tid", "list",
}  # fmt: skip
THREAD_REQUIRED = {
    "processType": str,
    "processStartupTime": (int, float),
    "processShutdownTime": (int, float, type(None)),
    "registerTime": (int, float),
    "unregisterTime": (int, float, type(None)),
    "pausedRanges": list,
    "name": str,
    "isMainThread": bool,
    "pid": str,  # a string since version 47
    "tid": (int, str),
    "samples": dict,
    "markers": dict,
    "stackTable": dict,
    "frameTable": dict,
    "funcTable": dict,
    "resourceTable": dict,
    "nativeSymbols": dict,
}
# Column tables: their columns (each exactly `length` long).
TABLES = {
    "stackTable": {"frame", "prefix"},  # category/subcategory dropped in 53
    "frameTable": {
        "address",
        "inlineDepth",
        "category",
        "subcategory",
        "func",
        "nativeSymbol",
        "innerWindowID",
        "line",
        "column",
    },  # implementation dropped in 54, optimizations in 45; fmt: skip
    "funcTable": {
        "name",
        "isJS",
        "relevantForJS",
        "resource",
        "fileName",
        "lineNumber",
        "columnNumber",
    },  # fileName became `source` only in 58; fmt: skip
    "resourceTable": {"lib", "name", "host", "type"},
    "nativeSymbols": {"libIndex", "address", "name", "functionSize"},
    "markers": {"data", "name", "startTime", "endTime", "phase", "category"},
}
WEIGHT_TYPES = {"samples", "tracing-ms", "bytes"}


def is_index(v, n: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < n


def check_schema(doc: dict) -> None:
    """Raise AssertionError where `doc` departs from the processed format (version 57)."""
    assert set(doc) >= {"meta", "libs", "threads", "shared"}
    meta = doc["meta"]
    for key, types in META_REQUIRED.items():
        assert isinstance(meta.get(key), types), key
    for key, types in META_OPTIONAL.items():
        if key in meta:
            assert isinstance(meta[key], types), key
    assert meta["preprocessedProfileVersion"] == 57
    assert meta["stackwalk"] in (0, 1)
    cats = meta["categories"]
    for c in cats:
        assert set(c) >= {"name", "color", "subcategories"}
        assert c["color"] in CATEGORY_COLORS
        assert c["subcategories"] and all(isinstance(s, str) for s in c["subcategories"])
    assert any(c["color"] == "grey" for c in cats), "the default category must be grey"
    schema_names = set()
    for s in meta["markerSchema"]:
        assert isinstance(s["name"], str) and s["name"] not in schema_names
        schema_names.add(s["name"])
        assert set(s["display"]) <= MARKER_DISPLAY
        for f in s["fields"]:  # `fields` since 55, each with key and format
            assert isinstance(f["key"], str) and f["format"] in MARKER_FORMATS
    assert isinstance(doc["libs"], list)
    strings = doc["shared"]["stringArray"]  # shared since 56
    assert all(isinstance(s, str) for s in strings)
    ns = len(strings)

    for th in doc["threads"]:
        for key, types in THREAD_REQUIRED.items():
            assert isinstance(th.get(key), types), key
        for table, columns in TABLES.items():
            t = th[table]
            assert set(t) - {"length"} == columns, (table, set(t) ^ columns)
            assert all(len(t[c]) == t["length"] for c in columns), table
        stacks, frames, funcs = th["stackTable"], th["frameTable"], th["funcTable"]
        res = th["resourceTable"]
        for i, (fr, prefix) in enumerate(zip(stacks["frame"], stacks["prefix"])):
            assert is_index(fr, frames["length"])
            assert prefix is None or is_index(prefix, i), "prefixes come first"
        for i in range(frames["length"]):
            assert is_index(frames["func"][i], funcs["length"])
            cat = frames["category"][i]
            assert cat is None or is_index(cat, len(cats))
            if cat is not None:
                assert is_index(frames["subcategory"][i], len(cats[cat]["subcategories"]))
            assert frames["line"][i] is None or frames["line"][i] > 0
            assert frames["address"][i] == -1 or frames["address"][i] >= 0
        for i in range(funcs["length"]):
            assert is_index(funcs["name"][i], ns)
            assert isinstance(funcs["isJS"][i], bool)
            assert isinstance(funcs["relevantForJS"][i], bool)
            r = funcs["resource"][i]
            assert r == -1 or is_index(r, res["length"])
            assert funcs["fileName"][i] is None or is_index(funcs["fileName"][i], ns)
        for i in range(res["length"]):
            assert is_index(res["name"][i], ns)
            assert isinstance(res["type"][i], int)
        samples = th["samples"]
        assert samples["weightType"] in WEIGHT_TYPES
        assert isinstance(samples.get("time"), list) or isinstance(samples.get("timeDeltas"), list)
        cols = {"stack", "time", "weight"} & set(samples)
        assert all(len(samples[c]) == samples["length"] for c in cols if samples[c] is not None)
        assert all(s is None or is_index(s, stacks["length"]) for s in samples["stack"])
        assert samples["time"] == sorted(samples["time"]), "samples in time order"
        m = th["markers"]
        for i in range(m["length"]):
            assert is_index(m["name"][i], ns)
            assert m["phase"][i] in (0, 1, 2, 3)
            assert is_index(m["category"][i], len(cats))
            if m["phase"][i] == 1:
                assert m["startTime"][i] <= m["endTime"][i]
            data = m["data"][i]
            assert data is None or data["type"] in schema_names


# ---- reading it back ---------------------------------------------------------------------


def stacks_of(doc: dict, th: dict) -> list[tuple[list[str], float, str]]:
    """Per sample: (function names root first, weight, leaf category name)."""
    strings = doc["shared"]["stringArray"]
    cats = doc["meta"]["categories"]
    st, fr, fn = th["stackTable"], th["frameTable"], th["funcTable"]
    out = []
    for s, w in zip(th["samples"]["stack"], th["samples"]["weight"]):
        names = []
        leaf_cat = cats[fr["category"][st["frame"][s]]]["name"]
        while s is not None:
            names.append(strings[fn["name"][fr["func"][st["frame"][s]]]])
            s = st["prefix"][s]
        out.append((names[::-1], w, leaf_cat))
    return out


def markers_of(doc: dict, th: dict) -> list[tuple[str, float, float, int]]:
    strings = doc["shared"]["stringArray"]
    m = th["markers"]
    return [
        (strings[m["name"][i]], m["startTime"][i], m["endTime"][i], m["data"][i]["samples"])
        for i in range(m["length"])
    ]


def test_registered():
    assert FORMATS["gecko"][1] == ".gecko.json"
    assert guess_format("run.gecko.json") == "gecko"
    assert guess_format("run.json") == "speedscope"


def test_hand_made_profile_matches_the_schema_and_reads_back():
    p = small_profile()
    doc = json.loads(render(p, "gecko"))
    check_schema(doc)
    assert PROCESSED_VERSION == 57
    assert doc["meta"]["interval"] == 1.0
    threads = doc["threads"]
    assert [(t["name"], t["tid"], t["isMainThread"]) for t in threads] == [
        ("MainThread", 4000, True),
        ("worker", 4001, False),
    ]
    main, worker = threads
    assert main["pid"] == "4242"
    got = stacks_of(doc, main)
    assert len(got) == 10
    assert sum(w for _, w, _ in got) == pytest.approx(10.0)  # ms, weightType tracing-ms
    assert main["samples"]["weightType"] == "tracing-ms"
    assert [n for n, _, _ in got].count(["<module>", "main", "Work.hot"]) == 8
    assert [n for n, _, _ in got].count(["<module>", "main", "cold"]) == 2
    assert {c for _, _, c in got} == {"Python"}
    # Times: ms from the session start, in order (the first sample at 1 ms).
    assert main["samples"]["time"][0] == pytest.approx(1.0)
    # Lines per frame: Work.hot ran on lines 12 and 13.
    strings = doc["shared"]["stringArray"]
    fr, fn = main["frameTable"], main["funcTable"]
    hot_lines = {
        fr["line"][i]
        for i in range(fr["length"])
        if strings[fn["name"][fr["func"][i]]] == "Work.hot"
    }
    assert hot_lines == {12, 13}
    hot = next(i for i in range(fn["length"]) if strings[fn["name"][i]] == "Work.hot")
    assert strings[fn["fileName"][hot]] == "/app/prog.py" and fn["lineNumber"][hot] == 10

    # The worker blocked throughout (idle samples): its leaf is in the Idle category.
    got = stacks_of(doc, worker)
    assert [(n, c) for n, _, c in got] == [(["Thread.run", "wait"], "Idle")] * 3
    assert worker["unregisterTime"] == pytest.approx(6.0)

    # Markers: MainThread held the GIL and ran on a CPU in one contiguous run of 10
    # samples, from the first sample's start (0 ms) to the last one (10 ms); the idle
    # worker did neither.
    runs = markers_of(doc, main)
    assert sorted(r[0] for r in runs) == ["GIL held", "On CPU"]
    for _, start, end, n in runs:
        assert n == 10
        assert start == pytest.approx(0.0, abs=1e-3)
        assert end == pytest.approx(10.0, abs=1e-3)
    assert markers_of(doc, worker) == []


def test_native_frames_and_gaps():
    p = small_profile()
    p.frame_table[4] = Frame("run", "", 0, is_native=True, qualname="native_run")
    doc = json.loads(render(p, "gecko"))
    check_schema(doc)
    worker = doc["threads"][1]
    strings = doc["shared"]["stringArray"]
    cats = [c["name"] for c in doc["meta"]["categories"]]
    fr, fn = worker["frameTable"], worker["funcTable"]
    native = next(
        i for i in range(fr["length"]) if strings[fn["name"][fr["func"][i]]] == "native_run"
    )
    assert cats[fr["category"][native]] == "Native"
    assert fn["isJS"][fr["func"][native]] is False
    assert fn["fileName"][fr["func"][native]] is None


def test_marker_runs_split_at_gaps_and_flag_changes():
    p = small_profile()
    # Drop MainThread's samples 5 and 6 (the rows after the worker's): a 2 ms gap.
    rows = list(_rows.ROW.iter_unpack(p.rows))
    keep = [r for i, r in enumerate(rows) if i not in (7, 8)]
    p.rows = b"".join(_rows.ROW.pack(*r) for r in keep)
    doc = json.loads(render(p, "gecko"))
    check_schema(doc)
    gil = sorted(r for r in markers_of(doc, doc["threads"][0]) if r[0] == "GIL held")
    assert [n for _, _, _, n in gil] == [4, 4]
    assert gil[0][2] < gil[1][1]  # the gap lies between the two runs
    assert gil[1][1] - gil[0][2] == pytest.approx(2.0, abs=0.01)


def test_real_profile(tmp_path):
    p = real_profile(tmp_path)
    path = tmp_path / "real.gecko.json"
    p.save(path, "gecko")
    doc = json.loads(path.read_text(encoding="utf-8"))
    check_schema(doc)
    by_name = {t["name"]: t for t in doc["threads"]}
    assert {"MainThread", "warm-worker"} <= set(by_name)
    main = stacks_of(doc, by_name["MainThread"])
    assert sum(1 for names, _, _ in main if "hot_function" in names) > len(main) / 2
    worker = stacks_of(doc, by_name["warm-worker"])
    assert any(names[-1] == "warm_function" for names, _, _ in worker)
    assert not any("hot_function" in names for names, _, _ in worker)
    total_samples = sum(t["samples"]["length"] for t in doc["threads"])
    assert total_samples == p.row_count  # an entry per row (a folded wait is one)
    total_ms = sum(sum(t["samples"]["weight"]) for t in doc["threads"])
    assert total_ms == pytest.approx(p.total_weight_ns / MS, rel=1e-6)
