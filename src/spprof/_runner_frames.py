"""spprof's own frames in stacks: the runner's at the root, the decorator's in the middle.

Under `python -m spprof` (or the `spprof` console script) every stack of the main thread
starts with spprof's runner: the launcher, runpy, `spprof/__main__.py`, `spprof/cli/*`,
runpy again, then the program's `<module>`. Every profile (the CLI's session, a session the
program starts itself, a gunicorn `post_fork` hook in a worker forked from the CLI's process,
a window on the CLI's session) gets the same cut here, at stop (_session._tidy): the
leading run of runner frames is cut when it holds one of spprof's files (a run of runpy
alone is `python -m`'s, not ours, and stays). The CLI then drops the samples of the runner's
own time (drop_runner_time). Native frames above the run (`_start`, `Py_RunMain`) stay;
those inside it go with it. The `@spprof.profile` wrapper's frame, between a caller and the
decorated function, goes too.
"""

from __future__ import annotations

import os
import runpy
from collections.abc import Iterable
from typing import Callable

from ._model import Frame, ProfileData

_HERE = os.path.dirname(os.path.abspath(__file__))

# spprof's files that run a program: any of them in a leading run makes the run spprof's.
_SPPROF_RUNNER = frozenset(
    os.path.join(_HERE, n) for n in ("__main__.py", "cli/__init__.py", "cli/record.py")
)
# The same files as another installation of spprof names them (a profile written elsewhere,
# or by the exit-signal watcher without the GIL, loaded here).
_SPPROF_RUNNER_TAILS = tuple(
    os.sep + os.path.join("spprof", n) for n in ("__main__.py", "cli/__init__.py", "cli/record.py")
)
_RUNPY_TAIL = os.sep + "runpy.py"
# Files a runner run may also hold: runpy (as a file and frozen, 3.11+).
_RUNPY = frozenset({os.path.abspath(runpy.__file__), "<frozen runpy>"})
# Frames of spprof's in the middle of a program's stack: the @profile wrapper.
_PASS_THROUGH = frozenset({os.path.join(_HERE, "_session.py")})
# Console scripts (bin/spprof) the CLI was started from: add_launchers().
_launchers: set[str] = set()


def add_launchers(files: Iterable[str]) -> None:
    """The CLI names the launcher it was started from (read before the program runs)."""
    _launchers.update(files)


def _absolute(name: str) -> str:
    if name.startswith("<"):
        return name
    try:
        return os.path.abspath(name)
    except OSError:  # the working directory is gone
        return name


class _Kinds:
    """Frame id -> 0 program, 1 runner (runpy), 2 spprof's runner, 3 pass-through; cached per
    profile (stacks share frames)."""

    def __init__(self, table: list[Frame], runner_files: frozenset[str] = frozenset()) -> None:
        self.table = table
        self.extra = runner_files | frozenset(_launchers)
        self.runner_set = _SPPROF_RUNNER | _RUNPY | self.extra
        self.cache: dict[int, int] = {}

    def __call__(self, fid: int) -> int:
        k = self.cache.get(fid)
        if k is None:
            k = self.cache[fid] = self._kind(self.table[fid])
        return k

    def _kind(self, f: Frame) -> int:
        if f.is_native:
            return 0
        name = f.filename
        path = name if name in self.runner_set or name in _PASS_THROUGH else _absolute(name)
        if (
            path in _SPPROF_RUNNER
            or path in self.extra
            or path.endswith(_SPPROF_RUNNER_TAILS)  # another install's (a loaded file)
        ):
            return 2
        if path in self.runner_set or path.endswith(_RUNPY_TAIL):
            return 1
        if path in _PASS_THROUGH:
            return 3
        return 0


def is_runner_file(filename: str) -> bool:
    """A file of the runner's (spprof's CLI, runpy, the launcher): tracebacks drop them."""
    return _Kinds([Frame("", filename, 0)])(0) in (1, 2)


def hide_spprof_frames(profile: ProfileData, runner_files: frozenset[str] = frozenset()) -> int:
    """Cut spprof's runner run from the root of every stack and the @profile wrapper from its
    middle; return how many stacks changed. `runner_files`: more files that count as runner."""
    kind_of = _Kinds(profile.frame_table, runner_files)
    table = profile.frame_table
    changed = 0
    stacks = profile.stacks
    for sid, ids in enumerate(stacks):
        new = _cut(ids, kind_of, table)
        if new is not ids:
            stacks[sid] = new
            changed += 1
    if changed:
        profile._samples = None
    return changed


def drop_runner_time(profile: ProfileData) -> int:
    """Drop the samples taken in the runner's own time; return how many. Such a stack still
    starts at spprof's runner after hide_spprof_frames (the cut needs the program's `<module>`
    below the run): runpy setting up or cleaning up, or what it calls (pkgutil, importlib)."""
    kind_of = _Kinds(profile.frame_table)
    table = profile.frame_table
    own: set[int] = set()
    for sid, ids in enumerate(profile.stacks):
        python = [fid for fid in ids if not table[fid].is_native]
        n = next((i for i, fid in enumerate(python) if kind_of(fid) not in (1, 2)), len(python))
        if n == 0 or not any(kind_of(fid) == 2 for fid in python[:n]):
            continue  # not rooted at a run of spprof's
        if n == len(python) or table[python[n]].function_name != "<module>":
            own.add(sid)
    return profile._drop_stacks(own)


def _cut(
    ids: tuple[int, ...], kind_of: Callable[[int], int], table: list[Frame]
) -> tuple[int, ...]:
    python = [i for i, fid in enumerate(ids) if not table[fid].is_native]
    if not python:
        return ids
    out = ids
    p0 = python[0]
    rest = python
    if (
        len(python) > 1
        and kind_of(ids[p0]) == 0
        and table[ids[p0]].function_name == "<module>"
        and kind_of(ids[python[1]]) == 2
    ):
        rest = python[1:]  # a console script (bin/spprof) calling spprof's CLI: its launcher
    if kind_of(ids[rest[0]]) in (1, 2):
        p1 = next((i for i in rest if kind_of(ids[i]) not in (1, 2)), None)
        # Only a run that is spprof's and reaches the program's `<module>` is cut (a run that
        # reaches runpy's helpers is the runner's own time: the CLI drops those samples).
        if (
            p1 is not None
            and table[ids[p1]].function_name == "<module>"
            and any(kind_of(ids[i]) == 2 for i in python if p0 <= i < p1)
        ):
            out = ids[:p0] + ids[p1:]
    if any(kind_of(fid) == 3 for fid in out[:-1]):
        out = tuple(fid for fid in out[:-1] if kind_of(fid) != 3) + out[-1:]
    return out
