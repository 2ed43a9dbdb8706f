"""Several processes' profiles as one: the session's own and its children's (--subprocesses).

Frames and stacks are interned across processes (forked workers run the same code, so their
tables are mostly the parent's), rows are renumbered, and every thread record carries its
process id: every format shows a thread by its label, `NAME (pid N)` (ThreadRecord.label).
--native addresses are kept as addresses in their library's file: each process loaded its
libraries at a load bias of its own, the merge's are 0. metadata["processes"] lists the
processes, the session's own first: pid, parent, command line, samples and CPU time.

The session's own counters stay its own (the CPU balance is of its process); each child's
are in its entry of metadata["processes"], and the samples they dropped add to
dropped_count, so a limit hit in a child is reported with the rest.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ._model import Frame, ProfileData, ThreadRecord
from ._rows import ROW, SERIAL_MASK
from ._stats import CpuBalance

P = TypeVar("P", bound=ProfileData)


def process_entry(profile: ProfileData) -> dict[str, Any]:
    """What metadata["processes"] says of one process's profile."""
    meta = profile.metadata
    balance = CpuBalance.from_stats(profile.stats)
    argv = meta.get("argv") or []
    return {
        "pid": int(meta.get("pid") or 0),
        "ppid": int(meta.get("ppid") or 0),
        "argv": [str(a) for a in argv],
        "start_ns": profile.start_ns,
        "duration_ns": profile.duration_ns,
        "samples": profile.sample_count,
        "dropped": profile.dropped_count,
        "cpu_ns": balance.process_ns if balance is not None else None,
    }


def _entries(profile: ProfileData) -> list[dict[str, Any]]:
    merged = profile.metadata.get("processes")
    return list(merged) if merged else [process_entry(profile)]


def _absolute(f: Frame, cwd: str) -> Frame:
    """A script run as `python x.py` has code named `x.py`, the same script started by a
    multiprocessing spawn `/abs/x.py`: one name, so that one function is one row."""
    name = f.filename
    if not cwd or f.is_native or not name or name.startswith("<") or os.path.isabs(name):
        return f
    return replace(f, filename=os.path.normpath(os.path.join(cwd, name)))


def merge(own: P, children: Sequence[ProfileData]) -> P:
    """`own` with `children`'s samples added, each thread named with its process (also with
    no child: a --subprocesses profile names processes whatever ran)."""
    frames: list[Frame] = []
    frame_ids: dict[Frame, int] = {}
    stacks: list[tuple[int, ...]] = []
    # By frames and, with --native, their addresses: pprof keeps a location per address.
    stack_ids: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    addresses: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    libraries: dict[str, int] = {}
    threads: list[ThreadRecord] = []
    packed: list[tuple[int, int, int, int, int]] = []  # a row and the samples it holds
    parts: list[ProfileData] = [own, *children]
    start = min(p.start_ns for p in parts)
    end = max(p.start_ns + p.duration_ns for p in parts)
    for part in parts:
        fmap = []
        cwd = str(part.metadata.get("cwd") or "")
        for f in part.frame_table:
            f = _absolute(f, cwd)
            fid = frame_ids.get(f)
            if fid is None:
                fid = frame_ids[f] = len(frames)
                frames.append(f)
            fmap.append(fid)
        smap = []
        for old_sid, s in enumerate(part.stacks):
            key = tuple(fmap[i] for i in s)
            at = _file_addresses(part, old_sid)
            sid = stack_ids.get((key, at))
            if sid is None:
                sid = stack_ids[(key, at)] = len(stacks)
                stacks.append(key)
                if at:
                    addresses[sid] = (key, at)
            smap.append(sid)
        libraries.update(dict.fromkeys(part.native_libraries, 0))
        pid = int(part.metadata.get("pid") or 0)
        base = len(threads)
        for t in part.thread_table:  # a profile merged before keeps its threads' pids
            threads.append(replace(t, serial=base + t.serial, pid=t.pid or pid))
        get = part.folds.get
        for i, (ts, weight, stack, tf) in enumerate(ROW.iter_unpack(part.rows)):
            serial = (tf & SERIAL_MASK) + base
            packed.append((ts, weight, smap[stack], serial | (tf & ~SERIAL_MASK), get(i, 1)))
    packed.sort(key=lambda row: row[0])  # one timeline: writers read rows in time order
    rows = b"".join(ROW.pack(*row[:4]) for row in packed)
    folds = {i: row[4] for i, row in enumerate(packed) if row[4] > 1}
    metadata = dict(own.metadata)
    metadata["processes"] = [e for p in parts for e in _entries(p)]
    return type(own)(
        interval_ms=own.interval_ms,
        mode=own.mode,
        duration_ns=end - start,
        start_ns=start,
        frame_table=frames,
        stacks=stacks,
        rows=rows,
        thread_table=threads,
        dropped_count=own.dropped_count + sum(c.dropped_count for c in children),
        stats=dict(own.stats),
        metadata=metadata,
        folds=folds,
        stack_addresses=addresses,
        native_libraries=libraries,
    )


def _file_addresses(part: ProfileData, stack_id: int) -> tuple[int, ...]:
    """The stack's native addresses as addresses in their library's file (each process has
    its libraries at load biases of its own; the merge's are 0), () when it has none."""
    if stack_id not in part.stack_addresses:
        return ()
    biases = part.native_libraries
    table = part.frame_table
    at = part.frame_addresses(stack_id)
    out = []
    for fid, a in zip(part.stacks[stack_id], at):
        bias = biases.get(table[fid].filename) if a else None
        # An address below its library's bias cannot be in it: kept as none, never negative.
        out.append(a if bias is None else a - bias if a > bias else 0)
    return tuple(out) if any(out) else ()
