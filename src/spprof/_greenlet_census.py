"""The greenlet census (`--greenlets` in wall mode): where each switched-out greenlet waits.

A greenlet that has switched out (to gevent's hub, to a scheduler of raw greenlets) is on no
thread's stack: in wall mode its thread shows the hub waiting in its loop, or whichever
greenlet runs. greenlet keeps no list of its greenlets, so spprof learns them as they switch:
a trace function (greenlet.settrace, one per thread, chained to the one it replaces; in C,
greenlet_trace.h) notes each greenlet that switches out, by a weak reference, and the thread's
last switch. It is set on the thread that starts the
session, on each threading.Thread started while it runs (the thread-start hook), and on the
main thread at the first census after greenlet is imported (`spprof --greenlets app.py`
starts before the app imports gevent); the greenlets that exist at start are found once with
gc.get_objects().

Every PERIOD (_waits.py) the census reads each greenlet it knows. One with a frame (gr_frame)
has switched out: it gets the time since its thread's last census, on its chain:

    <greenlet> FUNCTION -> its frames, outermost first -> the line it switched out on

FUNCTION is the greenlet's outermost function that is not gevent's own (a StreamServer's
handler, not gevent's wrapper around it); `main` for the thread's main greenlet, whose chain
starts at the program's `<module>`. Each is weighed by at most the time since it was
noted. The census samples the time its call was queued, not the moment it is made
(Census._woken). Left out: the running greenlet (no gr_frame), gevent's hub (switched out
only while a greenlet runs: it waits for nothing), and a greenlet that only gives up its turn
(gevent.sleep(0), gevent.idle()): its time is its thread's samples', not a wait's. Holding
the GIL, the census reads frames no other thread can change; nothing here runs in a signal
handler.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Optional

from . import _ext
from ._greenlet_view import is_greenlet_run
from ._runner_frames import is_runner_file
from ._waits import Chain, Element, WaitCensus

TRACK_SUFFIX = " greenlets"
GREENLET_PREFIX = "<greenlet> "
MAX_FRAMES = 256  # frames walked down one greenlet's stack
MAX_KNOWN = 1_000_000  # greenlets noted at once; beyond, counted (greenlet_untracked)

# id(greenlet) -> (a weak reference to it, the ident of its thread, the time it was noted:
# its first switch out, or the census that found it). The trace functions of
# every thread write here, holding the GIL; an entry goes when its greenlet is freed.
_known: dict[int, tuple[Any, int, int]] = {}
# Thread ident -> its last switch (greenlet_trace.h): (its time, the greenlet switched to,
# the code and instruction offset of that greenlet's innermost frame then and of its caller:
# where it had waited, the id of the greenlet running when the periodic call was queued).
# Census._woken: a census made after a wake-up.
_last_switch: dict[int, tuple[int, Any, Any, int, Any, int, int]] = {}
# The running session's census, or None: the trace functions only call on.
_active_box: list[Any] = [None]
_untracked = [0]  # greenlets not noted: MAX_KNOWN reached, or no weak reference possible


def _main_ident() -> int:
    return threading.main_thread().ident or 0


def _note(greenlet: Any, ident: int) -> None:
    key = id(greenlet)
    if len(_known) >= MAX_KNOWN:
        _untracked[0] += 1
        return

    def forget(_: object) -> None:  # as the greenlet is freed, before its id can be reused
        _known.pop(key, None)

    try:
        ref = weakref.ref(greenlet, forget)
    except TypeError:  # a greenlet subclass without weak references
        _untracked[0] += 1
        return
    _known[key] = (ref, ident, _ext.monotonic_ns())


def _make_trace(ident: int, previous: Any) -> Any:
    """The trace function for one thread (greenlet_trace.h): notes the greenlet switching out
    and the switch, then calls the one it replaced (gevent's monitor thread sets one too)."""
    return _ext.greenlet_trace((ident, previous, _known, _last_switch, _note, _active_box))


def install_trace() -> bool:
    """Set the trace function on the calling thread (greenlet imported, not set there yet);
    True when it is there now."""
    greenlet = sys.modules.get("greenlet")
    if greenlet is None or not hasattr(greenlet, "settrace"):
        return False
    current = greenlet.gettrace()
    if _ext.greenlet_trace_state(current) is not None:
        return True  # ours, from this session or one before
    greenlet.settrace(_make_trace(_ext.thread_ident(), current))
    return True


def remove_trace() -> None:
    """Put back the calling thread's previous trace function while ours is the one set (a
    later one chains to ours, which calls on without noting once the session is gone)."""
    greenlet = sys.modules.get("greenlet")
    if greenlet is None:
        return
    state = _ext.greenlet_trace_state(greenlet.gettrace())
    if state is not None:
        greenlet.settrace(state[1])


def on_thread_start() -> None:
    """Called on each threading.Thread started during the session (the thread-start hook)."""
    try:
        install_trace()
    except Exception:  # the program's thread must run
        _untracked[0] += 1


def _find_existing(greenlet: Any, ident: int) -> None:
    """The greenlets alive at start: those of the calling thread (its main greenlet's) are
    noted; another thread's cannot be told apart and are counted as untracked."""
    main = greenlet.getcurrent()
    while main.parent is not None:
        main = main.parent
    for obj in gc.get_objects():
        if isinstance(obj, greenlet.greenlet) and id(obj) not in _known:
            root = obj
            for _ in range(MAX_FRAMES):
                if root.parent is None:
                    break
                root = root.parent
            if root is main:
                _note(obj, ident)
            elif obj.gr_frame is not None:
                _untracked[0] += 1


@dataclass
class Census(WaitCensus):
    """One session's greenlet census (_waits.WaitCensus: rows, pacing, tracks)."""

    PREFIX = "greenlet"
    TRACK_SUFFIX = TRACK_SUFFIX
    main_ident: int = field(default_factory=_main_ident)
    on_main: bool = False  # the trace function is set on the main thread
    heads: dict[int, str] = field(default_factory=dict)  # id(code) -> "<greenlet> FUNCTION"
    runner: dict[int, bool] = field(default_factory=dict)  # id(code) -> a runner's frame
    gevent: Optional[tuple[Any, Any, Any]] = None  # (Hub, sleep's code, idle's code)
    gevent_dir: Optional[str] = None
    yielding_lines: dict[int, bool] = field(default_factory=dict)  # gevent.sleep's lines
    interned: dict[Chain, Chain] = field(default_factory=dict)  # one object per chain
    # id(greenlet) -> (its frame, f_lasti, chain) at the census that built the chain: a
    # greenlet still suspended at the same instruction of the same frame has the same chain.
    chains_of: dict[int, tuple[Any, int, Chain]] = field(default_factory=dict)

    def begin(self) -> None:
        """On the thread starting the session: the trace function, and the greenlets that
        exist already."""
        greenlet = sys.modules.get("greenlet")
        if greenlet is None:
            return
        ident = _ext.thread_ident()
        if install_trace() and ident == self.main_ident:
            self.on_main = True
        try:
            _find_existing(greenlet, ident)
        except Exception as exc:
            from . import _debug

            _debug.debug(f"greenlet census: the greenlets alive at start: {exc!r}")

    def _census(self) -> Optional[float]:
        greenlet = sys.modules.get("greenlet")
        if greenlet is None:  # the program has not imported greenlet (yet)
            return None
        me = _ext.thread_ident()
        if not self.on_main and me == self.main_ident:
            # greenlet imported since start (python_tick.h): the greenlets it made meanwhile
            # are found as at start
            self.on_main = install_trace()
            if self.on_main:
                _find_existing(greenlet, me)
        now = self.clock()
        live = sys._current_frames()
        # An ended thread's last switch would keep its last greenlet alive to the stop.
        for ident in [i for i in _last_switch if i not in live]:
            del _last_switch[ident]
        weights: dict[int, int] = {}
        same: dict[tuple[int, int], list[Any]] = {}  # -> [greenlets, their weight, the chain]
        chains_of: dict[int, tuple[Any, int, Chain]] = {}  # this census's, for the next
        hub = self._gevent()[0]
        threads: set[int] = set()

        def count(ident: int, g: Any, frame: Any, woken: Optional[Chain], noted: int) -> None:
            weight = weights.get(ident)
            if weight is None:
                weight = weights[ident] = self.weight(ident, now)
            if woken is None:
                cached = self.chains_of.get(id(g))
                lasti = frame.f_lasti
                if cached is not None and cached[0] is frame and cached[1] == lasti:
                    chain = cached[2]
                    chains_of[id(g)] = cached
                else:
                    chain = self._chain(frame, g.parent is None)
                    chains_of[id(g)] = (frame, lasti, chain)
            else:  # a woken greenlet's (_woken)
                chain = woken
            # A greenlet noted since the thread's last census waited since it was noted at most.
            # By the chain's id: equal chains are one object (_chain), and a tuple of tuples
            # is hashed anew at every lookup.
            acc = same.get((ident, id(chain)))
            if acc is None:
                acc = same[(ident, id(chain))] = [0, 0, chain]
            acc[0] += 1
            acc[1] += min(weight, max(0, now - noted))

        # The census samples the time its call was queued (_woken): a greenlet that was running
        # then and has switched out since is not counted as waiting.
        queued = _ext._python_tick_queued_ns()
        running_then = {s[6] for s in _last_switch.values() if s[0] > queued}
        noted_at: dict[int, int] = {}
        for ref, ident, noted in list(_known.values()):
            g = ref()
            if g is None or ident not in live:
                continue
            threads.add(ident)
            noted_at[id(g)] = noted
            frame = g.gr_frame
            if frame is None:
                continue  # running, finished, or not started
            if hub is not None and isinstance(g, hub):
                continue  # gevent's hub is switched out only while a greenlet runs
            if self._yields(frame) or id(g) in running_then:
                continue  # gives up its turn, and runs again next; or ran at the time sampled
            count(ident, g, frame, None, noted)
        for ident, g, chain in self._woken(live, hub, queued):
            count(ident, g, None, chain, noted_at.get(id(g), 0))
        self.chains_of = chains_of
        for (ident, _), (n, weight, chain) in same.items():
            if weight > 0:
                self.add(ident, chain, n, weight, now)
        # A thread with no greenlet waiting now starts its next weight from now too.
        for ident in threads.difference(weights):
            self.weight(ident, now)
        self.forget_threads_but(threads | set(weights))
        self.stats["greenlet_untracked"] = _untracked[0]
        return None

    def _woken(self, live: dict[int, Any], hub: Any, queued: int) -> list[tuple[int, Any, Chain]]:
        """The greenlets switched to since the call was queued that were not running then, as
        (thread ident, greenlet, the chain it had waited on).

        The main thread makes the call (python_tick.h) at its first bytecode after it was
        queued; the drain thread, once another thread lets the GIL go. Both moments follow
        wake-ups: a main thread blocked in epoll (gevent's hub) runs its next bytecode in the
        greenlet just woken, and a thread lets the GIL go in the socket call a greenlet makes
        once woken. Seen running then, such a greenlet would rarely be seen waiting (one that
        slept 80 ms at a time lost a third of its waits). So the census samples the time the
        call was queued: a thread's running greenlet switched to since then is counted where
        it waited, unless it was the one running then too. Where it waited: the code and line
        it resumed at and its caller's (recorded at the switch), under the thread's frames
        now from that caller outwards."""
        found = []
        for ident, top in live.items():
            switch = _last_switch.get(ident)
            if switch is None or switch[0] <= queued:
                continue  # no switch since the call was queued: the census sees it as it was
            _, target, code, lasti, caller, caller_lasti, running_then = switch
            if id(target) == running_then or code is None:
                continue
            if hub is not None and isinstance(target, hub):
                continue
            line = _line_at(code, lasti)
            if self._yields_at(code, line, top):
                continue
            resumed = [(code, line)]
            if caller is not None:
                resumed.insert(0, (caller, _line_at(caller, caller_lasti)))
            outer = _frames_outside(top, resumed[0][0])
            elements = [(f.f_code, f.f_lineno) for f in reversed(outer)] + resumed
            found.append((ident, target, self._finish(elements, target.parent is None)))
        return found

    def _yields_at(self, code: Any, line: int, top: Any) -> bool:
        """Whether `code` at `line` gives up its turn; a frame of `code` is looked for from
        `top` outwards only to learn what a gevent.sleep line is (sleep(0) and sleep(d) wait
        on different lines: learned once per line, as f_locals builds a dict of the frame's
        locals, ~1 us)."""
        _, sleep_code, idle_code = self._gevent()
        if code is idle_code:
            return True
        if code is not sleep_code:
            return False
        y = self.yielding_lines.get(line)
        if y is None:
            frame = top
            for _ in range(MAX_FRAMES):
                if frame is None or frame.f_code is code:
                    break
                frame = frame.f_back
            if frame is None:
                # Not learned yet, and its frame is not at hand (a woken greenlet that switched
                # out again): left out this once. Counted, a sleep(0) loop was taken for a
                # wait, a round's worth, once in ~8 runs under load.
                return True
            y = self.yielding_lines[line] = _seconds(frame.f_locals.get("seconds", 1)) <= 0
        return y

    def _yields(self, frame: Any) -> bool:
        """The frame gives up its turn (gevent.sleep(0), gevent.idle()), waiting for nothing."""
        return self._yields_at(frame.f_code, frame.f_lineno, frame)

    def _gevent(self) -> tuple[Any, Any, Any]:
        if self.gevent is None:
            hub_module = sys.modules.get("gevent.hub")
            if hub_module is None:
                return None, None, None  # not yet: looked up again at the next census
            found = (
                getattr(hub_module, "Hub", None),
                getattr(getattr(hub_module, "sleep", None), "__code__", None),
                getattr(getattr(hub_module, "idle", None), "__code__", None),
            )
            if None in found:
                # gevent.hub is being imported (a census is a pending call: it may run at any
                # bytecode of the import): kept only once whole. Kept half made, the hub was
                # counted waiting and sleep(0) was not known, for the whole session.
                return found
            self.gevent = found
        return self.gevent

    def _chain(self, frame: Any, is_main: bool) -> Chain:
        """The chain of a suspended greenlet's frames (_finish)."""
        elements: list[tuple[Any, int]] = []
        for _ in range(MAX_FRAMES):
            if frame is None:
                break
            elements.append((frame.f_code, frame.f_lineno))
            frame = frame.f_back
        elements.reverse()
        return self._finish(elements, is_main)

    def _finish(self, elements: list[tuple[Any, int]], is_main: bool) -> Chain:
        """`<greenlet> FUNCTION`, then (code, line) of each frame, outermost first; a main
        greenlet's without spprof's runner (the CLI's frames below the program)."""
        codes = self.codes
        inner: list[Element] = []
        for code, line in elements:
            codes[id(code)] = code
            inner.append((id(code), line))
        if is_main:
            cut = 0
            while cut < len(inner) - 1 and self._is_runner(inner[cut]):
                cut += 1
            chain: Chain = (GREENLET_PREFIX + "main", *inner[cut:])
        else:
            if len(elements) > 1 and is_greenlet_run(
                elements[0][0].co_filename, elements[0][0].co_name
            ):
                inner = inner[1:]  # pure-Python gevent: as compiled gevent, whose run is C
            chain = (self._head(inner), *inner)
        return self.interned.setdefault(chain, chain)

    def _is_runner(self, element: Element) -> bool:
        code_id = element[0]
        assert isinstance(code_id, int)
        r = self.runner.get(code_id)
        if r is None:
            r = self.runner[code_id] = is_runner_file(self.codes[code_id].co_filename)
        return r

    def _head(self, inner: list[Element]) -> str:
        """`<greenlet> FUNCTION`: the outermost function not gevent's own (a StreamServer's
        handler greenlet starts in gevent's _handle_and_close_when_done)."""
        for element in inner:
            code_id = element[0]
            assert isinstance(code_id, int)
            h = self.heads.get(code_id)
            if h is None:
                code = self.codes[code_id]
                if element is not inner[-1] and self._is_gevent(code.co_filename):
                    continue
                name = getattr(code, "co_qualname", code.co_name)
                h = self.heads[code_id] = GREENLET_PREFIX + name
            return h
        return GREENLET_PREFIX + "?"

    def _is_gevent(self, filename: str) -> bool:
        if self.gevent_dir is None:
            gevent = sys.modules.get("gevent")
            where = getattr(gevent, "__file__", None)
            if not where:
                return False
            self.gevent_dir = os.path.dirname(os.path.abspath(where)) + os.sep
        return filename.startswith(self.gevent_dir)


def _frames_outside(top: Any, code: Any) -> list[Any]:
    """A thread's frames, innermost first, outside the innermost frame of `code` (all of them,
    but spprof's own at the inner end, when none is)."""
    frames = []
    frame = top
    for _ in range(MAX_FRAMES):
        if frame is None:
            break
        frames.append(frame)
        frame = frame.f_back
    for i, f in enumerate(frames):
        if f.f_code is code:
            return frames[i + 1 :]
    i = 0
    while i < len(frames) and frames[i].f_code.co_filename.startswith(_SPPROF_DIR):
        i += 1  # the census's own frames, when it runs on this thread
    return frames[i:]


_SPPROF_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _line_at(code: Any, lasti: int) -> int:
    """The line of the instruction at byte offset `lasti` of `code`."""
    if lasti >= 0:
        co_lines = getattr(code, "co_lines", None)
        if co_lines is not None:  # 3.10+
            for start, end, line in co_lines():
                if start <= lasti < end and line is not None:
                    return int(line)
        else:  # 3.9
            import dis

            found = None
            for offset, line in dis.findlinestarts(code):
                if offset > lasti:
                    break
                found = line
            if found is not None:
                return int(found)
    return int(code.co_firstlineno)


def _seconds(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 1.0


def activate(census: Optional[Census]) -> None:
    """The census the trace functions note for (None: they only call on)."""
    _active_box[0] = census
    if census is None:
        _known.clear()
        _last_switch.clear()
        _untracked[0] = 0
