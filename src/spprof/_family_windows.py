"""The pprof endpoint's window over a whole --subprocesses family (issue 25: every worker
reachable from the one endpoint).

Under --subprocesses only the family's root serves --http (a child's settings drop it). A
request for the next N seconds there asks every member running now (marked in the family
directory, not yet written, alive) for a window of the same N seconds over its control
socket, as `spprof record --pid` does, takes the root's own beside them, and merges the
answers with the root's (_process_merge): each sample labelled with its process's pid.

The requests go out before the root's own window opens and the answers are read after it
closes, on the request's thread: no thread per member. A member that cannot answer (it ended
during the window, it has no control socket, SPPROF_CONTROL=0) is left out of that window and
named, with the reason, in metadata["window_missing"] (a comment in the pprof); its samples
are in the family's final profile all the same. Members forked after the request are not in
its window. Each client socket is moved above the descriptor numbers programs use.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, TypeVar

from . import _debug
from ._high_fd import move_high
from ._model import ProfileData

if TYPE_CHECKING:
    from .cli.remote import Connection

P = TypeVar("P", bound=ProfileData)

ANSWER_GRACE_S = 30.0  # a member's answer may come this long after the root's window ends
MAX_MEMBERS = 256  # members asked at once (a descriptor each); the rest are named as missing


@dataclass
class Member:
    pid: int
    conn: Optional[Connection] = None
    error: str = ""


def ask(pids: list[int], seconds: float) -> list[Member]:
    """Each member's window of the next `seconds` seconds, asked for now."""
    from .cli.errors import CliError
    from .cli.remote import Connection

    members: list[Member] = []
    for n, pid in enumerate(pids):
        m = Member(pid)
        members.append(m)
        if n >= MAX_MEMBERS:
            m.error = f"more than {MAX_MEMBERS} processes: not asked"
            continue
        try:
            conn = Connection(pid)
            conn.sock = move_high(conn.sock, "family window")
            conn.send({"cmd": "window", "seconds": seconds})
            m.conn = conn
        except (CliError, OSError) as exc:
            m.error = _reason(pid, exc)
    return members


def collect(members: list[Member], deadline: float) -> tuple[list[ProfileData], dict[int, str]]:
    """The members' windows, answered by `deadline` (monotonic), and those missing with why."""
    from ._load import ProfileFormatError, load
    from .cli.errors import CliError

    profiles: list[ProfileData] = []
    missing: dict[int, str] = {}
    for m in members:
        if m.conn is None:
            missing[m.pid] = m.error
            continue
        path = ""
        try:
            with m.conn:
                answer = m.conn.receive(max(0.1, deadline - time.monotonic()))
            path = str(answer["path"])
            profiles.append(load(path))
        except (CliError, ProfileFormatError, OSError, KeyError) as exc:
            missing[m.pid] = _reason(m.pid, exc)
        finally:
            if path:
                with contextlib.suppress(OSError):
                    os.unlink(path)
    for pid, why in missing.items():
        _debug.debug(f"http: process {pid} is not in this window: {why}")
    profiles.sort(key=lambda p: p.start_ns)
    return profiles, missing


def _reason(pid: int, exc: BaseException) -> str:
    """The error without the client's "process N: " (the comment names the process)."""
    text = str(exc)
    prefix = f"process {pid}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def abandon(members: list[Member]) -> None:
    """The root's window ended early (its session stopped): the members' windows are dropped
    (a member drops a window whose client left)."""
    for m in members:
        if m.conn is not None:
            m.conn.__exit__()
            m.conn = None


def merged(own: P, members: list[ProfileData], missing: dict[int, str]) -> P:
    """The root's window with its members'; those missing named in the metadata."""
    from ._process_merge import merge

    profile = merge(own, members)
    if missing:
        profile.metadata["window_missing"] = {str(pid): why for pid, why in missing.items()}
    return profile
