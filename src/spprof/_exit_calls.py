"""The profile is written before os._exit and os.exec* end or replace the process.

Neither runs atexit or any Python finaliser, so only code that runs before them can write.
While a session with an output runs (the CLI, or start(output_path=...)), the extension puts
stand-ins in place of os._exit, os.execv and os.execve (_ext/exit_calls.h: builtins that read
as the originals; every other os.exec* calls one of these two). A stand-in calls `_hook`
first:

- os._exit(n) with a valid status: the owner's `write` runs (stop, write, summary), then the
  process ends with status n as before.
- os.exec*(path, ...) that can run (path an executable file, or a descriptor): `write` runs,
  then the exec. Paths that cannot run (execvp's tries along PATH: ENOENT, EACCES) are let
  fail without touching the session. If the exec fails anyway (ENOEXEC, E2BIG, ...), the
  owner's `resume` starts a new session and the next profile written holds both parts
  (`join`): the program goes on, profiled.

Nothing happens in a forked child (the pid differs): the parent's profile is not the child's.
With no session the originals are back in place and cost nothing.
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

from . import _debug, _ext
from ._model import ProfileData
from ._rows import ROW, SERIAL_MASK


@dataclass(frozen=True)
class Owner:
    """Who writes the profile: the CLI's recording, or the API's stop()."""

    write: Callable[[], object]  # stop the session and write its output
    resume: Callable[[], object]  # after a failed exec: profile on, keep what was written
    pid: int


_owner: Optional[Owner] = None
# The owner whose `write` ran for the exec in progress: `write` stops the session, which
# disables the cover, and a failed exec must still reach `resume`.
_acting: Optional[Owner] = None


# os's sets of functions that take a descriptor, a dir_fd, follow_symlinks=False or
# effective_ids: `os.execve in os.supports_fd` asks whether it can fexecve.
_SUPPORTS = ("supports_fd", "supports_dir_fd", "supports_follow_symlinks", "supports_effective_ids")
_COVERED = ("_exit", "execv", "execve")
_joined: list[tuple[set[Any], Any]] = []  # (set, stand-in) pairs enable() added


def enable(write: Callable[[], object], resume: Callable[[], object]) -> None:
    """GIL held, session running: cover os._exit and os.exec* until disable()."""
    global _owner
    _owner = Owner(write, resume, os.getpid())
    originals = {name: getattr(os, name, None) for name in _COVERED}
    try:
        _ext._hook_exit_calls(_hook)
    except RuntimeError as exc:  # the program replaced them: its own wrappers win
        _debug.debug(f"os._exit / os.exec* not covered: {exc}")
        return
    # Each stand-in joins the sets its original is in (the original stays: a program may
    # hold it), so membership reads as without spprof.
    for name, original in originals.items():
        stand_in = getattr(os, name, None)
        if original is None or stand_in is original:
            continue
        for attr in _SUPPORTS:
            group = getattr(os, attr, None)
            if isinstance(group, set) and original in group and stand_in not in group:
                group.add(stand_in)
                _joined.append((group, stand_in))


def disable() -> None:
    global _owner
    _owner = None
    _ext._unhook_exit_calls()
    while _joined:
        group, stand_in = _joined.pop()
        group.discard(stand_in)


def _will_run(name: str, args: tuple[Any, ...], kwargs: Optional[dict[str, Any]]) -> bool:
    """Whether the call will end or replace the process, as far as can be told before it."""
    kw = kwargs or {}
    if name == "_exit":
        if len(args) + len(kw) != 1:
            return False
        try:
            operator.index(args[0] if args else kw["status"])
        except (TypeError, KeyError):
            return False  # the original raises TypeError: nothing ends
        return True
    path: Any = args[0] if args else kw.get("path")
    argv = args[1] if len(args) > 1 else kw.get("argv")
    try:
        if not argv or not argv[0]:
            return False  # ValueError from the original
    except (TypeError, IndexError, KeyError):
        return False
    if isinstance(path, int):
        return True  # fexecve: nothing to look at
    try:
        target = os.fsencode(path)
        return os.access(target, os.X_OK) and not os.path.isdir(target)
    except (TypeError, ValueError, OSError):
        return False


def _hook(event: str, name: str, args: tuple[Any, ...], kwargs: Optional[dict[str, Any]]) -> bool:
    global _acting
    if event == "failed":
        owner, _acting = _acting, None
        if owner is not None and owner.pid == os.getpid():
            _debug.debug(f"os.{name} failed: profiling on")
            owner.resume()
        return False
    owner = _owner
    if owner is None or owner.pid != os.getpid() or not _will_run(name, args, kwargs):
        return False
    _debug.debug(f"os.{name}: writing the profile first")
    _acting = owner
    owner.write()
    return True


P = TypeVar("P", bound=ProfileData)


def join(first: ProfileData, second: P) -> P:
    """`second` with `first`'s samples before its own: one profile of a session that a failed
    exec cut in two. Frame, stack and thread ids of `second` move past `first`'s."""
    nframes, nstacks, nthreads = len(first.frame_table), len(first.stacks), len(first.thread_table)
    rows = bytearray(first.rows)
    for ts, weight, stack, tf in ROW.iter_unpack(second.rows):
        serial = (tf & SERIAL_MASK) + nthreads
        rows += ROW.pack(ts, weight, stack + nstacks, serial | (tf & ~SERIAL_MASK))
    folds = {**first.folds, **{i + first.row_count: n for i, n in second.folds.items()}}
    stats = dict(second.stats)
    for key, value in first.stats.items():  # counters add up; everything else is the last part's
        if type(value) is int and type(stats.get(key)) is int:
            stats[key] += value
    threads = list(first.thread_table)
    for t in second.thread_table:
        threads.append(type(t)(**{**t.as_dict(), "serial": t.serial + nthreads}))
    end = second.start_ns + second.duration_ns
    return type(second)(
        interval_ms=second.interval_ms,
        mode=second.mode,
        duration_ns=max(0, end - first.start_ns),
        start_ns=first.start_ns,
        frame_table=[*first.frame_table, *second.frame_table],
        stacks=[*first.stacks, *(tuple(i + nframes for i in s) for s in second.stacks)],
        rows=bytes(rows),
        thread_table=threads,
        dropped_count=first.dropped_count + second.dropped_count,
        stats=stats,
        metadata=dict(second.metadata),
        folds=folds,
        stack_addresses={
            **first.stack_addresses,
            **{
                i + nstacks: (tuple(f + nframes for f in ids), at)
                for i, (ids, at) in second.stack_addresses.items()
            },
        },
        native_libraries={**first.native_libraries, **second.native_libraries},
    )
