"""The asyncio task census (`--async` in wall mode): where each waiting task waits, for how long.

A sampler sees threads, and a thread running an event loop shows only the task running now
(or the loop waiting in its selector). A task suspended on an `await` is on no thread's stack.
So, every PERIOD (50 ms), the drain thread calls Census with the GIL (_ext._python_tick, no
thread of ours): it finds each thread inside `BaseEventLoop.run_forever` (its frame, from
`sys._current_frames()`), takes the loop's tasks (`asyncio.all_tasks(loop)`), and for each
task but the running one reads its await chain: the coroutine, the coroutine it awaits, and
so on down to the awaited future, each with the line it is suspended on. Each waiting task
gets the time since the loop's last census, on that chain:

    <task> COROUTINE -> its frames ... -> the innermost awaiting line

A task awaited by another (`await task`, `gather`, `wait_for`, a TaskGroup's children) is
put under its parent's chain, as CPython 3.15's task graph draws them. Nothing here runs in a
signal handler, and the loop's thread is not stopped: holding the GIL, the census reads
objects no other thread can change.

The rows are kept here, summed per second, thread and chain (a task waiting on one line for
an hour is 3,600 rows, however many tasks wait there), and added to a profile or a window as
it is tidied, on a track of their own per loop thread, `THREAD asyncio tasks`: the loop's
thread keeps its own samples, whose times add up to its wall time. Their weights are wall
time off CPU, flagged idle. A loop compiled in C (uvloop) has no run_forever frame: it is
found when the census runs on the main thread, as the thread's running loop.
"""

from __future__ import annotations

import gc
import sys
import weakref
from dataclasses import dataclass, field
from types import CoroutineType, GeneratorType
from typing import Any, Optional

from . import _ext
from ._async_view import TASK_PREFIX, is_asyncio_file
from ._model import ProfileData
from ._task_names import TaskNames
from ._waits import Chain as _Chain
from ._waits import Element as _Element
from ._waits import WaitCensus

TRACK_SUFFIX = " asyncio tasks"
MAX_CHAIN = 64  # coroutines followed down one await chain
MAX_PARENTS = 16  # tasks followed up from one task to the outermost awaiting it
MAX_FRAMES_UP = 256  # frames walked up a thread's stack looking for run_forever


@dataclass
class Census(WaitCensus):
    """One session's asyncio census (_waits.WaitCensus: rows, pacing, tracks).

    The census holds the GIL while it reads every task, ~2-5 us a task: 1,000 tasks are read
    every 50 ms; 10,000 about every second."""

    PREFIX = "async"
    TRACK_SUFFIX = TRACK_SUFFIX
    compiled_loops: dict[int, Any] = field(default_factory=dict)  # thread ident -> weakref
    code_kinds: Optional[_Codes] = None
    names: TaskNames = field(default_factory=TaskNames)
    # cpu mode: no task waits on CPU time; the census learns the tasks' names only, less often
    names_only: bool = False

    @property
    def kinds(self) -> _Codes:
        if self.code_kinds is None:
            self.code_kinds = _Codes(by_id=self.codes)
        return self.code_kinds

    def _census(self) -> Optional[float]:
        base_events = sys.modules.get("asyncio.base_events")
        if base_events is None:  # the program has not imported asyncio (yet)
            return None
        import asyncio  # already imported with asyncio.base_events: a dict lookup

        entries = _entries(base_events)
        now = self.clock()
        seen: set[int] = set()
        # A loop compiled in C (uvloop) has no run_forever frame. When the main thread makes
        # the call (between two bytecodes, python_tick.h) its running loop is at hand: kept,
        # so that calls the drain thread makes find it too while it runs.
        running = asyncio.events._get_running_loop()
        if running is not None:
            self.compiled_loops[_ext.thread_ident()] = weakref.ref(running)
        for ident, frame in sys._current_frames().items():
            loop = _loop_of(frame, entries)
            if loop is not None and not loop.is_running():
                loop = None  # a Runner before or after its run
            if loop is None:
                ref = self.compiled_loops.get(ident)
                loop = ref() if ref is not None else None
                if loop is None or not loop.is_running():
                    continue
            seen.add(ident)
            if self.names_only:
                self._names(asyncio, loop)
            else:
                self._tasks(asyncio, loop, ident, self.weight(ident, now), now)
        self.forget_threads_but(seen)
        for ident in [i for i in self.compiled_loops if i not in seen]:
            del self.compiled_loops[ident]
        return None

    def _tasks(self, asyncio: Any, loop: Any, ident: int, weight: int, now: int) -> None:
        current = asyncio.current_task(loop)
        if current is None:
            # 3.14+: _asyncio's current_task does not know a pure-Python task (a task
            # factory making asyncio.tasks._PyTask): asyncio's Python one does.
            py_current = getattr(asyncio.tasks, "_py_current_task", None)
            if py_current is not None and sys.version_info >= (3, 14):
                current = py_current(loop)
        # Tasks whose next step is in the loop's ready queue wait for nothing but their turn:
        # a task that yields with `await asyncio.sleep(0)` between slices of CPU is there at
        # every census the main thread makes (between two steps, python_tick.h), and its time
        # is its thread's samples', not an await's. A task woken by the future it awaited
        # (its wakeup callback is ready, not its step) waited on its await line until a moment
        # ago: it is counted, or a task that wakes while another runs loses the whole round.
        # By id: a callback's __self__ may be anything (a list's append), hashable or not.
        ready = {
            id(getattr(h._callback, "__self__", None))
            for h in list(getattr(loop, "_ready", ()))
            if not _is_wakeup(h._callback)
        }
        own: dict[Any, tuple[_Chain, Any]] = {}  # task -> (its await chain, what it awaits)
        parent: dict[Any, Any] = {}
        codes = self.kinds
        for task in _all_tasks(asyncio, loop):
            self._name(task, codes)  # running or not: its samples' root is named too
            if task is current or id(task) in ready or task.done():
                continue  # the running task is on its thread's stack: the sampler's
            chain, awaited, groups = _await_chain(task, codes, asyncio)
            own[task] = (chain, awaited)
            if awaited is not None or groups:
                for child in _children(awaited, groups, codes, asyncio):
                    parent.setdefault(child, task)
        # Many tasks wait on the same chain (1,000 handlers on one line): one row update each.
        same: dict[_Chain, int] = {}
        for task, (chain, _) in own.items():
            full = chain
            up = parent.get(task)
            for _ in range(MAX_PARENTS):
                if up is None or up not in own:
                    break
                full = own[up][0] + full
                up = parent.get(up)
            same[full] = same.get(full, 0) + 1
        for full, n in same.items():
            self.add(ident, full, n, weight * n, now)

    def _names(self, asyncio: Any, loop: Any) -> None:
        codes = self.kinds
        for task in _all_tasks(asyncio, loop):
            self._name(task, codes)

    def _name(self, task: Any, codes: _Codes) -> None:
        """Learn the task's name for its outermost coroutine's root (_task_names.py)."""
        coro = task.get_coro()
        t = type(coro)
        if t is CoroutineType:
            code = coro.cr_code
        elif t is GeneratorType:
            code = coro.gi_code
        else:
            return  # a compiled coroutine: its root is its type's name, never renamed
        codes.kind(code)  # keeps the code: head() reads it by id
        head = codes.head(code)
        if not self.names.settled(head):
            self.names.see(head, task.get_name())

    def add_to(self, profile: ProfileData, start_ns: int, end_ns: int) -> dict[str, int]:
        """The rows (_waits.WaitCensus.add_to), then the roots of named tasks' coroutines,
        running (the asyncio view's) and waiting, as their names."""
        stats = super().add_to(profile, start_ns, end_ns)
        stats["async_task_roots_named"] = self.names.rename(profile)
        return stats


def _is_wakeup(callback: Any) -> bool:
    """Whether a ready callback is a task's wakeup (its awaited future is done): the C task's
    `task_wakeup` (3.10+) or TaskWakeupMethWrapper (3.9), the pure-Python Task's `__wakeup`;
    a step (TaskStepMethWrapper, `__step`) is a task that yielded for its turn."""
    name = getattr(callback, "__name__", None)
    if not isinstance(name, str):
        name = type(callback).__name__
    return "wakeup" in name.lower()


def _all_tasks(asyncio: Any, loop: Any) -> set[Any]:
    """The loop's tasks. 3.14+'s asyncio.all_tasks lists _asyncio's tasks only: pure-Python
    ones (a task factory making asyncio.tasks._PyTask, or a Task subclass of Python's) are
    in asyncio.tasks._scheduled_tasks, which _py_all_tasks reads."""
    tasks = set(asyncio.all_tasks(loop))
    py_all_tasks = getattr(asyncio.tasks, "_py_all_tasks", None)
    if py_all_tasks is not None and sys.version_info >= (3, 14) and asyncio.tasks._scheduled_tasks:
        tasks.update(py_all_tasks(loop))
    return tasks


def _entries(base_events: Any) -> dict[Any, str]:
    """The code of each function a thread running a loop has on its stack -> where its frame
    holds the loop: BaseEventLoop.run_forever's `self`; for a loop compiled in C (uvloop),
    which has no run_forever frame, the asyncio.Runner running it (`self._loop`, 3.11+) or
    asyncio.run's and uvloop.run's `loop` (3.9, 3.10)."""
    entries = {base_events.BaseEventLoop.run_forever.__code__: "self"}
    runners = sys.modules.get("asyncio.runners")
    runner = getattr(runners, "Runner", None)
    if runner is not None:
        entries[runner.run.__code__] = "self._loop"
    for module in (runners, sys.modules.get("uvloop")):
        code = getattr(getattr(module, "run", None), "__code__", None)
        if code is not None and "loop" in code.co_varnames:
            entries.setdefault(code, "loop")
    return entries


def _loop_of(frame: Any, entries: dict[Any, str]) -> Any:
    """The event loop a thread runs, from the innermost of its frames that holds one."""
    for _ in range(MAX_FRAMES_UP):
        if frame is None:
            return None
        where = entries.get(frame.f_code)
        if where is not None:
            if where == "self._loop":
                return getattr(frame.f_locals.get("self"), "_loop", None)
            return frame.f_locals.get(where)
        frame = frame.f_back
    return None


# What a coroutine's code is to the chain walk (_Codes.kind).
_PLAIN, _FUTURE_AWAIT, _GROUP_EXIT = range(3)
# What an awaited object is (_Codes.future_kind): a task or a gather's future has children.
_NOT_FUTURE, _FUTURE, _TASK, _GATHER = range(4)


@dataclass
class _Codes:
    """What the chain walk learns once per code object and per type, not at every census: a
    census reads every waiting task's chain, a few frames each, 20 times a second."""

    # By id(code): a code object's hash reads its bytecode and constants every time. The
    # objects are kept (`by_id`), so an id is never reused while it is a key here.
    by_id: dict[int, Any] = field(default_factory=dict)
    kinds: dict[int, int] = field(default_factory=dict)
    heads: dict[int, str] = field(default_factory=dict)  # id(code) -> "<task> QUALNAME"
    futures: dict[type, int] = field(default_factory=dict)  # type -> _NOT_FUTURE ... _GATHER
    links: dict[int, bool] = field(default_factory=dict)  # id(code) -> leaf_may_link

    def kind(self, code: Any) -> int:
        k = self.kinds.get(id(code))
        if k is None:
            self.by_id[id(code)] = code
            name = code.co_name
            if name == "__await__" and is_asyncio_file(code.co_filename):
                k = _FUTURE_AWAIT  # the pure-Python Future's __await__: `self` is the future
            elif name in ("__aexit__", "_aexit") and is_asyncio_file(code.co_filename):
                k = _GROUP_EXIT  # a TaskGroup's: `self._tasks` are its children
            else:
                k = _PLAIN
            self.kinds[id(code)] = k
        return k

    def head(self, code: Any) -> str:
        h = self.heads.get(id(code))
        if h is None:  # kind() has seen the code: it is in by_id
            h = self.heads[id(code)] = TASK_PREFIX + getattr(code, "co_qualname", code.co_name)
        return h

    def leaf_may_link(self, code: Any) -> bool:
        """Whether what the coroutine of `code` awaits may be a task or a gather's future:
        not where it is one of asyncio's own coroutines, but for wait_for (3.12+ awaits the
        task itself)."""
        if code is None:
            return False
        m = self.links.get(id(code))
        if m is None:
            self.by_id[id(code)] = code
            m = self.links[id(code)] = code.co_name == "wait_for" or not is_asyncio_file(
                code.co_filename
            )
        return m

    def future_kind(self, obj: Any, asyncio: Any) -> int:
        t = type(obj)
        k = self.futures.get(t)
        if k is None:
            if not asyncio.isfuture(obj):
                k = _NOT_FUTURE
            elif callable(getattr(t, "get_coro", None)):  # C or pure-Python (_PyTask) task
                k = _TASK
            elif isinstance(obj, getattr(asyncio.tasks, "_GatheringFuture", ())):
                k = _GATHER
            else:
                k = _FUTURE
            self.futures[t] = k
        return k


def _await_chain(task: Any, codes: _Codes, asyncio: Any) -> tuple[_Chain, Any, list[Any]]:
    """The task's chain: `<task> NAME`, then (code, line) of each coroutine it is suspended
    in, outermost first; what the innermost awaits (a future, or None); the TaskGroups whose
    `__aexit__` the chain waits in."""
    obj = task.get_coro()
    elements: list[_Element] = []
    groups: list[Any] = []
    last = None  # the innermost coroutine's code
    for _ in range(MAX_CHAIN):
        # By type, not getattr with a default: a missing attribute costs an exception.
        t = type(obj)
        if t is CoroutineType:
            frame, nxt = obj.cr_frame, obj.cr_await
        elif t is GeneratorType:  # @types.coroutine generators, pure-Python Future.__await__
            frame, nxt = obj.gi_frame, obj.gi_yieldfrom
        else:
            break  # what the innermost coroutine awaits (or a compiled coroutine: not read)
        if frame is None:  # finished
            obj = None
            break
        code = last = frame.f_code
        kind = codes.kind(code)
        if kind == _FUTURE_AWAIT:
            obj = frame.f_locals.get("self")
            break
        if not elements:
            elements.append(codes.head(code))
        elements.append((id(code), frame.f_lineno))
        if kind == _GROUP_EXIT:
            group = frame.f_locals.get("self")
            if hasattr(group, "_tasks"):
                groups.append(group)
        obj = nxt
    if not elements:  # a coroutine that has finished or has no frame (a C awaitable)
        elements.append(TASK_PREFIX + type(task.get_coro()).__name__)
    if obj is not None and codes.future_kind(obj, asyncio) == _NOT_FUTURE:
        # Behind a C future's iterator: looked up (gc.get_referents, ~0.7 us) only where it
        # may be a task or a gather's, not below asyncio's own waits (sleep, Queue.get, a
        # stream's read, Lock, Event: their futures are plain ones).
        obj = _future_of(obj, codes, asyncio) if codes.leaf_may_link(last) else None
    return tuple(elements), obj, groups


def _future_of(awaiting: Any, codes: _Codes, asyncio: Any) -> Any:
    """The future behind a C Future's iterator (its only referent that is a future)."""
    for ref in gc.get_referents(awaiting):
        if codes.future_kind(ref, asyncio) != _NOT_FUTURE:
            return ref
    return None


def _children(awaited: Any, groups: list[Any], codes: _Codes, asyncio: Any) -> list[Any]:
    """The tasks a waiting task waits for: the one it awaits, a gather's, a TaskGroup's."""
    found: list[Any] = []
    kind = _NOT_FUTURE if awaited is None else codes.future_kind(awaited, asyncio)
    if kind == _TASK:
        found.append(awaited)
    elif kind == _GATHER:
        found.extend(c for c in awaited._children if codes.future_kind(c, asyncio) == _TASK)
    for group in groups:
        found.extend(t for t in list(group._tasks) if codes.future_kind(t, asyncio) == _TASK)
    return found
