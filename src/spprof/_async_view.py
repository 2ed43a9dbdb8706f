"""The asyncio view (`--async`, async_tasks=True): each sample taken inside an event loop is
rooted at the task it ran, not at the loop that ran the task.

A pass over the profile at stop (_session._tidy), in Python, on stacks rather than samples:
nothing is read while sampling. In a stack that runs inside an asyncio event loop, everything
from the root down to the loop's innermost scaffolding frame goes (the program's `<module>`
and `main()` above `asyncio.run`, then `run`, `Runner.run`, `run_until_complete`,
`run_forever`, `_run_once`, `Handle._run`, the pure-Python `Task.__step`, and the native
frames between them and the task's code). In its place comes one synthetic frame:

- `<task> QUALNAME`: the stack ran a task; QUALNAME is its outermost coroutine, the first
  Python frame below the scaffolding, which stays, with the rest of its chain down to the
  running line;
- `<event loop>`: the stack ran the loop itself (waiting in its selector, its own
  bookkeeping, a callback that is not a task); what ran below the scaffolding stays under it,
  so that time is shown, never dropped.

Scaffolding is known by file (this interpreter's asyncio package) and function name, never
by name alone: a program's own `run` or `_run_once` is the program's. A coroutine run by a C
task sits right below `Handle._run`, where a plain callback (`loop.call_soon(f)`) sits too;
the two are told apart by the function's source (`async def`); a function whose source
cannot be read is taken for a task. Stacks outside any loop are untouched. In wall mode,
the tasks that wait are added by _async_census.py.
"""

from __future__ import annotations

import functools
import importlib.util
import linecache
import os
import re
from typing import Optional

from ._model import Frame, ProfileData
from ._rows import STACK_WORD

TASK_PREFIX = "<task> "
EVENT_LOOP = "<event loop>"


@functools.cache
def asyncio_dir() -> str:
    """This interpreter's asyncio package directory, found without importing asyncio: spprof
    is imported by every profiled program, and asyncio's import was a quarter of spprof's
    (45 ms of 177 ms on 3.13) for programs that never use it."""
    spec = importlib.util.find_spec("asyncio")
    origin = spec.origin if spec is not None else None
    return os.path.dirname(os.path.abspath(origin)) if origin else ""


def is_asyncio_file(filename: str) -> bool:
    """The file is one of this interpreter's asyncio package (as code objects name it)."""
    return os.path.dirname(filename) == asyncio_dir()


def innermost_task(frames: list[Frame], ids: tuple[int, ...]) -> Optional[tuple[int, str]]:
    """The innermost `<task> COROUTINE` frame of a stack (frame ids into `frames`): its index
    in the stack and COROUTINE; None for a stack that is no task's. A waiting child sits
    under its parent's chain (_async_census), so the innermost is the task itself."""
    for i in range(len(ids) - 1, -1, -1):
        f = frames[ids[i]]
        if not f.filename and f.function_name.startswith(TASK_PREFIX):
            return i, f.function_name[len(TASK_PREFIX) :]
    return None


# Per file of the asyncio package (3.9-3.15): the functions that run the loop, a callback,
# or a task's step. None: every function of the file (runners.py only runs a loop).
_SCAFFOLDING: dict[str, Optional[frozenset[str]]] = {
    "runners.py": None,  # asyncio.run, Runner.run (3.11+), their setup and teardown
    "base_events.py": frozenset(
        {
            "run_until_complete",
            "run_forever",
            "_run_once",
            "_run_forever_setup",  # 3.13+
            "_run_forever_cleanup",  # 3.13+
            # asyncio.run's teardown runs these as tasks: the loop's housekeeping, not the
            # program's (a sample there was rooted at `<task> BaseEventLoop.shutdown_asyncgens`)
            "shutdown_asyncgens",
            "shutdown_default_executor",  # 3.9+
        }
    ),
    "windows_events.py": frozenset({"run_forever"}),  # ProactorEventLoop's override
    "events.py": frozenset({"_run"}),  # Handle._run, _ThreadSafeHandle._run (3.14+)
    # The pure-Python Task (C tasks step in _asyncio, without a Python frame); the
    # current-task bookkeeping its step calls in pure Python.
    "tasks.py": frozenset(
        {
            "__step",
            "__step_run_and_handle_result",  # 3.12+
            "__wakeup",
            "_enter_task",
            "_leave_task",
            "_py_enter_task",
            "_py_leave_task",
            "_swap_current_task",
            "_py_swap_current_task",
        }
    ),
}
# The scaffolding frames that call a task's coroutine (or a callback) right below them.
_STEPS = frozenset({"__step", "__step_run_and_handle_result", "__wakeup"})

# Frame kinds: not asyncio's, asyncio's other code, loop scaffolding, a runner (asyncio.run,
# Runner.run, uvloop.run: below it, a loop compiled in C calls a task's step or a callback
# with no Python frame between), scaffolding that runs a task's step or a callback
# (Handle._run, the pure-Python Task's step).
_OTHER, _ASYNCIO, _LOOP, _RUNNER, _RUNS_CODE = range(5)
# uvloop's own run (3.9, 3.10; on 3.11+ it runs an asyncio.Runner).
_UVLOOP_RUN = (os.sep + os.path.join("uvloop", "__init__.py"), "run")


def _kind(frame: Frame) -> int:
    if frame.is_native or not frame.filename:
        return _OTHER
    if frame.function_name == _UVLOOP_RUN[1] and frame.filename.endswith(_UVLOOP_RUN[0]):
        return _RUNNER
    directory, base = os.path.split(frame.filename)
    package = asyncio_dir()
    if directory != package:
        try:
            if os.path.dirname(os.path.abspath(frame.filename)) != package:
                return _OTHER
        except OSError:  # the working directory is gone: a relative name is not asyncio's
            return _OTHER
    if base not in _SCAFFOLDING:
        return _ASYNCIO
    names = _SCAFFOLDING[base]
    if names is not None and frame.function_name not in names:
        return _ASYNCIO
    if base == "events.py" or (base == "tasks.py" and frame.function_name in _STEPS):
        return _RUNS_CODE
    if base == "runners.py":
        return _RUNNER
    return _LOOP


def _is_coroutine(frame: Frame) -> bool:
    """Whether the frame's function is an `async def`, from its source; True when unknown."""
    name = frame.function_name
    if name.startswith("<"):  # <lambda>, <module>, <listcomp>: never a coroutine function
        return False
    pattern = re.compile(rf"^\s*(async\s+)?def\s+{re.escape(name)}\b")
    first = max(1, frame.first_lineno)
    for lineno in range(first, first + 40):  # decorators come first, then the def
        line = linecache.getline(frame.filename, lineno)
        if not line:
            break
        m = pattern.match(line)
        if m:
            return m.group(1) is not None
    return True


def _synthetic(name: str) -> Frame:
    """A frame spprof makes, shaped as <GC>: no file, no line."""
    return Frame(function_name=name, filename="", lineno=0, qualname=name)


def root_at_tasks(profile: ProfileData) -> dict[str, int]:
    """Rewrite the profile's stacks in place (see the module's docstring); return the
    samples rooted at a task and at the event loop, as stats."""
    table = profile.frame_table
    kinds = [_kind(f) for f in table]  # per frame id; the table is small beside the stacks
    scaffolding = frozenset(fid for fid, k in enumerate(kinds) if k >= _LOOP)
    coroutine: dict[tuple[str, str, int], bool] = {}
    added: dict[str, int] = {}

    def is_coroutine(fid: int) -> bool:
        f = table[fid]
        key = (f.filename, f.function_name, f.first_lineno)
        c = coroutine.get(key)
        if c is None:
            c = coroutine[key] = _is_coroutine(f)
        return c

    def synthetic_id(name: str) -> int:
        fid = added.get(name)
        if fid is None:
            fid = added[name] = len(table)
            table.append(_synthetic(name))
            kinds.append(_OTHER)
        return fid

    tasks: set[int] = set()
    loops: set[int] = set()
    stacks = profile.stacks
    for sid, ids in enumerate(stacks):
        if not scaffolding or scaffolding.isdisjoint(ids):
            continue  # not in an event loop
        last = next(i for i in range(len(ids) - 1, -1, -1) if ids[i] in scaffolding)
        rest = ids[last + 1 :]
        at = next((i for i, fid in enumerate(rest) if not table[fid].is_native), None)
        # A task's coroutine sits right below a step (pure-Python Task) or Handle._run (C
        # Task); what the step itself calls (loop.call_soon) and plain callbacks are the loop's.
        # Under a compiled loop (uvloop) the innermost scaffolding is the runner, and a task's
        # coroutine (or a plain callback) comes right after it.
        runs = kinds[ids[last]] in (_RUNS_CODE, _RUNNER)
        if at is not None and runs and is_coroutine(rest[at]):
            head = synthetic_id(TASK_PREFIX + table[rest[at]].display_name)
            stacks[sid] = (head, *rest[at:])
            tasks.add(sid)
        else:
            stacks[sid] = (synthetic_id(EVENT_LOOP), *rest)
            loops.add(sid)
    profile._samples = None
    counts = {"async_task_samples": 0, "async_loop_samples": 0}
    if tasks or loops:
        held = profile.folds.get  # a folded wait counts as the samples it holds
        for i, sid in enumerate(profile._row_words(STACK_WORD)):
            if sid in tasks:
                counts["async_task_samples"] += held(i, 1)
            elif sid in loops:
                counts["async_loop_samples"] += held(i, 1)
    return counts
