"""Chrome's trace event format (JSON): opens in Perfetto (ui.perfetto.dev) and chrome://tracing.

Each thread gets a track of "X" (complete) events rebuilt from its consecutive samples, so
the timeline shows what each thread did when:

- a sample taken at `t` with weight `w` stands for the interval (t - w, t]: the time the
  sample's timer counted before it fired;
- when the next sample of the thread starts within half an interval of where the last one
  ended, the two are contiguous and every frame they share (same function at the same depth,
  counted from the root) stays open; frames that differ close and open;
- a longer gap (the thread was off CPU in cpu mode, or not sampled) closes every frame.

Waiting asyncio tasks and greenlets (a task track, `THREAD asyncio tasks`) are sums per
second of many waiters on one chain, not samples of one thread. Each chain's rows become runs
(consecutive rows, each standing for the time since the one before) and the runs are laid on
lanes, `THREAD asyncio tasks #N`, each a track of its own beside the loop thread, a run on the
first lane free at its start: one lane per chain waiting at the same time. A counter track,
`THREAD asyncio tasks waiting`, has the number of waiters (a row's weight over its span).

Thread and process names come as "M" metadata events; times are microseconds from the start
of the session. Events are sorted per thread by start time, a parent before its children.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._model import ProfileData, ThreadRecord


MAX_LANES = 64  # per task track; runs beyond are counted in otherData.task_runs_left_out
LANE_TID_BASE = 1 << 40  # lanes' tids: above any OS thread id, below JSON's exact integers
ROW_SPAN_NS = 1_000_000_000  # a census row sums at most a second (_waits.py)

Open = tuple[tuple[str, str, int], int, int]  # (function key, frame id, start ns)


class _Track:
    """One thread's events, built from its samples in time order."""

    def __init__(self, profile: ProfileData, pid: int, tid: int) -> None:
        self.profile = profile
        self.pid = pid
        self.tid = tid
        self.open: list[Open] = []  # open frames, root first
        self.keyed: list[tuple[float, float, int, dict[str, Any]]] = []  # sort key + event

    def us(self, ns: int) -> float:
        return round((ns - self.profile.start_ns) / 1000, 3)

    def close(self, depth: int, at: int) -> None:
        """Close the open frames deeper than `depth` at time `at` (ns)."""
        while len(self.open) > depth:
            _, fid, began = self.open.pop()
            f = self.profile.frame_table[fid]
            ts = self.us(began)
            dur = round(
                self.us(at) - ts, 3
            )  # from the rounded ends: a child never outlives its parent
            event = {
                "ph": "X",
                "name": f.display_name,
                "cat": "native" if f.is_native else "python",
                "pid": self.pid,
                "tid": self.tid,
                "ts": ts,
                "dur": dur,
                # A frame spprof makes (<GC>, <subinterpreter N>) has no place: no args.
                "args": {"file": f.filename, "line": f.lineno} if f.filename else {},
            }
            self.keyed.append((ts, -dur, len(self.open), event))

    def add(self, samples: list[tuple[int, int, int]], half_interval: int) -> None:
        table = self.profile.frame_table
        last_end = 0
        start = self.profile.start_ns
        for ts, weight, stack in sorted(samples):
            # A sample stands for the `weight` before it; a thread's first one may weigh more
            # than the time since start() (its timer's random phase: a 1 ms interval sampled
            # 0.45 ms in), and nothing is drawn before the session began.
            begin = max(ts - weight, start)
            if self.open and begin - last_end <= half_interval:
                begin = last_end  # contiguous with the previous sample
            else:
                self.close(0, last_end)
            begin = max(begin, last_end)
            ids = self.profile.stacks[stack]
            depth = 0
            while depth < min(len(self.open), len(ids)):
                f = table[ids[depth]]
                if self.open[depth][0] != (f.display_name, f.filename, f.first_lineno):
                    break
                depth += 1
            self.close(depth, begin)
            for fid in ids[depth:]:
                f = table[fid]
                self.open.append(((f.display_name, f.filename, f.first_lineno), fid, begin))
            last_end = max(ts, begin)
        self.close(0, last_end)

    def events(self) -> list[dict[str, Any]]:
        # Parents before children: by start, then the longer event, then the outer one.
        self.keyed.sort(key=lambda k: k[:3])
        return [k[3] for k in self.keyed]


def render(profile: ProfileData) -> bytes:
    meta = profile.metadata
    half_interval = int(profile.interval_ms * 1_000_000) // 2

    threads = profile.thread_table
    per_thread: dict[int, list[tuple[int, int, int]]] = {}
    per_task_track: dict[int, list[tuple[int, int, int]]] = {}
    # A folded wait (one row, many samples) is one span: the slices its samples made together.
    for ts, weight, stack, serial, _, _ in profile.iter_counted():
        into = per_task_track if threads[serial].task_track else per_thread
        into.setdefault(serial, []).append((ts, weight, stack))

    events: list[dict[str, Any]] = []
    named: set[int] = set()  # processes: the session's, and its children (--subprocesses)
    tracks: dict[int, _Track] = {}
    process_of = profile.process_names()
    for serial in sorted(per_thread, key=lambda s: (threads[s].registered_ns, s)):
        t = threads[serial]
        tid = t.native_id
        pid, process = process_of(t)
        pid = pid or 1
        if pid not in named:
            named.add(pid)
            events.append(
                {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process}}
            )
        if tid not in tracks:  # a thread whose Python state was recreated keeps one track
            tracks[tid] = _Track(profile, pid, tid)
            for name, args in (
                ("thread_name", {"name": t.label}),
                ("thread_sort_index", {"sort_index": len(tracks) - 1}),
            ):
                events.append({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args})
        tracks[tid].add(per_thread[serial], half_interval)
    for track in tracks.values():
        events.extend(track.events())
    left_out = 0
    for serial in sorted(per_task_track):
        t = threads[serial]
        pid = process_of(t)[0] or 1
        left_out += _task_lanes(profile, t, pid, per_task_track[serial], half_interval, events)

    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "spprof_version": str(meta.get("spprof_version", "")),
            "python": str(meta.get("python", "")),
            "mode": profile.mode,
            "interval_ms": profile.interval_ms,
            "dropped_samples": profile.dropped_count,
            "task_runs_left_out": left_out,
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def _task_lanes(
    profile: ProfileData,
    track: ThreadRecord,
    pid: int,
    rows: list[tuple[int, int, int]],
    half_interval: int,
    events: list[dict[str, Any]],
) -> int:
    """A task track's rows as lanes of X events and a counter of waiters (the module's
    docstring); returns the runs left out beyond MAX_LANES."""
    by_chain: dict[int, list[tuple[int, int]]] = {}
    for ts, weight, stack in rows:
        by_chain.setdefault(stack, []).append((ts, weight))
    # A run: consecutive rows of one chain, [(stamp, span, waiters)]. A row stands for the
    # time since the chain's row before when its weight covers that time (at least one waiter
    # all along: the census weighs each by the time since the last census); else it begins a
    # run, standing for at most its weight (one waiter) and a second (a row's bucket).
    runs: list[tuple[int, int, list[tuple[int, int, float]]]] = []  # (begin, stack, rows)
    for stack, chain_rows in by_chain.items():
        chain_rows.sort()
        run: list[tuple[int, int, float]] = []
        last = 0
        for ts, weight in chain_rows:
            if run and weight >= ts - last - half_interval:
                begin = last
            else:
                if run:
                    runs.append((run[0][0] - run[0][1], stack, run))
                run = []
                begin = max(ts - min(weight, ROW_SPAN_NS), profile.start_ns)
            span = max(ts - begin, 1)
            run.append((ts, span, weight / span))
            last = ts
        if run:
            runs.append((run[0][0] - run[0][1], stack, run))
    runs.sort(key=lambda r: (r[0], r[1]))
    lane_ends: list[int] = []
    lanes: list[list[tuple[int, int, int]]] = []
    left_out = 0
    changes: dict[int, float] = {}  # time -> the change in waiters there, for the counter
    for begin, stack, run in runs:
        lane = next((i for i, end in enumerate(lane_ends) if end <= begin), len(lanes))
        if lane == MAX_LANES:
            left_out += 1
            continue
        if lane == len(lanes):
            lanes.append([])
            lane_ends.append(0)
        lanes[lane].extend((ts, span, stack) for ts, span, _ in run)
        lane_ends[lane] = run[-1][0]
        for ts, span, waiters in run:
            changes[ts - span] = changes.get(ts - span, 0.0) + waiters
            changes[ts] = changes.get(ts, 0.0) - waiters
    base = LANE_TID_BASE + track.serial * MAX_LANES
    for i, lane_rows in enumerate(lanes):
        tid = base + i
        for name, args in (
            ("thread_name", {"name": f"{track.label} #{i + 1}"}),
            ("thread_sort_index", {"sort_index": tid}),
        ):
            events.append({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args})
        lane_track = _Track(profile, pid, tid)
        lane_track.add(lane_rows, half_interval)
        events.extend(lane_track.events())
    waiting = 0.0
    counter = f"{track.label} waiting"
    shown = None
    for at, delta in sorted(changes.items()):
        waiting += delta
        value = round(max(waiting, 0.0), 2)
        if value == shown:  # one row ends where the next begins, as many waiting
            continue
        shown = value
        events.append(
            {
                "ph": "C",
                "name": counter,
                "pid": pid,
                "tid": base,
                "ts": round((at - profile.start_ns) / 1000, 3),  # as _Track.us
                "args": {"waiting": value},
            }
        )
    return left_out
