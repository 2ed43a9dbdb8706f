"""Waiting greenlets (issue 26, `--greenlets`): in wall mode every greenlet that has switched
out is in the profile, on its thread's track `THREAD greenlets`, rooted at its own function
(`<greenlet> FUNCTION`) and down to the line it switched out on, for the time it waited.

Before the census a waiting greenlet was on no stack: the main thread showed gevent's hub in
its loop, and the tests here that read the greenlet track fail (no such track). The cases run
tests/scripts/greenlet_waits.py and tests/scripts/gevent_service.py in their own interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import spprof
from conftest import SCRIPTS, run_python
from spprof import _ext
from spprof._greenlet_census import GREENLET_PREFIX, TRACK_SUFFIX, _line_at
from spprof.output import render
from spprof.output.report import summary
from test_formats_pprof import Decoded

SCRIPT = SCRIPTS / "greenlet_waits.py"
SERVICE = SCRIPTS / "gevent_service.py"
# The census gives each waiting greenlet the time since its thread's last census (50 ms): its
# error is about a census at each end of a wait that lasts the whole run (2 s); 10 % is the
# issue's bound.
TOLERANCE = 0.10
# Below what was measured, 20 %: a greenlet's own measurement runs until its wait call returns,
# and on a loaded machine its thread is often descheduled after the switch back to it, a
# time the census rightly counts as running. A loaded CI lane (3.12) measured the socket
# reader 11.5 % under (1.82 s of 2.05 s: ~12 ms in each of its 20 waits); the gevent service
# under pure-Python gevent with four busy loops beside a local CI run (load ~8 on 2 cores):
# 9-10 % under in 2 runs of 4. The bug these tests guard against lost a third.
UNDER = 0.20


def _close(got: float, measured: float) -> bool:
    return -UNDER * measured <= got - measured <= TOLERANCE * measured


def _marked_line(script: Path, marker: str) -> int:
    for n, text in enumerate(script.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# line: {marker}"):
            return n
    raise AssertionError(marker)


def _run(tmp_path: Path, case: str, mode: str = "wall") -> dict[str, Any]:
    pytest.importorskip("gevent")  # greenlet and gevent: the Makefile's DEV_DEPS
    out = tmp_path / "out.json"
    r = run_python(str(SCRIPT), case, mode, str(out))
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _waiting(samples: list[Any], script: Path) -> dict[tuple[str, str, int], int]:
    """Greenlet-track weight by (track, the greenlet's function, the script's innermost line).
    The function without its qualname's outer parts: 3.9 and 3.10 codes have no co_qualname."""
    out: dict[tuple[str, str, int], int] = defaultdict(int)
    for thread, weight, frames in samples:
        if thread.endswith(TRACK_SUFFIX):
            assert frames[0][0].startswith(GREENLET_PREFIX), frames[0]
            function = frames[0][0][len(GREENLET_PREFIX) :].rsplit(".", 1)[-1]
            own = [f for f in frames if f[1] == str(script)]
            out[(thread, function, own[-1][2] if own else 0)] += weight
    return dict(out)


def _assert_as_measured(data: dict[str, Any], track: str, names: tuple[str, ...]) -> None:
    waiting = _waiting(data["samples"], SCRIPT)
    for name in names:
        measured = data["waited"][name] * 1e9
        key = (track, name, _marked_line(SCRIPT, f"{name} waits"))
        got = waiting.get(key, 0)
        assert _close(got, measured), (name, got / 1e9, measured, waiting)


def test_each_waiting_gevent_greenlet_gets_its_time_on_its_wait_line(tmp_path: Path) -> None:
    """gevent imported after profiling began (as under `spprof --greenlets app.py`): sleeper
    (gevent.sleep), getter (a Queue's get) and reader (a socket recv over 127.0.0.1) each have,
    rooted at their own function, the time they measured on the line they wait on. The census
    samples the time its call was queued (Census._woken): without that, sleeper, seen running
    at each wake-up, lost a third of its time."""
    data = _run(tmp_path, "gevent")
    _assert_as_measured(data, "MainThread" + TRACK_SUFFIX, ("sleeper", "getter", "reader"))
    assert data["stats"]["greenlet_censuses"] >= 20  # every 50 ms over 2 s
    heads = {f[0][0] for t, _, f in data["samples"] if t.endswith(TRACK_SUFFIX)}
    # cruncher yields with gevent.sleep(0): it waits for nothing; the hub waits while others run
    assert not any("cruncher" in h or h.endswith("Hub.run") for h in heads), heads
    # its CPU is on its thread, under its own function, not under the hub's run
    running = defaultdict(int)
    for thread, weight, frames in data["samples"]:
        if thread == "MainThread" and frames:
            running[frames[0][0]] += weight
    assert running["cruncher"] >= 0.5 * max(running.values()), dict(running)


def test_plain_greenlets_in_a_thread_started_later(tmp_path: Path) -> None:
    """A scheduler of plain greenlets in a threading.Thread started after profiling began (its
    trace function set by the thread-start hook): napper and listener have their waits on
    `scheduler greenlets`; the scheduler itself (the thread's main greenlet, in select()) is the
    thread's samples, not a wait."""
    data = _run(tmp_path, "raw")
    _assert_as_measured(data, "scheduler" + TRACK_SUFFIX, ("napper", "listener"))
    mains = sum(
        w for t, w, f in data["samples"] if t.endswith(TRACK_SUFFIX) and f[0][0].endswith(" main")
    )
    assert mains <= 0.1e9, mains / 1e9


def test_cpu_mode_adds_no_greenlet_track(tmp_path: Path) -> None:
    """The census is wall time: in cpu mode nothing waits, and greenlet switches are not traced."""
    data = _run(tmp_path, "gevent", mode="cpu")
    assert not any(t.endswith(TRACK_SUFFIX) for t, _, _ in data["samples"])
    assert "greenlet_censuses" not in data["stats"]


@pytest.mark.parametrize(
    "pure_python", [False, True], ids=["compiled-gevent", "pure-python-gevent"]
)
def test_a_gevent_service_and_its_clients_under_the_cli(tmp_path: Path, pure_python: bool) -> None:
    """`spprof --mode wall --greenlets service.py`: a monkey-patched StreamServer whose handler
    waits 50 ms in slow_query per request, and ten client greenlets waiting for answers. The
    handler greenlets are rooted at the program's handler (not gevent's wrapper), slow_query's
    sleep line and the clients' recv line each have what the program measured, and `report`
    lists both greenlets and both lines.

    Pure-Python gevent (PURE_PYTHON=1, as on PyPy) runs every greenlet under a Python
    Greenlet.run frame, compiled gevent's is C: no stack, running or waiting, has it at its
    root (before, every greenlet's running samples were rooted at `run`)."""
    pytest.importorskip("gevent")
    out, measured_file = tmp_path / "svc.spprof", tmp_path / "measured.json"
    r = run_python(
        "-m", "spprof", "-q", "--mode", "wall", "--greenlets", "-o", str(out), str(SERVICE),
        str(measured_file), env={"PURE_PYTHON": "1"} if pure_python else None,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    measured = json.loads(measured_file.read_text())
    profile = spprof.load(out)
    greenlet_py = os.path.join("gevent", "greenlet.py")
    # A truncated stack (a torn capture) lost its root side: its first frames say nothing of
    # the root, and one was seen starting at Greenlet.run under `<truncated>` (3.12, once).
    gevent_roots = [
        s.frames[:2]
        for s in profile.samples
        if not s.truncated
        and any(f.filename.endswith(greenlet_py) and f.function_name == "run" for f in s.frames[:2])
    ]
    assert not gevent_roots
    if pure_python:  # the run did go through pure-Python gevent
        assert any(f.filename.endswith(greenlet_py) for s in profile.samples for f in s.frames)
    by: dict[tuple[str, str, int], int] = defaultdict(int)
    for s in profile.samples:
        if s.thread_name == "MainThread" + TRACK_SUFFIX:
            own = [f for f in s.frames if f.filename == str(SERVICE)]
            if own:  # not gevent's own greenlets (pure-Python gevent has a few)
                by[(s.frames[0].function_name, own[-1].function_name, own[-1].lineno)] += (
                    s.weight_ns
                )
    for head, fn, marker in (
        ("handle", "slow_query", "slow_query waits"),
        ("client", "client", "client waits"),
    ):
        got = by.get((GREENLET_PREFIX + head, fn, _marked_line(SERVICE, marker)), 0)
        want = measured[fn] * 1e9
        assert _close(got, want), (fn, got / 1e9, want / 1e9, dict(by))
    pprof = Decoded(render(profile, "pprof"))
    named = {labels.get("greenlet") for _, _, labels in pprof.samples}
    assert {"handle", "client", "main"} <= named, named  # each waiting greenlet's function
    text = summary(profile)
    assert "Top greenlets by wall time" in text
    table = text.split("Top greenlets by wall time")[1]
    rows = [line.split()[-1] for line in table.splitlines()[2:4]]
    assert sorted(rows) == ["client", "handle"], table
    assert f"gevent_service.py:{_marked_line(SERVICE, 'slow_query waits')})" in table


def test_the_trace_chains_to_the_one_it_replaces_and_is_put_back() -> None:
    """The program's own greenlet trace function (gevent's monitor thread sets one) sees every
    switch while spprof's is set, and is the one set again at stop."""
    pytest.importorskip("greenlet")
    script = """
import greenlet, spprof
seen = []
def theirs(event, args):
    seen.append(event)
greenlet.settrace(theirs)
spprof.start(mode="wall", greenlets=True)
ours = greenlet.gettrace()
g = greenlet.greenlet(lambda: greenlet.getcurrent().parent.switch())
g.switch(); g.switch()
spprof.stop()
print(ours is not theirs, greenlet.gettrace() is theirs, seen.count("switch"))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "4"], r.stdout


def test_the_trace_notes_each_greenlet_switching_out_once() -> None:
    """greenlet_trace (C): a switch records (time, target, the code and f_lasti of the target's
    frame and of its caller, the id of the greenlet running when the periodic call was queued)
    and notes the origin once; inactive, it only calls on."""
    greenlet = pytest.importorskip("greenlet")
    known: dict[int, Any] = {}
    last: dict[int, Any] = {}
    noted: list[Any] = []

    def note(origin: Any, ident: int) -> None:
        noted.append((origin, ident))
        known[id(origin)] = origin

    active: list[Any] = [None]
    trace = _ext.greenlet_trace((7, None, known, last, note, active))
    assert _ext.greenlet_trace_state(trace)[0] == 7
    assert _ext.greenlet_trace_state(len) is None
    previous = greenlet.settrace(trace)
    try:
        main = greenlet.getcurrent()
        child = greenlet.greenlet(lambda: main.switch())
        child.switch()  # main -> child, child -> main
        assert noted == []  # inactive
        active[0] = True
        child.switch()  # main -> child (child ends, back to main)
    finally:
        greenlet.settrace(previous)
    assert [o for o, _ in noted] == [main, child] and {i for _, i in noted} == {7}
    at, target, code, lasti, caller, caller_lasti, running_then = last[7]
    # the last switch: child ended, back to main, which resumes in this function, called by
    # pytest's machinery; no frame is kept (a frame would keep its locals alive)
    assert target is main and code is sys._getframe().f_code
    assert caller is sys._getframe(1).f_code and caller_lasti >= 0
    assert not any(type(x).__name__ == "frame" for x in last[7])
    # its instruction then is the call of child.switch(): the census turns it into that line
    switch_line = next(
        n
        for n, t in enumerate(Path(__file__).read_text().splitlines(), 1)
        if t.strip().startswith("child.switch()  # main -> child (child ends")
    )
    assert _line_at(code, lasti) == switch_line
    assert running_then == id(main)  # no call queued in this test: the first switch's origin
    assert at > 0


def test_a_frame_that_switched_is_freed_when_it_returns() -> None:
    """The trace records where each switch resumed as code and offset, not as the frame: a
    function whose frame resumed from a switch, and that returns with no switch after, frees
    its locals as it returns (a file it drops is closed then, not at the next switch). The
    first version kept the frame: the local stayed alive."""
    pytest.importorskip("greenlet")
    script = """
import gc, weakref, greenlet, spprof
spprof.start(mode="wall", greenlets=True)
class Token:
    pass
def waits_once():
    token = Token()
    other = greenlet.greenlet(lambda: greenlet.getcurrent().parent.switch())
    other.switch()  # out and back: this frame resumes here
    return weakref.ref(token), other
ref, other = waits_once()
alive = ref() is not None
spprof.stop()
print(alive)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False"], r.stdout


def test_an_ended_threads_last_greenlet_is_not_kept() -> None:
    """The trace keeps each thread's last switch, whose target is that thread's greenlet then.
    Once the thread has ended, the next census drops the record, so the greenlet goes with
    its thread; before, it was kept to the session's stop."""
    pytest.importorskip("greenlet")
    r = subprocess.run(
        [sys.executable, str(SCRIPTS / "greenlet_dead_thread.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["freed"], r.stdout


def test_gevent_hub_met_half_imported_is_looked_up_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A census is a pending call: it can run in the middle of `import gevent`, when
    gevent.hub is in sys.modules without its Hub, sleep and idle yet. What it finds then is
    not kept. Before, it was kept for the whole session: the hub was counted waiting
    (`<greenlet> Hub.run`) and gevent.sleep(0) was not known, 2 runs in 6 under load."""
    import types

    from spprof._greenlet_census import Census

    hub_module = types.ModuleType("gevent.hub")
    monkeypatch.setitem(sys.modules, "gevent.hub", hub_module)
    census = Census(clock=lambda: 0, start_ns=0)
    assert census._gevent() == (None, None, None)  # the import has not got that far

    class Hub:
        pass

    def sleep(seconds: float = 0) -> None: ...

    def idle() -> None: ...

    hub_module.Hub, hub_module.sleep, hub_module.idle = Hub, sleep, idle  # type: ignore[attr-defined]
    assert census._gevent() == (Hub, sleep.__code__, idle.__code__)
