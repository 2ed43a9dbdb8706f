"""A --subprocesses root merges its finished children's files while it runs, so the family
directory stays small (spprof/_family_files.py; issue 25, "thousands of short children finish
with bounded temporary files"). Old code: every child's PID.spprof and PID.running stayed
until the root stopped (800 entries for 400 recycled workers).

The Compactor is driven here by hand on a directory of made-up children (their pids above
the kernel's pid_max, so never alive); tests/test_subprocesses.py runs it under the CLI.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import spprof
from spprof import _family_files
from spprof._family_files import BATCH, FANOUT, Compactor
from spprof._model import Frame, ProfileData, ThreadRecord
from spprof._rows import ROW
from spprof.output import write

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


def _dead_pid(k: int) -> int:
    """A pid no process can have: above the kernel's largest."""
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return int(f.read()) + 1 + k
    except OSError:
        return 100_000 + k  # macOS: pids stay below 99,999


def _child(pid: int, start_ns: int, function: str, samples: int) -> ProfileData:
    return ProfileData(
        interval_ms=10,
        mode="cpu",
        duration_ns=1_000_000,
        start_ns=start_ns,
        frame_table=[Frame(function, "work.py", 3, False, function, 1)],
        stacks=[(0,)],
        rows=b"".join(ROW.pack(start_ns + i, 10_000_000, 0, 0) for i in range(samples)),
        thread_table=[ThreadRecord(0, 1, pid, "MainThread", 10, 0, 0)],
        dropped_count=1,
        metadata={"pid": pid, "cwd": "/srv"},
    )


def _finish(base: Path, pid: int, start_ns: int, function: str = "task", samples: int = 2) -> None:
    """What a child leaves: its mark and its written profile."""
    os.mkdir(base / f"{pid}.running")
    write(_child(pid, start_ns, function, samples), base / f"{pid}.spprof", "spprof")


def _compactor(base: Path) -> Compactor:
    return Compactor(str(base), os.getpid(), lambda fn: fn())


def _names(base: Path) -> list[str]:
    return sorted(p.name for p in base.iterdir())


def test_each_full_batch_of_finished_children_becomes_one_file_holding_every_process(tmp_path):
    pids = [_dead_pid(k) for k in range(2 * BATCH + 5)]
    for i, pid in enumerate(pids):
        _finish(tmp_path, pid, 1_000 * (i + 1), "task" if i % 2 else "other")
    c = _compactor(tmp_path)
    assert c() == _family_files.BUSY_CHECK_S  # it merged: look again soon
    names = _names(tmp_path)
    batches = [n for n in names if n.startswith("batch-")]
    assert batches == ["batch-0-1.spprof", "batch-0-2.spprof"]
    # Five are left, each with both of its entries.
    left = [p for p in pids if (tmp_path / f"{p}.running").is_dir()]
    assert len(left) == 5 and all((tmp_path / f"{p}.spprof").is_file() for p in left)
    assert len(names) == 2 + 2 * 5
    assert c.merged == 2 * BATCH and c.lost == []

    merged = [spprof.load(tmp_path / b) for b in batches]
    for batch in merged:
        entries = batch.metadata["processes"]
        assert len(entries) == BATCH
        assert [e["start_ns"] for e in entries] == sorted(e["start_ns"] for e in entries)
        assert {t.pid for t in batch.threads} == {e["pid"] for e in entries}
        assert batch.sample_count == 2 * BATCH
        assert batch.dropped_count == BATCH  # each child's dropped sample is kept
    in_batches = {e["pid"] for b in merged for e in b.metadata["processes"]}
    assert len(in_batches) == 2 * BATCH
    assert in_batches.isdisjoint(left) and in_batches | set(left) == set(pids)

    assert c() == _family_files.CHECK_S  # five finished: nothing to merge
    assert len(_names(tmp_path)) == 2 + 2 * 5


def test_fanout_batches_of_a_level_become_one_of_the_next(tmp_path):
    c = _compactor(tmp_path)
    pid = iter(_dead_pid(k) for k in range(FANOUT * BATCH))
    for round_ in range(FANOUT):
        for i in range(BATCH):
            _finish(tmp_path, next(pid), 1 + round_ * BATCH + i, samples=1)
        c()
    assert _names(tmp_path) == [f"batch-1-{FANOUT + 1}.spprof"]
    (one,) = [spprof.load(p) for p in tmp_path.iterdir()]
    assert len(one.metadata["processes"]) == FANOUT * BATCH
    assert one.sample_count == FANOUT * BATCH
    assert c.batches_written == FANOUT + 1


def test_a_child_gone_without_writing_is_kept_as_lost_and_a_living_one_is_not_touched(tmp_path):
    gone = _dead_pid(0)
    os.mkdir(tmp_path / f"{gone}.running")  # marked itself, never wrote: SIGKILL
    living = os.getppid()  # alive: its file may be half written, so it waits
    _finish(tmp_path, living, 5)
    (tmp_path / f"{living}.spprof").write_bytes(b"half")
    c = _compactor(tmp_path)
    c()
    assert c.lost == [gone]
    assert _names(tmp_path) == sorted([f"{living}.running", f"{living}.spprof"])


def test_a_forked_copy_of_the_handler_does_nothing_and_asks_for_no_more_calls(tmp_path):
    for k in range(BATCH):
        _finish(tmp_path, _dead_pid(k), k + 1)
    c = Compactor(str(tmp_path), os.getpid() + 1, lambda fn: fn())  # another process's
    assert c() is None
    assert len(_names(tmp_path)) == 2 * BATCH


def test_a_failing_look_is_logged_and_the_next_one_still_comes(tmp_path):
    def refuse(fn):
        raise OSError("no thread")

    c = Compactor(str(tmp_path), os.getpid(), refuse)
    assert c() == _family_files.CHECK_S
