"""spprof's own frames in stacks: the runner's at the root, the decorator's in the middle.

Under `python -m spprof` (or the `spprof` console script) every stack of the main thread
starts with spprof's runner: the launcher, runpy, `spprof/__main__.py`, `spprof/cli/*`,
runpy again, then the program's `<module>`. The CLI's own session hides them when it writes
(cli/record.py hide_runner); a session the program starts itself (a gunicorn `post_fork`
hook in a worker forked from the CLI's process, `spprof.start()` anywhere under the CLI) and
a window on the CLI's session get the same here: the leading run of runner frames is cut
when it holds one of spprof's files (a run of runpy alone is `python -m`'s, not ours, and
stays). Native frames above the run (`_start`, `Py_RunMain`) stay; those inside it go with it.
The `@spprof.profile` wrapper's frame, between a caller and the decorated function, goes too.
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


def hide_spprof_frames(profile: ProfileData, runner_files: frozenset[str] = frozenset()) -> int:
    """Cut spprof's runner run from the root of every stack and the @profile wrapper from its
    middle; return how many stacks changed. `runner_files`: more files that count as runner
    (the CLI passes its launcher set)."""
    table = profile.frame_table
    runner_set = _SPPROF_RUNNER | _RUNPY | runner_files | frozenset(_launchers)
    kind: dict[int, int] = {}  # frame id -> 0 program, 1 runner, 2 spprof runner, 3 pass-through

    def kind_of(fid: int) -> int:
        k = kind.get(fid)
        if k is None:
            f: Frame = table[fid]
            name = f.filename
            path = name if name in runner_set or name in _PASS_THROUGH else _absolute(name)
            if f.is_native:
                k = 0
            elif (
                path in _SPPROF_RUNNER
                or path in _launchers
                or path in runner_files
                or path.endswith(_SPPROF_RUNNER_TAILS)  # another install's (a loaded file)
            ):
                k = 2
            elif path in runner_set or path.endswith(_RUNPY_TAIL):
                k = 1
            elif path in _PASS_THROUGH:
                k = 3
            else:
                k = 0
            kind[fid] = k
        return k

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
