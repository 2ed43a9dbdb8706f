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

import _thread
import gc
import sys
import time
import weakref
from dataclasses import dataclass, field
from types import CoroutineType, GeneratorType
from typing import Any, Callable, Optional, Union

from ._async_view import TASK_PREFIX, is_asyncio_file
from ._model import Frame, ProfileData, ThreadRecord
from ._rows import FLAG_IDLE, ROW, SERIAL_BITS

PERIOD_S = 0.05
TRACK_SUFFIX = " asyncio tasks"
MAX_ROWS = 100_000  # distinct (second, thread, chain) keys; beyond, counted and dropped
MAX_CHAIN = 64  # coroutines followed down one await chain
MAX_SHARE = 0.05  # of the time a census may take: the next comes later if it took more
MAX_PARENTS = 16  # tasks followed up from one task to the outermost awaiting it
MAX_FRAMES_UP = 256  # frames walked up a thread's stack looking for run_forever

# A chain element: a coroutine's (id(code), line), the code kept in _Codes.by_id; or a
# synthetic frame's name.
_Element = Union[tuple[int, int], str]
_Chain = tuple[_Element, ...]


@dataclass
class _Row:
    weight_ns: int = 0
    count: int = 0
    since_ns: int = 0  # the time its first census's weight began
    last_ns: int = 0


@dataclass
class Census:
    """One session's census; called by the main thread or the drain thread (python_tick.h),
    read when a profile or a window is tidied."""

    clock: Callable[[], int]
    start_ns: int
    period_ns: int = int(PERIOD_S * 1e9)
    rows: dict[tuple[int, int, int], _Row] = field(default_factory=dict)  # (second, ident, chain)
    chains: dict[_Chain, int] = field(default_factory=dict)
    chain_list: list[_Chain] = field(default_factory=list)
    last_ns: dict[int, int] = field(default_factory=dict)  # per loop thread: its last census
    codes: _Codes = field(default_factory=lambda: _Codes())
    compiled_loops: dict[int, Any] = field(default_factory=dict)  # thread ident -> weakref
    stats: dict[str, int] = field(
        default_factory=lambda: {
            "async_censuses": 0,
            "async_waiting_seen": 0,
            "async_census_errors": 0,
            "async_census_rows_dropped": 0,
            "async_census_ns": 0,  # the censuses' own time (the GIL held)
            "async_census_period_max_ms": 0,  # the longest period the pacing chose
        }
    )

    def __call__(self) -> float:
        """One census; returns the seconds until the next (python_tick.h). Never raises: the
        program is not ours to disturb.

        The census holds the GIL while it reads every task, ~2-5 us a task: the next one
        comes late enough for it to take at most MAX_SHARE of the time (1,000 tasks: every
        50 ms; 10,000: about every second). Weights are elapsed times, so a longer period loses no
        time, only resolution."""
        # This thread's CPU, not the clock: the interpreter may hand the GIL to the program in
        # the middle (its switch interval), and that time is not the census's.
        t0 = time.thread_time()
        try:
            self._census()
        except Exception as exc:  # an unforeseen object shape ends nothing
            self.stats["async_census_errors"] += 1
            if self.stats["async_census_errors"] == 1:
                from . import _debug

                _debug.debug(f"asyncio census: {exc!r}")
        cost = time.thread_time() - t0
        self.stats["async_census_ns"] += int(cost * 1e9)
        period = max(self.period_ns / 1e9, cost / MAX_SHARE)
        self.stats["async_census_period_max_ms"] = max(
            self.stats["async_census_period_max_ms"], round(period * 1000)
        )
        return period

    def _census(self) -> None:
        base_events = sys.modules.get("asyncio.base_events")
        if base_events is None:  # the program has not imported asyncio (yet)
            return
        import asyncio  # already imported with asyncio.base_events: a dict lookup

        run_forever = base_events.BaseEventLoop.run_forever.__code__
        now = self.clock()
        seen: set[int] = set()
        # A loop compiled in C (uvloop) has no run_forever frame. When the main thread makes
        # the call (between two bytecodes, python_tick.h) its running loop is at hand: kept,
        # so that calls the drain thread makes find it too while it runs.
        running = asyncio.events._get_running_loop()
        if running is not None:
            self.compiled_loops[_thread.get_ident()] = weakref.ref(running)
        for ident, frame in sys._current_frames().items():
            loop = _loop_of(frame, run_forever)
            if loop is None:
                ref = self.compiled_loops.get(ident)
                loop = ref() if ref is not None else None
                if loop is None or not loop.is_running():
                    continue
            seen.add(ident)
            last = self.last_ns.get(ident)
            # Tasks waited all the time since the last census (a loop blocked in select,
            # the GIL out of reach): weighted by it, so no time is lost.
            weight = now - last if last else self.period_ns
            self.last_ns[ident] = now
            self._tasks(asyncio, loop, ident, weight, now)
        for ident in [i for i in self.last_ns if i not in seen]:
            del self.last_ns[ident]
        for ident in [i for i in self.compiled_loops if i not in seen]:
            del self.compiled_loops[ident]
        self.stats["async_censuses"] += 1

    def _tasks(self, asyncio: Any, loop: Any, ident: int, weight: int, now: int) -> None:
        current = asyncio.current_task(loop)
        # Tasks whose next step is in the loop's ready queue wait for nothing but their turn:
        # a task that yields with `await asyncio.sleep(0)` between slices of CPU is there at
        # every census the main thread makes (between two steps, python_tick.h), and its time
        # is its thread's samples', not an await's.
        # By id: a callback's __self__ may be anything (a list's append), hashable or not.
        ready = {
            id(getattr(h._callback, "__self__", None)) for h in list(getattr(loop, "_ready", ()))
        }
        own: dict[Any, tuple[_Chain, Any]] = {}  # task -> (its await chain, what it awaits)
        parent: dict[Any, Any] = {}
        codes = self.codes
        for task in _all_tasks(asyncio, loop):
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
            self._add(ident, full, n, weight * n, now)

    def _add(self, ident: int, chain: _Chain, n: int, weight: int, now: int) -> None:
        """n tasks waited on `chain` for `weight` ns in all."""
        cid = self.chains.get(chain)
        if cid is None:
            cid = self.chains[chain] = len(self.chain_list)
            self.chain_list.append(chain)
        key = ((now - self.start_ns) // 1_000_000_000, ident, cid)
        row = self.rows.get(key)
        if row is None:
            if len(self.rows) >= MAX_ROWS:
                self.stats["async_census_rows_dropped"] += n
                return
            row = self.rows[key] = _Row(since_ns=now - weight // n)
        row.weight_ns += weight
        row.count += n
        row.last_ns = now
        self.stats["async_waiting_seen"] += n

    def add_to(self, profile: ProfileData, start_ns: int, end_ns: int) -> dict[str, int]:
        """Add the rows stamped within [start_ns, end_ns] to the profile, each on its loop
        thread's task track; return the census's stats (with the rows left out because their
        thread was not one of the profile's)."""
        table = profile.frame_table
        frame_ids = {f: i for i, f in enumerate(table)}
        records = profile.thread_table
        tracks: dict[int, int] = {}  # loop thread ident -> its track's serial
        stack_ids: dict[int, int] = {}  # chain id -> stack id
        out = bytearray()
        added = unplaced = 0
        for (_, ident, cid), row in self.rows.items():
            # A row stands for [since_ns, last_ns]; a window that holds part of it gets that
            # part of its weight (a 5 s `record --pid` window, rows of up to a second).
            weight, count, stamp = row.weight_ns, row.count, row.last_ns
            if row.since_ns < start_ns or row.last_ns > end_ns:
                span = row.last_ns - row.since_ns
                inside = min(row.last_ns, end_ns) - max(row.since_ns, start_ns)
                if span <= 0 or inside <= 0:
                    continue
                weight = weight * inside // span
                count = max(1, round(count * inside / span))
                stamp = min(row.last_ns, end_ns)
            serial = tracks.get(ident)
            if serial is None:
                serial = _track(records, ident)
                if serial is None:
                    unplaced += row.count
                    continue
                tracks[ident] = serial
            sid = stack_ids.get(cid)
            if sid is None:
                ids = []
                for element in self.chain_list[cid]:
                    f = _frame(element, self.codes.by_id)
                    fid = frame_ids.get(f)
                    if fid is None:
                        fid = frame_ids[f] = len(table)
                        table.append(f)
                    ids.append(fid)
                sid = stack_ids[cid] = len(profile.stacks)
                profile.stacks.append(tuple(ids))
            out += ROW.pack(stamp, weight, sid, serial | FLAG_IDLE << SERIAL_BITS)
            added += count
        if out:
            profile.rows = bytes(profile.rows) + bytes(out)
            profile._samples = None
        return {**self.stats, "async_waiting_samples": added, "async_waiting_unplaced": unplaced}


def _all_tasks(asyncio: Any, loop: Any) -> set[Any]:
    """The loop's tasks. 3.14+'s asyncio.all_tasks lists _asyncio's tasks only: pure-Python
    ones (a task factory making asyncio.tasks._PyTask, or a Task subclass of Python's) are
    in asyncio.tasks._scheduled_tasks, which _py_all_tasks reads."""
    tasks = set(asyncio.all_tasks(loop))
    py_all_tasks = getattr(asyncio.tasks, "_py_all_tasks", None)
    if py_all_tasks is not None and sys.version_info >= (3, 14) and asyncio.tasks._scheduled_tasks:
        tasks.update(py_all_tasks(loop))
    return tasks


def _loop_of(frame: Any, run_forever: Any) -> Any:
    """The event loop a thread runs: `self` of its BaseEventLoop.run_forever frame."""
    for _ in range(MAX_FRAMES_UP):
        if frame is None:
            return None
        if frame.f_code is run_forever:
            return frame.f_locals.get("self")
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


def _frame(element: _Element, codes: dict[int, Any]) -> Frame:
    if isinstance(element, str):
        return Frame(function_name=element, filename="", lineno=0, qualname=element)
    code_id, line = element
    code = codes[code_id]
    return Frame(
        function_name=code.co_name,
        filename=code.co_filename,
        lineno=line,
        qualname=getattr(code, "co_qualname", code.co_name),
        first_lineno=code.co_firstlineno,
    )


def _track(records: list[ThreadRecord], ident: int) -> Optional[int]:
    """The serial of the loop thread's task track, added to the table on first use; None
    when the profile has no thread of that ident."""
    thread = next((r for r in reversed(records) if r.ident == ident and not r.native_only), None)
    if thread is None:
        return None
    serial = len(records)
    records.append(
        ThreadRecord(
            serial=serial,
            ident=thread.ident,
            native_id=thread.native_id,
            name=thread.name + TRACK_SUFFIX,
            cpu_ns=0,
            registered_ns=thread.registered_ns,
            ended_ns=thread.ended_ns,
            pid=thread.pid,
            task_track=True,
        )
    )
    return serial


_active: Optional[Census] = None


# _ext._python_tick: (handler returning its next period, or None to stop; first period)
_Tick = Callable[[Optional[Callable[[], object]], float], None]


def start(clock: Callable[[], int], tick: _Tick) -> None:
    """Begin a census for the session just started (wall mode with async_tasks)."""
    global _active
    _active = Census(clock=clock, start_ns=clock())
    tick(_active, PERIOD_S)


def stop(tick: _Tick) -> Optional[Census]:
    """End the calls (before the session stops); the census stays readable until forget()."""
    tick(None, PERIOD_S)
    return _active


def current() -> Optional[Census]:
    return _active


def forget() -> None:
    global _active
    _active = None
