"""Child processes over a session: their CPU time and how many were forked.

A session samples the process it runs in; its children are profiled only with
--subprocesses (_subprocesses.py). A program whose work happens in child processes
(multiprocessing pools, a pre-fork server's workers, subprocess.run) would otherwise get a
profile that silently leaves that work out; the summary names it instead, and with
--subprocesses says how much of it the merged children hold (output/report.py).

The CPU time is getrusage(RUSAGE_CHILDREN): children (and the descendants they waited for)
that ended and were waited for during the session. A child still running at stop() is not in
it yet. The count is of os.fork() calls in this process (multiprocessing's fork start method,
pre-fork servers); subprocess and the spawn start method make children without os.fork(), so
only their CPU time shows.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

_forks = 0


def _count_fork() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_parent=_count_fork)


@dataclass(frozen=True)
class ChildrenMark:
    cpu_ns: int
    forks: int


def _children_cpu_ns() -> int:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((ru.ru_utime + ru.ru_stime) * 1e9)


def mark() -> ChildrenMark:
    """Where the session starts."""
    return ChildrenMark(_children_cpu_ns(), _forks)


def since(start: ChildrenMark) -> dict[str, int]:
    """The stats keys for the session that began at `start`."""
    return {
        "children_cpu_ns": max(0, _children_cpu_ns() - start.cpu_ns),
        "children_forked": _forks - start.forks,
    }
