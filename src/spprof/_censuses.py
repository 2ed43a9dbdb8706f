"""The censuses of waiting work (wall mode): asyncio's tasks with `--async`
(_async_census.py), greenlets with `--greenlets` (_greenlet_census.py). One periodic call
(_ext._python_tick, python_tick.h) makes each census in turn; each paces itself (_waits.py).

The session starts the ones it asks for. A window on a wall-mode session (a `Profiler()`
block, asking async_tasks=True or greenlets=True of a session that has none) starts its own
for its span; windows asking the same kind share one. In cpu mode nothing waits on CPU time:
`--async` gets an asyncio census that only learns the tasks' names (_task_names.py).
"""

from __future__ import annotations

from typing import Callable, Optional

from . import _async_census, _ext, _greenlet_census
from ._waits import PERIOD_S, WaitCensus

# _ext._python_tick: (handler returning its next period, or None to stop; first period)
Tick = Callable[[Optional[Callable[[], object]], float], None]

# The running censuses, and how many users each has (the session counts as one, each window
# that asked for it as one).
_active: list[WaitCensus] = []
_users: dict[int, int] = {}  # id(census) -> users
_tick: Optional[Tick] = None


class _Turns:
    """The tick's handler: each running census when its own period is due, each with a share
    of the room the session's memory limit leaves (_waits.py); returns the time to the
    nearest next one."""

    def __init__(self, clock: Callable[[], int], memory: Callable[[int], int]) -> None:
        self.clock = clock
        self.memory = memory  # _ext.python_memory: (the censuses' bytes) -> the room left
        self.due: dict[int, int] = {}  # id(census) -> when it is due next

    def __call__(self) -> float:
        now = self.clock()
        due = [c for c in _active if now >= self.due.get(id(c), 0)]
        if due:
            room = self.memory(sum(c.memory_bytes() for c in _active))
            for census in _active:
                census.allowed_bytes = census.memory_bytes() + room // len(_active)
            for census in due:
                self.due[id(census)] = now + int(census() * 1e9)
            self.memory(sum(c.memory_bytes() for c in _active))  # what the rounds added
        after = self.clock()
        dues = [self.due[id(c)] for c in _active if id(c) in self.due]
        return max(PERIOD_S / 5, (min(dues) - after) / 1e9 if dues else PERIOD_S)


NAMES_PERIOD_S = 0.1  # cpu mode's asyncio census, names only: a task named lives longer


def _begin(kind: str, clock: Callable[[], int], names_only: bool) -> WaitCensus:
    """A census of `kind` on the calling thread ("async" or "greenlet")."""
    census: WaitCensus
    if kind == "async":
        census = _async_census.Census(clock=clock, start_ns=clock(), names_only=names_only)
        if names_only:
            census.period_ns = int(NAMES_PERIOD_S * 1e9)
    else:
        greenlets = _greenlet_census.Census(clock=clock, start_ns=clock())
        _greenlet_census.activate(greenlets)
        greenlets.begin()
        census = greenlets
    return census


def _use(
    kinds: list[str], clock: Callable[[], int], tick: Tick, names_only: bool
) -> list[WaitCensus]:
    """One more user for a census of each kind (a new one where none runs)."""
    global _tick
    used = []
    for kind in kinds:
        census = next((c for c in _active if kind == c.PREFIX), None)
        if census is None:
            census = _begin(kind, clock, names_only)
            _active.append(census)
        _users[id(census)] = _users.get(id(census), 0) + 1
        used.append(census)
    if used and _tick is None:
        _tick = tick
        tick(_Turns(clock, _ext.python_memory), PERIOD_S)
    return used


def _kinds(async_tasks: bool, greenlets: bool, mode: str) -> list[str]:
    """cpu mode: greenlets wait on no CPU time, and asyncio's census learns names only."""
    wall = mode == "wall"
    return (["async"] if async_tasks else []) + (["greenlet"] if greenlets and wall else [])


def start(
    mode: str, async_tasks: bool, greenlets: bool, clock: Callable[[], int], tick: Tick
) -> None:
    """Begin the censuses the session asks for, on the thread starting it."""
    forget()
    _use(_kinds(async_tasks, greenlets, mode), clock, tick, mode != "wall")


def stop(tick: Tick) -> None:
    """A last census of each (the time since the one before would be lost), then no more
    calls; the rows stay readable until forget(). Before the session stops, with the GIL."""
    global _tick
    for census in _active:
        census()
    if _tick is not None:
        tick(None, PERIOD_S)
        _tick = None
    _greenlet_census.remove_trace()
    _greenlet_census.activate(None)


def open_for_window(
    mode: str, async_tasks: bool, greenlets: bool, clock: Callable[[], int], tick: Tick
) -> list[WaitCensus]:
    """The censuses a window on a running session asks for, the session's own or new ones
    for the window's span; release them with close_for_window."""
    return _use(_kinds(async_tasks, greenlets, mode), clock, tick, mode != "wall")


def settle(censuses: list[WaitCensus]) -> None:
    """A census of each now, as a window that uses them ends (its rows reach its end)."""
    for census in censuses:
        if any(c is census for c in _active):
            census()


def close_for_window(censuses: list[WaitCensus]) -> None:
    """After the window's profile is made: a census nobody uses any more ends."""
    global _tick
    for census in censuses:
        left = _users.get(id(census), 0) - 1
        if left > 0:
            _users[id(census)] = left
            continue
        _users.pop(id(census), None)
        if any(c is census for c in _active):
            _active[:] = [c for c in _active if c is not census]
            if census.PREFIX == "greenlet":
                _greenlet_census.remove_trace()
                _greenlet_census.activate(None)
    if not _active and _tick is not None:
        _tick(None, PERIOD_S)
        _tick = None


def current() -> list[WaitCensus]:
    return list(_active)


def forget() -> None:
    global _tick
    _active.clear()
    _users.clear()
    _tick = None
    _greenlet_census.activate(None)


def on_thread_start() -> None:
    """The thread-start hook's call on each new threading.Thread (the greenlet trace)."""
    if _greenlet_census._active_box[0] is not None:
        _greenlet_census.on_thread_start()
