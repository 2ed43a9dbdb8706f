"""A --subprocesses root keeps its family directory small while the program runs.

Every child writes `PID.spprof` beside its `PID.running` mark (_subprocesses.py). A service
that recycles workers for days would leave two entries per child until the root stops, so
the root merges finished children as they come: every CHECK_S (BUSY_CHECK_S after a look
that merged), each BATCH children that have written and ended become one
`batch-0-N.spprof` (_process_merge.merge: every process keeps its threads and its entry),
and their files and marks go; FANOUT batches of one level become one of the next. The
directory holds the children that finished since the last look plus fewer than BATCH more,
fewer than FANOUT batches per level (a level per factor of FANOUT: seven levels for 100
million children), and the children still running. The merge work is the stop's merge
spread over the run, each child's data read once per level.

A child is merged only once its process has ended: by then it has written all it will. One
that ended without writing (SIGKILL, a crash) has its mark removed and its pid kept here,
as the stop would have found it.

The drain thread makes the call (_ext._drain_timer), with the GIL, on a short thread of
spprof's whose descriptors are its own (_ext._call_apart): listing the directory and reading
the files take none of the program's descriptor numbers.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import _debug
from ._model import ProfileData

BATCH = 64  # finished children merged at once
FANOUT = 8  # batches of one level merged into one of the next
CHECK_S = 1.0  # how often the directory is looked at
BUSY_CHECK_S = 0.25  # the next look, after one that merged: children come fast

RUNNING = ".running"
WRITTEN = ".spprof"
_BATCH_NAME = re.compile(r"^batch-(\d+)-(\d+)\.spprof$")


def batch_files(base: Path) -> list[Path]:
    """The batches in `base`, oldest first within a level."""
    found = []
    for p in base.iterdir():
        m = _BATCH_NAME.match(p.name)
        if m:
            found.append((int(m.group(1)), int(m.group(2)), p))
    return [p for _, _, p in sorted(found)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists
        return True
    return True


@dataclass
class Compactor:
    """The root's timer handler: returns the seconds until it wants its next call."""

    directory: str
    root_pid: int
    run_apart: Callable[[Callable[[], None]], None]
    lost: list[int] = field(default_factory=list)  # ended without writing, marks removed
    merged: int = 0  # children merged into batches
    batches_written: int = 0
    spent_ns: int = 0
    _seq: int = 0

    def __call__(self) -> Optional[float]:
        if os.getpid() != self.root_pid:
            return None  # a forked child's copy: the family's directory is the root's
        t0, before = time.perf_counter_ns(), self.merged
        try:
            self.run_apart(self.step)
        except Exception as exc:  # the program must never see ours
            _debug.debug(f"--subprocesses: merging finished children failed: {exc!r}")
        self.spent_ns += time.perf_counter_ns() - t0
        return BUSY_CHECK_S if self.merged > before else CHECK_S

    def step(self) -> None:
        """One look at the directory: merge a batch of finished children, then the levels."""
        base = Path(self.directory)
        finished = self._finished(base)
        while len(finished) >= BATCH:
            self._merge_children(base, finished[:BATCH])
            finished = finished[BATCH:]
        level = 0
        while True:
            same = [p for p in batch_files(base) if p.name.startswith(f"batch-{level}-")]
            if len(same) < FANOUT:
                break
            self._merge_batches(base, same[:FANOUT], level + 1)
            level += 1

    def _finished(self, base: Path) -> list[str]:
        """Children that wrote and whose process is gone (stems, oldest mark first); the
        marks of those gone without writing are removed and their pids kept."""
        with os.scandir(base) as it:
            marks = [(e.stat().st_mtime_ns, e.name) for e in it if e.name.endswith(RUNNING)]
        stems = []
        for _, name in sorted(marks):
            stem = name[: -len(RUNNING)]
            pid = int(stem.split(".")[0])
            if pid == self.root_pid or alive(pid):
                continue
            if (base / f"{stem}{WRITTEN}").is_file():
                stems.append(stem)
            else:  # gone, and a gone process writes no more
                self.lost.append(pid)
                os.rmdir(base / name)
        return stems

    def _merge_children(self, base: Path, stems: list[str]) -> None:
        from ._load import ProfileFormatError, load  # not at spprof's import: every program pays it

        parts: list[ProfileData] = []
        for stem in stems:
            try:
                parts.append(load(base / f"{stem}{WRITTEN}"))
            except (ProfileFormatError, OSError) as exc:
                _debug.debug(f"--subprocesses: {exc}")
                self.lost.append(int(stem.split(".")[0]))
        if parts:
            self._write(base, parts, 0)
        for stem in stems:  # after the batch is in place: a failure above loses nothing
            (base / f"{stem}{WRITTEN}").unlink(missing_ok=True)
            os.rmdir(base / f"{stem}{RUNNING}")
        self.merged += len(parts)

    def _merge_batches(self, base: Path, paths: list[Path], level: int) -> None:
        from ._load import load

        self._write(base, [load(p) for p in paths], level)
        for p in paths:
            p.unlink()

    def _write(self, base: Path, parts: list[ProfileData], level: int) -> None:
        from ._process_merge import merge
        from .output import write

        parts.sort(key=lambda p: p.start_ns)
        self._seq += 1
        write(merge(parts[0], parts[1:]), base / f"batch-{level}-{self._seq}.spprof", "spprof")
        self.batches_written += 1
