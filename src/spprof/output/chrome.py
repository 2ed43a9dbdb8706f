"""Chrome's trace event format (JSON): opens in Perfetto (ui.perfetto.dev) and chrome://tracing.

Each thread gets a track of "X" (complete) events rebuilt from its consecutive samples, so
the timeline shows what each thread did when:

- a sample taken at `t` with weight `w` stands for the interval (t - w, t]: the time the
  sample's timer counted before it fired;
- when the next sample of the thread starts within half an interval of where the last one
  ended, the two are contiguous and every frame they share (same function at the same depth,
  counted from the root) stays open; frames that differ close and open;
- a longer gap (the thread was off CPU in cpu mode, or not sampled) closes every frame.

Thread and process names come as "M" metadata events; times are microseconds from the start
of the session. Events are sorted per thread by start time, a parent before its children.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._model import ProfileData


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
    # Waiting asyncio tasks (task tracks) are sums per second of many tasks, not a timeline:
    # the flame-graph formats show them.
    per_thread: dict[int, list[tuple[int, int, int]]] = {}
    for ts, weight, stack, serial, _ in profile.iter_rows():
        if not threads[serial].task_track:
            per_thread.setdefault(serial, []).append((ts, weight, stack))

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

    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "spprof_version": str(meta.get("spprof_version", "")),
            "python": str(meta.get("python", "")),
            "mode": profile.mode,
            "interval_ms": profile.interval_ms,
            "dropped_samples": profile.dropped_count,
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")
