"""What the censuses of waiting work share: asyncio's tasks (_async_census.py) and greenlets
(_greenlet_census.py), each read every PERIOD while the program runs (python_tick.h).

A census finds what waits (a task suspended on an await, a greenlet switched out) and gives
each the time since its thread's last census, on its chain: a synthetic head (`<task> COROUTINE`,
`<greenlet> FUNCTION`), then (code, line) of each frame, outermost first. The rows are kept
here, summed per second, thread and chain (a thousand handlers waiting on one line for an hour
are 3,600 rows), and added to a profile or a window as it is tidied, on a track of their own
per thread (`THREAD asyncio tasks`, `THREAD greenlets`): the thread keeps its own samples, whose
times add up to its wall time. Their weights are wall time off CPU, flagged idle.

Pacing: a census holds the GIL while it reads, so the next comes late enough for it to take at
most MAX_SHARE of the time. Weights are elapsed times, so a longer period loses no time, only
resolution.

Memory: the rows count in the session's memory limit (`memory_limit_mb`, the native side's
memory_bytes). Around each round _censuses.py tells the session what the censuses hold
(memory_bytes(), an estimate measured with tracemalloc) and gives each census a share of the
room left (allowed_bytes); a census at its share (or at MAX_ROWS) makes no new row: a chain
that has one on the thread adds to its latest (`census_rows_folded`, its time kept, its
second less exact), one that has none is dropped (`census_rows_dropped`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from ._model import Frame, ProfileData, ThreadRecord
from ._rows import FLAG_IDLE, ROW, SERIAL_BITS

PERIOD_S = 0.05
MAX_ROWS = 100_000  # distinct (second, thread, chain) keys; beyond, folded or dropped
MAX_SHARE = 0.05  # of the time a census may take: the next comes later if it took more
# What a row and a chain hold in Python (3.12, tracemalloc: a row ~320 bytes with its key and
# dict slot; a chain's tuple and its elements' tuples).
ROW_BYTES = 320
LATEST_BYTES = 100  # a (thread, chain) -> latest row entry
CHAIN_BYTES = 64
ELEMENT_BYTES = 64

# A chain element: a frame's (id(code), line), the code kept in WaitRows.codes; or a
# synthetic frame's name.
Element = Union[tuple[int, int], str]
Chain = tuple[Element, ...]


@dataclass
class _Row:
    weight_ns: int = 0
    count: int = 0
    since_ns: int = 0  # the time its first census's weight began
    last_ns: int = 0


@dataclass
class WaitCensus:
    """One session's census of one kind; called by the main thread or the drain thread
    (python_tick.h), read when a profile or a window is tidied. A kind defines _census()."""

    clock: Callable[[], int]
    start_ns: int
    period_ns: int = int(PERIOD_S * 1e9)
    # Its stats' names begin with it: async_censuses, greenlet_waiting_seen, ...
    PREFIX = ""
    TRACK_SUFFIX = ""
    rows: dict[tuple[int, int, int], _Row] = field(default_factory=dict)  # (second, ident, chain)
    chains: dict[Chain, int] = field(default_factory=dict)
    chain_list: list[Chain] = field(default_factory=list)
    # By id(code): a code object's hash reads its bytecode and constants every time. The
    # objects are kept, so an id is never reused while it is a key here.
    codes: dict[int, Any] = field(default_factory=dict)
    last_ns: dict[int, int] = field(default_factory=dict)  # per thread: its last census
    stats: dict[str, int] = field(default_factory=dict)
    allowed_bytes: int = 1 << 62  # its share of the memory limit (_censuses._Turns)
    latest: dict[tuple[int, int], _Row] = field(default_factory=dict)  # (ident, chain) -> row
    chain_bytes: int = 0

    def __post_init__(self) -> None:
        p = self.PREFIX
        for name in (
            "censuses",
            "waiting_seen",
            "census_errors",
            "census_rows_dropped",
            "census_rows_folded",
        ):
            self.stats.setdefault(f"{p}_{name}", 0)
        self.stats.setdefault(f"{p}_census_ns", 0)  # the censuses' own time (the GIL held)
        self.stats.setdefault(f"{p}_census_weight_ns", 0)  # the weight the rows hold
        self.stats.setdefault(f"{p}_census_dropped_ns", 0)  # the weight of dropped chains
        self.stats.setdefault(f"{p}_census_period_max_ms", 0)  # the longest period chosen

    def _census(self) -> Optional[float]:
        """One census; or, returning seconds, none now: try again that much later."""
        raise NotImplementedError

    def __call__(self) -> float:
        """One census; returns the seconds until the next (python_tick.h). Never raises: the
        program is not ours to disturb."""
        p = self.PREFIX
        # This thread's CPU, not the clock: the interpreter may hand the GIL to the program in
        # the middle (its switch interval), and that time is not the census's.
        t0 = time.thread_time()
        try:
            again = self._census()
            if again is not None:
                return again
            self.stats[f"{p}_censuses"] += 1
        except Exception as exc:  # an unforeseen object shape ends nothing
            self.stats[f"{p}_census_errors"] += 1
            if self.stats[f"{p}_census_errors"] == 1:
                from . import _debug

                _debug.debug(f"{p} census: {exc!r}")
        cost = time.thread_time() - t0
        self.stats[f"{p}_census_ns"] += int(cost * 1e9)
        period = max(self.period_ns / 1e9, cost / MAX_SHARE)
        key = f"{p}_census_period_max_ms"
        self.stats[key] = max(self.stats[key], round(period * 1000))
        return period

    def weight(self, ident: int, now: int) -> int:
        """The time the thread's waiting work waited since its last census (a thread blocked,
        the GIL out of reach, is weighted by all of it: no time is lost). A thread's first
        census: one period, never more than the census has run (a row must not begin before
        the profile does: a window would cut it)."""
        last = self.last_ns.get(ident)
        self.last_ns[ident] = now
        return now - last if last else max(0, min(self.period_ns, now - self.start_ns))

    def forget_threads_but(self, seen: set[int]) -> None:
        for ident in [i for i in self.last_ns if i not in seen]:
            del self.last_ns[ident]

    def memory_bytes(self) -> int:
        """What the rows and chains hold, about (ROW_BYTES, CHAIN_BYTES)."""
        return len(self.rows) * ROW_BYTES + len(self.latest) * LATEST_BYTES + self.chain_bytes

    def add(self, ident: int, chain: Chain, n: int, weight: int, now: int) -> None:
        """n waiting things waited on `chain` for `weight` ns in all."""
        second = (now - self.start_ns) // 1_000_000_000
        cid = self.chains.get(chain)
        row = self.rows.get((second, ident, cid)) if cid is not None else None
        if row is None:
            new_chain = 0 if cid is not None else CHAIN_BYTES + ELEMENT_BYTES * len(chain)
            grows = ROW_BYTES + LATEST_BYTES + new_chain
            if len(self.rows) >= MAX_ROWS or self.memory_bytes() + grows > self.allowed_bytes:
                row = self.latest.get((ident, cid)) if cid is not None else None
                if row is None:
                    self.stats[f"{self.PREFIX}_census_rows_dropped"] += n
                    self.stats[f"{self.PREFIX}_census_dropped_ns"] += weight
                    return
                self.stats[f"{self.PREFIX}_census_rows_folded"] += n
            else:
                if cid is None:
                    cid = self.chains[chain] = len(self.chain_list)
                    self.chain_list.append(chain)
                    self.chain_bytes += new_chain
                row = self.rows[(second, ident, cid)] = _Row(since_ns=now - weight // n)
                self.latest[(ident, cid)] = row
        row.weight_ns += weight
        self.stats[f"{self.PREFIX}_census_weight_ns"] += weight  # what the rows hold in all
        row.count += n
        row.last_ns = now
        self.stats[f"{self.PREFIX}_waiting_seen"] += n

    def add_to(self, profile: ProfileData, start_ns: int, end_ns: int) -> dict[str, int]:
        """Add the rows stamped within [start_ns, end_ns] to the profile, each on its thread's
        track; return the census's stats (with the rows left out because their thread was not
        one of the profile's)."""
        table = profile.frame_table
        frame_ids = {f: i for i, f in enumerate(table)}
        records = profile.thread_table
        tracks: dict[int, int] = {}  # thread ident -> its track's serial
        stack_ids: dict[int, int] = {}  # chain id -> stack id
        out = bytearray()
        added = unplaced = 0
        for (_, ident, cid), row in self.rows.items():
            # A row stands for [since_ns, last_ns]; a window that holds part of it gets that
            # part of its weight (a 5 s `record --pid` window, rows of up to a second).
            weight, count, stamp = row.weight_ns, row.count, row.last_ns
            if row.since_ns < start_ns or row.last_ns > end_ns:
                span = row.last_ns - row.since_ns
                inside = min(row.last_ns, end_ns) - max(row.since_ns, start_ns)
                if span <= 0 or inside <= 0:
                    continue
                weight = weight * inside // span
                count = max(1, round(count * inside / span))
                stamp = min(row.last_ns, end_ns)
            serial = tracks.get(ident)
            if serial is None:
                serial = _track(records, ident, self.TRACK_SUFFIX)
                if serial is None:
                    unplaced += row.count
                    continue
                tracks[ident] = serial
            sid = stack_ids.get(cid)
            if sid is None:
                ids = []
                for element in self.chain_list[cid]:
                    f = _frame(element, self.codes)
                    fid = frame_ids.get(f)
                    if fid is None:
                        fid = frame_ids[f] = len(table)
                        table.append(f)
                    ids.append(fid)
                sid = stack_ids[cid] = len(profile.stacks)
                profile.stacks.append(tuple(ids))
            out += ROW.pack(stamp, weight, sid, serial | FLAG_IDLE << SERIAL_BITS)
            added += count
        if out:
            profile.rows = bytes(profile.rows) + bytes(out)
            profile._samples = None
        p = self.PREFIX
        return {**self.stats, f"{p}_waiting_samples": added, f"{p}_waiting_unplaced": unplaced}


def _frame(element: Element, codes: dict[int, Any]) -> Frame:
    if isinstance(element, str):
        return Frame(function_name=element, filename="", lineno=0, qualname=element)
    code_id, line = element
    code = codes[code_id]
    return Frame(
        function_name=code.co_name,
        filename=code.co_filename,
        lineno=line,
        qualname=getattr(code, "co_qualname", code.co_name),
        first_lineno=code.co_firstlineno,
    )


def _track(records: list[ThreadRecord], ident: int, suffix: str) -> Optional[int]:
    """The serial of the thread's track, added to the table on first use; None when the
    profile has no thread of that ident."""
    for r in records:
        if r.task_track and r.ident == ident and r.name.endswith(suffix):
            return r.serial  # a window tidied twice, or the track of a merged profile
    thread = next(
        (
            r
            for r in reversed(records)
            if r.ident == ident and not r.native_only and not r.task_track
        ),
        None,
    )
    if thread is None:
        return None
    serial = len(records)
    records.append(
        ThreadRecord(
            serial=serial,
            ident=thread.ident,
            native_id=thread.native_id,
            name=thread.name + suffix,
            cpu_ns=0,
            registered_ns=thread.registered_ns,
            ended_ns=thread.ended_ns,
            pid=thread.pid,
            task_track=True,
        )
    )
    return serial
