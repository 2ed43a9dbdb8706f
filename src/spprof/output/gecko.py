"""The Firefox Profiler's format (https://profiler.firefox.com): its "processed" profile, the
JSON samply and CPython 3.15's `--gecko` write, at format version 57 (PROCESSED_VERSION;
the Profiler upgrades older versions when it loads them).

Layout (the Profiler's src/types/profile.ts at version 57 documents every field):
- `meta`: interval, categories, marker schema, product, versions; times are milliseconds
  from the start of the session (`meta.startTime` 0: the profile has no wall-clock start);
- `shared.stringArray`: every string, referred to by index;
- `threads`: one track per thread, each with column tables (`{col: [...], length}`):
  samples (stack, time, weight in ms: `weightType` "tracing-ms", so missed ticks and wall
  time count at their real length), stackTable (frame, prefix: a tree, root first),
  frameTable (func, line, category), funcTable (name, file, first line), resourceTable (one
  per file), markers and an empty nativeSymbols.

Categories: Python frames are "Python" (yellow), native frames "Native" (blue); in wall
mode a sample of a blocked thread gets its leaf frame in "Idle" (transparent), so the
activity graph leaves blocked time blank while the call tree keeps its stack. Markers, per
thread: "GIL held" and "On CPU" intervals, runs of contiguous samples that held the GIL /
ran on a CPU (a sample at t with weight w stands for (t - w, t], as in chrome.py).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

from .._rows import FLAG_GIL_KNOWN, FLAG_HAS_GIL, FLAG_IDLE, FLAG_ON_CPU, pieces

if TYPE_CHECKING:
    from .._model import ProfileData

PROCESSED_VERSION = 57
GECKO_VERSION = 31  # the Gecko format version that went with processed version 57

CATEGORIES: list[dict[str, Any]] = [
    {"name": "Other", "color": "grey", "subcategories": ["Other"]},  # the default (grey)
    {"name": "Python", "color": "yellow", "subcategories": ["Other"]},
    {"name": "Native", "color": "blue", "subcategories": ["Other"]},
    {"name": "Idle", "color": "transparent", "subcategories": ["Other"]},
    {"name": "GIL", "color": "green", "subcategories": ["Other"]},
    {"name": "CPU", "color": "purple", "subcategories": ["Other"]},
]
OTHER, PYTHON, NATIVE, IDLE, GIL, CPU = range(6)

# marker name, schema (data.type), category, the flags a sample needs to be inside it
MARKERS = (
    ("GIL held", "GIL", GIL, FLAG_GIL_KNOWN | FLAG_HAS_GIL),
    ("On CPU", "OnCPU", CPU, FLAG_ON_CPU),
)

NO_PYTHON_FRAME = "<no Python frame>"


def _marker_schema() -> list[dict[str, Any]]:
    return [
        {
            "name": schema,
            "tooltipLabel": name,
            "tableLabel": f"{name} ({{marker.data.samples}} samples)",
            "chartLabel": name,
            "display": ["marker-chart", "marker-table", "timeline-overview"],
            "description": f"Contiguous samples of this thread that {what}.",
            "fields": [{"key": "samples", "label": "Samples", "format": "integer"}],
        }
        for (name, schema, _, _), what in zip(MARKERS, ("held the GIL", "ran on a CPU"))
    ]


class _Strings:
    def __init__(self) -> None:
        self.array: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.array)
            self.array.append(s)
        return i


def _table(columns: dict[str, list[Any]]) -> dict[str, Any]:
    length = len(next(iter(columns.values())))
    return {**columns, "length": length}


class _Thread:
    """One thread's tables, filled sample by sample."""

    def __init__(self, profile: ProfileData, strings: _Strings) -> None:
        self.profile = profile
        self.s = strings
        self.samples: dict[str, list[Any]] = {"stack": [], "time": [], "weight": []}
        self.stack: dict[str, list[Any]] = {"frame": [], "prefix": []}
        self.frame: dict[str, list[Any]] = {
            k: []
            for k in (
                "address",
                "inlineDepth",
                "category",
                "subcategory",
                "func",
                "nativeSymbol",
                "innerWindowID",
                "line",
                "column",
            )
        }
        self.func: dict[str, list[Any]] = {
            k: []
            for k in (
                "name",
                "isJS",
                "relevantForJS",
                "resource",
                "fileName",
                "lineNumber",
                "columnNumber",
            )
        }
        self.resource: dict[str, list[Any]] = {"lib": [], "name": [], "host": [], "type": []}
        self.markers: dict[str, list[Any]] = {
            k: [] for k in ("data", "name", "startTime", "endTime", "phase", "category")
        }
        self.stack_ids: dict[tuple[Optional[int], int], int] = {}
        self.frame_ids: dict[tuple[int, bool], int] = {}
        self.func_ids: dict[tuple[str, str, int], int] = {}
        self.resource_ids: dict[str, int] = {}
        self.leaf_ids: dict[tuple[int, bool], Optional[int]] = {}

    def _resource(self, filename: str) -> int:
        r = self.resource_ids.get(filename)
        if r is None:
            r = self.resource_ids[filename] = len(self.resource["name"])
            self.resource["lib"].append(None)
            self.resource["name"].append(self.s(filename))
            self.resource["host"].append(None)
            self.resource["type"].append(0)  # resourceTypes.unknown: a source file
        return r

    def _func(self, name: str, filename: str, first_line: int, native: bool) -> int:
        key = (name, filename, first_line)
        fn = self.func_ids.get(key)
        if fn is None:
            fn = self.func_ids[key] = len(self.func["name"])
            self.func["name"].append(self.s(name))
            self.func["isJS"].append(not native and bool(filename))  # "JS only" = Python only
            self.func["relevantForJS"].append(False)
            self.func["resource"].append(self._resource(filename) if filename else -1)
            self.func["fileName"].append(self.s(filename) if filename else None)
            self.func["lineNumber"].append(first_line if first_line > 0 else None)
            self.func["columnNumber"].append(None)
        return fn

    def _frame(self, fid: int, idle: bool) -> int:
        """The frame-table entry for spprof frame `fid` (-1: no Python frame); an idle leaf
        gets its own entry in the Idle category."""
        key = (fid, idle)
        i = self.frame_ids.get(key)
        if i is None:
            if fid < 0:
                fn, line, cat = self._func(NO_PYTHON_FRAME, "", 0, False), None, OTHER
            else:
                f = self.profile.frame_table[fid]
                fn = self._func(f.display_name, f.filename, f.first_lineno, f.is_native)
                line = f.lineno if f.lineno > 0 else None
                cat = NATIVE if f.is_native else PYTHON
            i = self.frame_ids[key] = len(self.frame["func"])
            for col, value in (
                ("address", -1),
                ("inlineDepth", 0),
                ("category", IDLE if idle else cat),
                ("subcategory", 0),
                ("func", fn),
                ("nativeSymbol", None),
                ("innerWindowID", 0),
                ("line", line),
                ("column", None),
            ):
                self.frame[col].append(value)
        return i

    def _stack(self, prefix: Optional[int], frame: int) -> int:
        key = (prefix, frame)
        i = self.stack_ids.get(key)
        if i is None:
            i = self.stack_ids[key] = len(self.stack["frame"])
            self.stack["frame"].append(frame)
            self.stack["prefix"].append(prefix)
        return i

    def leaf(self, stack_id: int, idle: bool) -> Optional[int]:
        """The stack-table index of spprof stack `stack_id` (root first in spprof, a chain
        of prefixes here)."""
        key = (stack_id, idle)
        if key in self.leaf_ids:
            return self.leaf_ids[key]
        ids = list(self.profile.stacks[stack_id]) or [-1]
        prefix: Optional[int] = None
        for pos, fid in enumerate(ids):
            prefix = self._stack(prefix, self._frame(fid, idle and pos == len(ids) - 1))
        self.leaf_ids[key] = prefix
        return prefix

    def add_marker(
        self, name: int, schema: str, cat: int, start: float, end: float, n: int
    ) -> None:
        for col, value in (
            ("data", {"type": schema, "samples": n}),
            ("name", name),
            ("startTime", start),
            ("endTime", end),
            ("phase", 1),  # an interval
            ("category", cat),
        ):
            self.markers[col].append(value)

    def tables(self) -> dict[str, Any]:
        return {
            "samples": {**_table(self.samples), "weightType": "tracing-ms"},
            "stackTable": _table(self.stack),
            "frameTable": _table(self.frame),
            "funcTable": _table(self.func),
            "resourceTable": _table(self.resource),
            "nativeSymbols": {
                "libIndex": [],
                "address": [],
                "name": [],
                "functionSize": [],
                "length": 0,
            },
            "markers": _table(self.markers),
        }


def _ms(ns: float) -> float:
    return round(ns / 1e6, 6)


def render(profile: ProfileData) -> bytes:
    meta = profile.metadata
    strings = _Strings()
    t0 = profile.start_ns
    half_interval = profile.interval_ms * 1e6 / 2

    # Threads by logical identity (a recreated Python thread state stays one track). A task
    # track (waiting asyncio tasks, greenlets) is a thread of its own after its thread's: its
    # samples are sums per second of many waiters, idle, for the call tree (no activity).
    records = profile.thread_table
    keys: dict[tuple[int, int, bool], list[int]] = {}
    for r in records:
        keys.setdefault(r.key, []).append(r.serial)
    serial_key = {s: k for k, serials in keys.items() for s in serials}
    rows: dict[tuple[int, int, bool], list[tuple[int, int, int, int, int]]] = {k: [] for k in keys}
    for ts, weight, stack, serial, flags, n in profile.iter_counted():
        key = serial_key.get(serial)
        if key is not None:
            rows[key].append((ts, weight, stack, flags, n))

    threads: list[dict[str, Any]] = []
    marker_names = [strings(m[0]) for m in MARKERS]
    main_index = -1
    process_of = profile.process_names()
    for key in sorted(keys, key=lambda k: (min(records[s].registered_ns for s in keys[k]), k[2])):
        recs = [records[s] for s in keys[key]]
        th = _Thread(profile, strings)
        open_runs: list[Optional[list[float]]] = [None] * len(MARKERS)  # [start, end, n]
        for ts, weight, stack, flags, n in sorted(rows[key]):
            # A folded wait is one sample of its whole weight, stamped as its first sample
            # (_rows.pieces): the stack chart shows it from there on, as it showed its samples.
            at = ts if n == 1 else next(pieces(ts, weight, n))[0]
            th.samples["stack"].append(th.leaf(stack, bool(flags & FLAG_IDLE)))
            th.samples["time"].append(_ms(at - t0))
            th.samples["weight"].append(_ms(weight))
            begin, end = max(ts - weight, t0), ts  # not before the session (chrome.py)
            for m, (_, schema, cat, need) in enumerate(MARKERS):
                run = open_runs[m]
                inside = flags & need == need
                if run is not None and (not inside or begin - run[1] > half_interval):
                    th.add_marker(
                        marker_names[m],
                        schema,
                        cat,
                        _ms(run[0] - t0),
                        _ms(run[1] - t0),
                        int(run[2]),
                    )
                    run = open_runs[m] = None
                if inside:
                    if run is None:
                        open_runs[m] = [begin, end, n]
                    else:
                        run[1] = end
                        run[2] += n
        for m, run in enumerate(open_runs):
            if run is not None:
                _, schema, cat, _ = MARKERS[m]
                th.add_marker(
                    marker_names[m], schema, cat, _ms(run[0] - t0), _ms(run[1] - t0), int(run[2])
                )
        name = recs[0].label
        pid, process = process_of(recs[0])
        main = recs[0].name == "MainThread"
        if main and main_index < 0:  # the first process's: the session's own
            main_index = len(threads)
        ended = [r.ended_ns for r in recs]
        threads.append(
            {
                "name": name,
                "isMainThread": main,
                "processType": "default",
                "processName": process.rsplit(" (pid ", 1)[0],
                "processStartupTime": 0,
                "processShutdownTime": None,
                "registerTime": max(0.0, _ms(min(r.registered_ns for r in recs) - t0)),
                "unregisterTime": _ms(max(ended) - t0) if all(ended) else None,
                "pausedRanges": [],
                "pid": str(pid),
                "tid": key[1],
                **th.tables(),
            }
        )

    doc = {
        "meta": {
            "interval": profile.interval_ms,
            "startTime": 0,
            "profilingStartTime": 0,
            "profilingEndTime": _ms(profile.duration_ns),
            "processType": 0,
            "product": "spprof",
            "importedFrom": "spprof",
            "stackwalk": 0,
            "debug": False,
            "version": GECKO_VERSION,
            "preprocessedProfileVersion": PROCESSED_VERSION,
            "categories": CATEGORIES,
            "markerSchema": _marker_schema(),
            "symbolicated": True,
            "platform": str(meta.get("platform", "")),
            "oscpu": f"{meta.get('platform', '')} {meta.get('machine', '')}".strip(),
            "abi": str(meta.get("machine", "")),
            "misc": f"Python {meta.get('python', '?')}, {profile.mode} mode",
            "arguments": " ".join(str(a) for a in meta.get("argv", [])),
            "initialSelectedThreads": [max(0, main_index)] if threads else [],
            "keepProfileThreadOrder": True,
        },
        "libs": [],
        "pages": [],
        "counters": [],
        "shared": {"stringArray": strings.array},
        "threads": threads,
    }
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
