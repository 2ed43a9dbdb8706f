"""Waiting asyncio tasks (issue 26, wall mode): with async_tasks=True (`--async`) in wall mode,
every task that waits is in the profile, on its loop thread's task track `THREAD asyncio
tasks`, by its await chain down to the line it waits on, and under the task that awaits it.

Before the census existed, a task waiting on an await was on no stack: the task track did not
exist, and every test here that reads it fails (no weight at all on the awaiting lines).
The end-to-end cases run tests/scripts/async_waits.py in their own interpreter.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import spprof
from conftest import SCRIPTS, free_port, get_200s, run_python
from spprof._async_census import TRACK_SUFFIX, Census
from spprof._model import ProfileData, ThreadRecord
from spprof.output import render
from spprof.output.report import summary
from test_formats_pprof import Decoded

SCRIPT = SCRIPTS / "async_waits.py"
# The census adds the time since its last round (50 ms) to each waiting task: its error is
# at most a round at each end of a wait that lasts the whole run (2 s), ~5 %; 10 % is the
# issue's bound.
TOLERANCE = 0.10


def _marked_line(marker: str) -> int:
    """The script's line carrying `# line: MARKER`."""
    for n, text in enumerate(SCRIPT.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# line: {marker}"):
            return n
    raise AssertionError(marker)


def _run(tmp_path: Path, case: str, mode: str = "wall") -> dict[str, Any]:
    out = tmp_path / "out.json"
    r = run_python(str(SCRIPT), case, mode, str(out))
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _own(frames: list[list[Any]]) -> list[list[Any]]:
    """The script's frames and the synthetic <task> ones, outermost first."""
    return [f for f in frames if f[1] == str(SCRIPT) or f[0].startswith("<task> ")]


def _waiting_by_line(samples: list[Any]) -> dict[tuple[str, int], int]:
    """Task-track weight by the innermost line of the script (the line that awaits)."""
    out: dict[tuple[str, int], int] = defaultdict(int)
    for thread, weight, frames in samples:
        if thread.endswith(TRACK_SUFFIX):
            own = [f for f in frames if f[1] == str(SCRIPT)]
            out[(own[-1][0], own[-1][2])] += weight
    return dict(out)


def _assert_waits_as_measured(data: dict[str, Any]) -> None:
    """sleeper's, getter's and reader's await lines have on the task track, within TOLERANCE,
    the time each task measured its awaits took."""
    by_line = _waiting_by_line(data["samples"])
    for task in ("sleeper", "getter", "reader"):
        measured = data["waited"][task] * 1e9
        got = by_line.get((task, _marked_line(f"{task} awaits")), 0)
        assert abs(got - measured) <= TOLERANCE * measured, (task, got / 1e9, measured, by_line)


def test_each_waiting_task_gets_the_time_it_measured_on_its_await_line(tmp_path: Path) -> None:
    """sleeper (asyncio.sleep), getter (Queue.get) and reader (a socket read): each one's
    await line has, on the task track, the time the task measured its awaits took."""
    data = _run(tmp_path, "waits")
    _assert_waits_as_measured(data)
    assert data["stats"]["async_censuses"] >= 20  # every 50 ms over 2 s, the GIL busy or not


def test_uvloop_tasks_are_found_though_its_loop_has_no_python_frame(tmp_path: Path) -> None:
    """uvloop's loop runs in C: no run_forever frame marks its thread. The census learns it
    as the main thread's running loop when it runs there (a pending call), and the waits are
    as the program measured them. Before: no task track at all."""
    pytest.importorskip("uvloop")  # pinned in the Makefile's DEV_DEPS
    data = _run(tmp_path, "uvloop")
    _assert_waits_as_measured(data)


def test_uvloop_in_another_thread_is_found_by_the_runner_that_runs_it(tmp_path: Path) -> None:
    """uvloop.run in a threading.Thread: no run_forever frame and not the main thread's loop;
    the census finds it as the loop of the asyncio.Runner on the thread's stack (uvloop.run's
    own frame on 3.9/3.10), and the waits are on `loop asyncio tasks` as measured. Before: no
    task track."""
    pytest.importorskip("uvloop")
    data = _run(tmp_path, "uvloop_thread")
    _assert_waits_as_measured(data)
    assert {t for t, _, _ in data["samples"] if t.endswith(TRACK_SUFFIX)} == {"loop" + TRACK_SUFFIX}


def test_a_task_that_yields_only_to_run_again_is_not_waiting(tmp_path: Path) -> None:
    """cruncher burns CPU between `await asyncio.sleep(0)`: it waits for its turn, not for an
    await. Its time is its thread's samples; the task track has (almost) none of it.

    Without the ready-queue check every census the main thread makes (between two steps,
    when cruncher is never the running task) charged cruncher the whole round: ~2 s."""
    data = _run(tmp_path, "waits")
    waiting = running = 0
    for thread, weight, frames in data["samples"]:
        if frames and frames[0][0] == "<task> cruncher":
            if thread.endswith(TRACK_SUFFIX):
                waiting += weight
            else:
                running += weight
    assert running >= 1.0e9, running  # most of its 2 s on the CPU
    assert waiting <= 0.1 * running, (waiting, running)


def test_waiting_tasks_sit_under_the_tasks_that_await_them(tmp_path: Path) -> None:
    """gather's children under the gathering task, a TaskGroup's under its owner (3.11+), an
    awaited task under its awaiter: chains of <task> frames, each leaf with its HOLD second."""
    data = _run(tmp_path, "nested")
    chains: dict[tuple[str, ...], int] = defaultdict(int)
    for thread, weight, frames in data["samples"]:
        if thread.endswith(TRACK_SUFFIX):
            chains[tuple(f"{f[0]}:{f[2]}" if f[2] else f[0] for f in _own(frames))] += weight
    main = ("<task> nested", f"nested:{_marked_line('main awaits')}")
    leaf = ("<task> leaf", f"leaf:{_marked_line('leaf awaits')}")
    expected = {
        # two leaves gathered: twice the hold
        (*main, "<task> gatherer", f"gatherer:{_marked_line('gatherer awaits')}", *leaf): 2,
        (*main, "<task> awaiter", f"awaiter:{_marked_line('awaiter awaits')}", *leaf): 1,
    }
    if sys.version_info >= (3, 11):
        expected[(*main, "<task> grouper", f"grouper:{_marked_line('grouper awaits')}", *leaf)] = 1
    for chain, holds in expected.items():
        got = chains.get(chain, 0)
        assert abs(got - holds * 1e9) <= 0.15 * holds * 1e9, (chain, got / 1e9, dict(chains))
    # the parent itself waited as long, on its own line
    assert abs(chains.get(main, 0) - 1e9) <= 0.15e9, dict(chains)


def test_cpu_mode_has_no_task_track(tmp_path: Path) -> None:
    """Waiting takes no CPU: in cpu mode the census learns the tasks' names only
    (test_task_names.py), no task is counted waiting and no task track exists."""
    data = _run(tmp_path, "waits", mode="cpu")
    assert not [s for s in data["samples"] if s[0].endswith(TRACK_SUFFIX)]
    assert data["stats"]["async_censuses"] >= 1  # names only, at most every 100 ms
    assert data["stats"]["async_waiting_seen"] == 0


def test_ctrl_c_during_a_census_reaches_the_program(tmp_path: Path) -> None:
    """A census the main thread makes (a pending call) can be where CPython runs the SIGINT
    handler; the KeyboardInterrupt it raises is the program's and must reach it. A stand-in
    for the census takes 40 ms of every 50, so each of the 5 SIGINTs is likely to land in it:
    the old trampoline swallowed it there and the program ran on until killed (4 of 4 runs
    failed before the fix)."""
    for _ in range(5):
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), "sigint", "wall", str(tmp_path / "unused")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
            proc.wait()
        assert proc.returncode == 0, err
        assert out.strip() == "interrupted", (out, err)


# ---- the census alone, driven by hand against a loop in a thread -----------------------------


class _Loop:
    """An event loop in a thread of its own, running `coro_fn()` until stop()."""

    def __init__(self, coro_fn: Any, pure_python_tasks: bool = False) -> None:
        self.ready = threading.Event()
        self.loop: Any = None
        self.task: Any = None

        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            await coro_fn(self.ready)

        def run() -> None:
            loop = asyncio.new_event_loop()
            if pure_python_tasks:  # asyncio's Python Task and Future, not _asyncio's
                loop.set_task_factory(lambda lp, c: asyncio.tasks._PyTask(c, loop=lp))  # type: ignore[attr-defined]
            self.task = loop.create_task(main())
            try:
                loop.run_until_complete(self.task)
            except asyncio.CancelledError:
                pass  # stop()
            finally:
                loop.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def stop(self) -> None:
        """Cancel the main task (and with it the tasks it gathers) and wait for the end."""
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(10)


async def _two_waiters(ready: threading.Event) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()

    async def on_queue() -> None:
        await queue.get()

    async def on_sleep() -> None:
        await asyncio.sleep(60)

    tasks = [asyncio.create_task(on_queue()), asyncio.create_task(on_sleep())]
    await asyncio.sleep(0)  # both reach their awaits
    ready.set()
    await asyncio.gather(*tasks)


def _profile_of(ident: int) -> ProfileData:
    thread = ThreadRecord(
        serial=0, ident=ident, native_id=1234, name="Loop", cpu_ns=0, registered_ns=0, ended_ns=0
    )
    return ProfileData(
        interval_ms=10.0,
        mode="wall",
        duration_ns=10**12,
        start_ns=0,
        frame_table=[],
        stacks=[],
        rows=b"",
        thread_table=[thread],
        dropped_count=0,
        metadata={"async_tasks": True},
    )


@pytest.mark.parametrize("pure_python_tasks", [False, True], ids=["c-tasks", "python-tasks"])
def test_a_census_weighs_each_waiting_task_by_the_time_since_the_last(
    pure_python_tasks: bool,
) -> None:
    """Rounds at t = 1, 2, 3 s of a made-up clock: the first round counts one period for each
    task (nothing before it is known), the next two a second each; each chain ends in the
    coroutine that awaits (Queue.get, sleep), below the task's own line."""
    now = [10**9]
    census = Census(clock=lambda: now[0], start_ns=0)
    loop = _Loop(_two_waiters, pure_python_tasks)
    try:
        for t in (1, 2, 3):
            now[0] = t * 10**9
            census()
    finally:
        loop.stop()
    assert census.stats["async_census_errors"] == 0
    profile = _profile_of(loop.thread.ident or 0)
    stats = census.add_to(profile, 0, 10 * 10**9)
    assert stats["async_waiting_samples"] == 2 * 3 + 3  # two tasks, and main, each round
    track = profile.thread_table[1]
    assert (track.name, track.task_track, track.native_id) == ("Loop" + TRACK_SUFFIX, True, 1234)
    weights: dict[tuple[str, ...], int] = defaultdict(int)
    for _, weight, stack, serial, _ in profile.iter_rows():
        assert serial == 1
        names = [_short(profile.frame_table[fid].function_name) for fid in profile.stacks[stack]]
        at = max(i for i, n in enumerate(names) if n.startswith("<task> "))
        weights[tuple(names[:1] + names[at : at + 2] + names[-1:])] += weight
    period = census.period_ns
    # gather's children under the task that gathers them
    main = "<task> main"
    assert weights[(main, "<task> on_queue", "on_queue", "get")] == period + 2 * 10**9
    assert weights[(main, "<task> on_sleep", "on_sleep", "sleep")] == period + 2 * 10**9
    assert weights[(main, main, "main", "_two_waiters")] == period + 2 * 10**9


def _short(name: str) -> str:
    """A frame's name without its qualname's outer parts (3.11+ has qualnames, 3.9-3.10 not)."""
    prefix = "<task> " if name.startswith("<task> ") else ""
    return prefix + name[len(prefix) :].rsplit(".", 1)[-1]


def test_a_window_gets_the_part_of_each_row_inside_it_and_strangers_are_counted() -> None:
    """A window (record --pid, an endpoint request) takes the share of each row that falls
    in its span; rows of a thread the profile does not have are counted, not placed."""
    now = [10**9]
    census = Census(clock=lambda: now[0], start_ns=0)
    loop = _Loop(_two_waiters)
    try:
        census()
        now[0] = 5 * 10**9
        census()
    finally:
        loop.stop()
    # The second round stands for [1 s, 5 s]: a window on [4 s, 6 s] gets a quarter of it,
    # one second for each of the three waiting tasks; the first round is outside it.
    window = _profile_of(loop.thread.ident or 0)
    census.add_to(window, 4 * 10**9, 6 * 10**9)
    assert [w for _, w, _, _, _ in window.iter_rows()] == [10**9] * 3
    stranger = _profile_of(12345)  # the loop's thread is not one of this profile's
    stats = census.add_to(stranger, 0, 10 * 10**9)
    assert (stats["async_waiting_samples"], stats["async_waiting_unplaced"]) == (0, 6)
    assert len(stranger.thread_table) == 1


def test_a_ready_callback_of_an_unhashable_object_does_not_stop_the_census() -> None:
    """`loop.call_soon(a_list.append, x)` puts a handle whose callback's __self__ is a list in
    the ready queue: the census tells ready tasks apart by id, not by hashing (a set of those
    objects raised TypeError, and every census of that loop was lost). A task just created
    is ready too: not waiting."""
    loop = asyncio.new_event_loop()
    try:
        items: list[int] = []
        loop.call_soon(items.append, 1)
        task = loop.create_task(asyncio.sleep(1))
        census = Census(clock=lambda: 10**9, start_ns=0)
        census._tasks(asyncio, loop, 1, 10**9, 10**9)
        assert census.stats["async_waiting_seen"] == 0  # the task's first step is ready
        task.cancel()
        loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
    finally:
        loop.close()


@pytest.mark.parametrize("pure_python_tasks", [False, True], ids=["c-tasks", "python-tasks"])
def test_a_task_woken_by_its_future_is_still_waiting_on_its_await_line(
    pure_python_tasks: bool,
) -> None:
    """A census between the moment a task's future completes and the task's next step finds
    the task's wakeup in the ready queue: it waited on its await line the whole round, and
    is counted there. A task that yielded with sleep(0) (its step is ready) is not waiting.

    Before, both were skipped as ready, and a task woken while another held the loop lost
    the whole round: CI's `sleeper` lost 50-200 ms of 2 s, 1 run in 10 under load."""
    loop = asyncio.new_event_loop()
    if pure_python_tasks:
        loop.set_task_factory(lambda lp, c: asyncio.tasks._PyTask(c, loop=lp))  # type: ignore[attr-defined]
    future = loop.create_future()

    async def woken() -> None:
        await future

    async def yielder() -> None:
        while True:
            await asyncio.sleep(0)

    tasks = [loop.create_task(woken()), loop.create_task(yielder())]
    try:
        loop.run_until_complete(asyncio.sleep(0))  # both run a step: one awaits, one yields
        future.set_result(None)  # woken's wakeup is ready now, beside yielder's step
        census = Census(clock=lambda: 10**9, start_ns=0)
        census._tasks(asyncio, loop, 1, 10**9, 10**9)
        assert census.stats["async_census_errors"] == 0
        heads = [chain[0] for chain in census.chain_list]
        assert heads == ["<task> " + getattr(woken.__code__, "co_qualname", "woken")]
        line = woken.__code__.co_firstlineno + 1
        assert census.chain_list[0][-1] == (id(woken.__code__), line)
    finally:
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.close()


@pytest.mark.parametrize("pure_python_tasks", [False, True], ids=["c-tasks", "python-tasks"])
def test_the_task_running_the_census_is_not_waiting(pure_python_tasks: bool) -> None:
    """A census the main thread makes between two bytecodes of a task (a pending call) runs
    inside that task: it is running, not waiting. On 3.14+ `asyncio.current_task()` returns
    None inside a pure-Python task (asyncio.tasks._PyTask): before, that task was counted
    waiting on the line that called the census, beside its own running samples."""
    loop = asyncio.new_event_loop()
    if pure_python_tasks:
        loop.set_task_factory(lambda lp, c: asyncio.tasks._PyTask(c, loop=lp))  # type: ignore[attr-defined]
    census = Census(clock=lambda: 10**9, start_ns=0)

    async def runs_the_census() -> None:
        census._tasks(asyncio, loop, 1, 10**9, 10**9)

    try:
        loop.run_until_complete(loop.create_task(runs_the_census()))
    finally:
        loop.close()
    assert census.stats["async_census_errors"] == 0
    assert census.stats["async_waiting_seen"] == 0, census.chain_list


def test_formats_show_the_task_track_as_a_thread_of_its_own() -> None:
    """Flame-graph formats (speedscope) get the track as its own profile; gecko as a thread of
    its own after the loop's; chrome as lanes, one per chain waiting at once, each waiter's
    chain a run of X events over the time it waited, and a counter of waiters. pprof labels
    each sample with its innermost task."""
    now = [10**9]
    census = Census(clock=lambda: now[0], start_ns=0)
    loop = _Loop(_two_waiters)
    try:
        census()
        now[0] = 3 * 10**9
        census()
    finally:
        loop.stop()
    profile = _profile_of(loop.thread.ident or 0)
    census.add_to(profile, 0, 10 * 10**9)
    doc = json.loads(render(profile, "speedscope"))
    assert [p["name"] for p in doc["profiles"]] == [f"Loop{TRACK_SUFFIX} (tid 1234)"]

    chrome = json.loads(render(profile, "chrome"))
    events = chrome["traceEvents"]
    lanes = {
        e["tid"]: e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name" and TRACK_SUFFIX in e["args"]["name"]
    }
    assert sorted(lanes.values()) == [f"Loop{TRACK_SUFFIX} #{i}" for i in (1, 2, 3)]
    # Each lane: one run from the first census's round (0.95 s: one 50 ms period before
    # 1 s, nothing before it is known) to the last census (3 s), rooted at <task> main.
    roots, leaves = set(), set()
    for tid in lanes:
        spans = [e for e in events if e["ph"] == "X" and e["tid"] == tid]
        assert spans and all(
            (e["ts"], e["ts"] + e["dur"]) == (950_000.0, 3_000_000.0) for e in spans
        )
        heads = [_short(e["name"]) for e in spans if e["name"].startswith("<task> ")]
        roots.add(heads[0])  # parents before children: the lane's outermost task first
        leaves.add(heads[-1])
    assert roots == {"<task> main"}
    assert leaves == {"<task> main", "<task> on_queue", "<task> on_sleep"}
    counter = [(e["ts"], e["args"]["waiting"]) for e in events if e["ph"] == "C"]
    assert counter == [(950_000.0, 3.0), (3_000_000.0, 0.0)]
    assert chrome["otherData"]["task_runs_left_out"] == 0

    gecko = json.loads(render(profile, "gecko"))
    # the loop thread (no samples of its own here), then its task track: 3 chains x 2 rows
    threads = [(t["name"], t["samples"]["length"]) for t in gecko["threads"]]
    assert threads == [("Loop", 0), (f"Loop{TRACK_SUFFIX}", 6)]
    assert round(sum(gecko["threads"][1]["samples"]["weight"])) == 3 * (50 + 2000)
    assert [t.task_track for t in profile.threads] == [False, True]
    pprof = Decoded(render(profile, "pprof"))
    tasks = {labels["task"].rsplit(".", 1)[-1] for _, _, labels in pprof.samples}
    assert tasks == {"main", "on_queue", "on_sleep"}  # the innermost task of each stack
    collapsed = render(profile, "collapsed", thread_roots=True).decode()
    assert f"Loop{TRACK_SUFFIX}" in collapsed and "on_sleep" in collapsed
    assert f"Loop{TRACK_SUFFIX}".encode() in render(profile, "html")


def test_report_lists_tasks_and_the_lines_they_waited_on() -> None:
    """`spprof report`: the tasks by wall time (running + waiting) and the awaiting lines
    (the program's innermost line, not asyncio's), each with its seconds."""
    now = [10**9]
    census = Census(clock=lambda: now[0], start_ns=0)
    loop = _Loop(_two_waiters)
    try:
        census()
        now[0] = 3 * 10**9
        census()
    finally:
        loop.stop()
    profile = _profile_of(loop.thread.ident or 0)
    census.add_to(profile, 0, 10 * 10**9)
    text = summary(profile)
    tasks = text[text.index("Top asyncio tasks") :].splitlines()
    assert (
        " ".join(tasks[1].split())
        == "TOTAL RUNNING WAITING TASK (its name, or its outermost coroutine)"
    )
    rows = {r.split()[-1].rsplit(".", 1)[-1]: r.split()[:3] for r in tasks[2:5]}
    assert rows["on_queue"] == rows["on_sleep"] == ["2.05s", "0.00s", "2.05s"]
    lines = text[text.index("Top lines tasks waited on") :].splitlines()[2:5]
    on_sleep = next(r for r in lines if "on_sleep" in r)
    assert on_sleep.split()[0] == "2.05s"
    assert f"test_async_census.py:{_two_waiters_line('asyncio.sleep(60)')}" in on_sleep


def _two_waiters_line(text: str) -> int:
    return next(n for n, t in enumerate(Path(__file__).read_text().splitlines(), 1) if text in t)


# ---- a real server -------------------------------------------------------------------------

UVICORN_APP = """
import asyncio


async def db_query():
    await asyncio.sleep(0.08)  # line: db_query awaits


async def app(scope, receive, send):
    assert scope["type"] == "http"
    await db_query()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})
"""

FASTAPI_APP = """
import asyncio

from fastapi import FastAPI

app = FastAPI()


async def db_query():
    await asyncio.sleep(0.08)  # line: db_query awaits


@app.get("/")
async def slow():
    await db_query()
    return {"ok": True}
"""

AIOHTTP_APP = """
import asyncio

from aiohttp import web


async def db_query():
    await asyncio.sleep(0.08)  # line: db_query awaits


async def slow(request):
    await db_query()
    return web.Response(text="ok")


def init(argv):
    app = web.Application()
    app.router.add_get("/", slow)
    return app
"""

# (the app's source, what the CLI runs after -m, the module each needs)
SERVERS = {
    "uvicorn": (UVICORN_APP, ["uvicorn", "app:app", "--log-level", "warning"], "uvicorn"),
    "fastapi": (FASTAPI_APP, ["uvicorn", "app:app", "--log-level", "warning"], "fastapi"),
    "aiohttp": (AIOHTTP_APP, ["aiohttp.web", "-H", "127.0.0.1", "app:init"], "aiohttp"),
}


@pytest.mark.skipif(sys.version_info < (3, 10), reason="the servers' pins need 3.10 (Makefile)")
@pytest.mark.parametrize("server", sorted(SERVERS))
def test_a_servers_endpoint_await_line_gets_its_share(server: str, tmp_path: Path) -> None:
    """`spprof --mode wall --async -m uvicorn app:app` (a raw ASGI app, and FastAPI's), and
    `-m aiohttp.web`: 20 requests one after the other, each awaiting db_query's 80 ms sleep:
    that line has 20 x 80 ms on the task track. Before the census: 0 % of samples contained
    db_query (the issue's FastAPI run)."""
    source, run, needs = SERVERS[server]
    pytest.importorskip(needs)  # the Makefile's DEV_DEPS pin each
    (tmp_path / "app.py").write_text(source)
    port = free_port()
    out = tmp_path / "server.spprof"
    env = dict(os.environ)
    env.pop("SPPROF_DEBUG", None)
    cmd = [sys.executable, "-m", "spprof", "-q", "--mode", "wall", "--async", "-o", str(out)]
    cmd += ["-m", *run, "--port" if run[0] == "uvicorn" else "-P", str(port)]
    server_process = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert get_200s(port, 20) == 20, f"{server} did not answer"
    finally:
        server_process.terminate()
        _, stderr = server_process.communicate(timeout=60)
    # uvicorn re-raises the SIGTERM it handled; aiohttp ends on it with 0
    assert server_process.returncode in (0, -15), stderr
    line = next(n for n, t in enumerate(source.splitlines(), 1) if t.endswith("db_query awaits"))
    profile = spprof.load(out)
    on_line = sum(
        s.weight_ns
        for s in profile.samples
        if s.thread_name.endswith(TRACK_SUFFIX)
        and any(f.function_name == "db_query" and f.lineno == line for f in s.frames)
    )
    expected = 20 * 0.08e9
    assert 0.8 * expected <= on_line <= 1.25 * expected, (on_line / 1e9, expected / 1e9)
