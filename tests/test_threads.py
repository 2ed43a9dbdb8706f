"""Every Python thread is sampled, with its name and its CPU time, however it was made."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import spprof
import workloads as w
from conftest import EMULATED, run_python, samples_in

CPU_SECONDS = 0.6


def _measured_worker(started: threading.Event, results: dict, key: str) -> None:
    started.wait()
    t0 = time.thread_time()
    w.spin(CPU_SECONDS)
    results[key] = (
        time.thread_time() - t0,
        threading.get_ident(),
        threading.get_native_id(),
        threading.current_thread().name,
    )


def _pool_task(started: threading.Event, results: dict, key: str) -> None:
    _measured_worker(started, results, key)


def _c_thread_body(results: dict) -> None:
    # Runs on a thread made by pthread_create; ctypes gives it a thread state through
    # PyGILState_Ensure. Sleep first so the drain's scan finds it before the CPU work.
    time.sleep(0.5)  # passes come at least every 250 ms
    t0 = time.thread_time()
    w.spin(CPU_SECONDS)
    results["c"] = (
        time.thread_time() - t0,
        threading.get_ident(),
        threading.get_native_id(),
        None,
    )


def _start_c_thread(results: dict):
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    CALLBACK = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)

    def body(_arg):
        _c_thread_body(results)
        return None

    callback = CALLBACK(body)
    handle = ctypes.c_ulong()
    rc = libc.pthread_create(ctypes.byref(handle), None, callback, None)
    assert rc == 0
    return libc, handle, callback


def test_every_kind_of_thread_is_sampled_with_its_name_and_cpu_time():
    started = threading.Event()
    results: dict = {}
    before = threading.Thread(
        target=_measured_worker, args=(started, results, "before"), name="made-before-start"
    )
    before.start()
    spprof.start(interval_ms=10)
    try:
        after = threading.Thread(
            target=_measured_worker, args=(started, results, "after"), name="made-after-start"
        )
        after.start()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pool")
        fut = pool.submit(_pool_task, started, results, "pool")
        libc, handle, _callback = _start_c_thread(results)  # keep the callback alive
        started.set()
        before.join()
        after.join()
        fut.result()
        pool.shutdown()
        assert libc.pthread_join(handle, None) == 0
    finally:
        profile = spprof.stop()
    samples = profile.get_samples()
    expected_names = {
        "before": "made-before-start",
        "after": "made-after-start",
        "pool": "pool_0",
        "c": None,
    }
    for key, name in expected_names.items():
        cpu, ident, native, _ = results[key]
        mine = [s for s in samples if s.native_thread_id == native]
        assert mine, f"no samples for the {key} thread"
        assert all(s.thread_id == ident for s in mine)
        if name is not None:
            assert {s.thread_name for s in mine} == {name}
        assert samples_in(mine, "spin_inner"), key
        weight = sum(s.weight_ns for s in mine if any(f.function_name == "spin" for f in s.frames))
        assert abs(weight / 1e9 - cpu) <= 0.1 * cpu, (key, weight / 1e9, cpu)
    # threads that ended before stop() keep their names and are reported as ended
    by_name = {t.name: t for t in profile.threads}
    assert by_name["made-after-start"].ended
    assert by_name["made-after-start"].cpu_ns >= 0.9 * CPU_SECONDS * 1e9
    assert spprof.stats()["threads_found_by_scan"] >= 1  # the C thread


def _short_work(mode: str) -> None:
    if mode == "wall":
        time.sleep(0.005)
    else:
        # 6 ms, under the 10 ms interval: the spin's share is what the test is about, and
        # threading's start-up (0.1 ms a thread here, ~0.6 ms on a loaded CI machine on 3.14)
        # is rightly _bootstrap's, so it is kept small beside it.
        w.spin(0.006)


class _Napper(threading.Thread):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def run(self) -> None:
        _short_work(self.mode)


@pytest.mark.parametrize("mode", ["cpu", "wall"])
@pytest.mark.parametrize("kind", ["run_overridden", "builtin_target", "partial_target"])
def test_a_short_threads_last_stretch_goes_to_its_run_not_to_threadings_bootstrap(mode, kind):
    # A thread shorter than an interval is mostly its last stretch: the CPU its timer owed at
    # its end (cpu) or its time off CPU since its start (wall), on its last stack, which for
    # such a thread is the entry stack recorded as it started. That stack ended in threading's
    # _bootstrap when the thread's run() was overridden or its target had no code (a builtin,
    # a functools.partial): half of such threads' time in wall mode, 25-55 % in cpu mode, went
    # to _bootstrap. The entry is now run()'s code, the partial's function's, or Thread.run's,
    # whose frame runs the builtin.
    def make() -> threading.Thread:
        if kind == "run_overridden":
            return _Napper(mode)
        if kind == "partial_target":
            return threading.Thread(target=functools.partial(functools.partial(_short_work), mode))
        if mode == "wall":
            return threading.Thread(target=time.sleep, args=(0.005,))
        return threading.Thread(target=sum, args=(range(400_000),))

    with spprof.Profiler(interval_ms=10, mode=mode) as p:
        for _ in range(300):
            t = make()
            t.start()
            t.join()
    by_leaf: dict = {}
    for s in p.get_samples():
        if s.thread_name != "MainThread" and s.frames:
            leaf = s.frames[-1]
            by_leaf[leaf.function_name] = by_leaf.get(leaf.function_name, 0) + s.weight_ns
    total = sum(by_leaf.values())
    assert total > 0, by_leaf
    # Where they ran: run() (its own, or Thread.run calling the builtin); the spin's own
    # frames in cpu mode. threading's start-up and clean-up draw a sample now and then (1-2
    # of some 90 in cpu mode when the spin was 3 ms; 17 of 129 once in CI on 3.14).
    mine = {"partial_target": ("_short_work",), "builtin_target": ("run",)}.get(
        kind, ("run", "_short_work")
    )
    theirs = sum(v for f, v in by_leaf.items() if f in (*mine, "spin", "spin_inner"))
    assert theirs >= 0.85 * total, by_leaf
    # _bootstrap rightly keeps the CPU of threading's start-up, which ran before the thread's
    # timer was armed (written on the stack it had then). Under AddressSanitizer a thread's
    # start costs more: 5-9 % of the weight, 10.6 % once in CI; and so under qemu (10.1 % once);
    # 13 % once on a loaded CI machine (3.14): those with 3 ms of work a thread, now 4-6 ms.
    # Before the change: 45-70 %.
    start_up = 0.2 if os.environ.get("SPPROF_TEST_ASAN") or EMULATED else 0.1
    assert by_leaf.get("_bootstrap", 0) <= start_up * total, by_leaf


def test_sleeping_thread_gets_no_cpu_samples():
    sleeper = threading.Thread(target=time.sleep, args=(1.0,), name="sleeper")
    with spprof.Profiler(interval_ms=5) as p:
        sleeper.start()
        w.spin(0.5)
        sleeper.join()
    names = [s.thread_name for s in p.get_samples()]
    assert names.count("sleeper") <= 1  # at most the start-up instant
    main = sum(s.weight_ns for s in p.get_samples() if s.thread_name == "MainThread")
    assert main >= 0.4e9, main  # the 0.5 s spin, by weight (fewer samples on a loaded machine)


def test_thread_hashing_with_the_gil_released_is_sampled_on_its_line():
    data = b"\x5a" * (64 << 20)
    done = threading.Event()
    digests = []

    def hasher():
        while not done.is_set():
            h = hashlib.sha256()
            h.update(data)  # HASH_LINE
            digests.append(h.hexdigest())

    t = threading.Thread(target=hasher, name="hasher")
    with spprof.Profiler(interval_ms=2) as p:
        t.start()
        w.spin(1.0)  # the main thread keeps the GIL busy meanwhile
        done.set()
        t.join()
    assert digests and len(set(digests)) == 1
    mine = [s for s in p.get_samples() if s.thread_name == "hasher"]
    assert len(mine) > 50
    hash_line = w.line_of(hasher, "HASH_LINE")
    on_line = [
        s
        for s in mine
        if s.frames[-1].function_name == "hasher" and s.frames[-1].lineno == hash_line
    ]
    assert len(on_line) > 0.8 * len(mine)


@pytest.mark.parametrize("timer", ["thread", "itimer"])
def test_threads_ending_mid_session_free_their_timers(timer):
    def short():
        w.spin(0.05)

    with spprof.Profiler(interval_ms=2, timer=timer) as p:
        for i in range(20):
            t = threading.Thread(target=short, name=f"short-{i}")
            t.start()
            t.join()
        time.sleep(0.35)  # a drain pass comes within 250 ms: its scan retires the last ones
        live = spprof.stats()
    if timer == "thread":
        assert live["timers_active"] == 1  # the main thread's only
    assert live["threads_ended"] >= 19
    names = {s.thread_name for s in p.get_samples()}
    assert len([n for n in names if n.startswith("short-")]) >= 15


class _SlowToRegister(threading.Thread):
    """Lingers between getting its OS thread and spprof's registration (which comes before
    threading's _bootstrap_inner, so before threading._active names it), so a drain pass's
    scan registers it first, while threading cannot name it yet."""

    def _bootstrap(self) -> None:
        time.sleep(0.6)  # more than two drain passes (250 ms each)
        super()._bootstrap()  # type: ignore[misc]


@pytest.mark.parametrize("timer", ["thread", "itimer"])
def test_thread_found_by_scan_before_threading_knows_it_keeps_its_name(timer):
    def body():
        w.spin(0.1)
        threading.current_thread().name = "renamed-late"
        w.spin(0.1)
        time.sleep(0.3)  # a drain pass (every 250 ms) falls between the rename and the end

    with spprof.Profiler(interval_ms=1, timer=timer) as p:
        t = _SlowToRegister(target=body, name="slow-start")
        t.start()
        t.join()
        found_by_scan = spprof.stats()["threads_found_by_scan"]
    assert found_by_scan >= 1  # the race this test is about did happen
    names = {s.thread_name for s in p.get_samples() if s.thread_name != "MainThread"}
    assert names == {"renamed-late"}, names


def test_hundreds_of_threads_renamed_while_they_wait_keep_their_new_names():
    # Each drain pass reads the names of every live thread from threading in one walk of
    # threading._active, matched to spprof's records by ident: idents are stack addresses
    # that share their low bits, so this is the case an index keyed badly would mix up.
    count = 300
    renamed = threading.Barrier(count + 1)
    release = threading.Event()

    def body(i: int) -> None:
        threading.current_thread().name = f"renamed-{i}"
        renamed.wait()
        release.wait()

    with spprof.Profiler(interval_ms=10, mode="wall") as p:
        threads = [
            threading.Thread(target=body, args=(i,), name=f"started-{i}") for i in range(count)
        ]
        for t in threads:
            t.start()
        renamed.wait()
        time.sleep(0.6)  # two drain passes or more while every thread waits, renamed
        idents = {t.ident: f"renamed-{i}" for i, t in enumerate(threads)}
        release.set()
        for t in threads:
            t.join()
    seen: dict[int, set[str]] = {}
    for s in p.get_samples():
        if s.thread_id in idents:
            seen.setdefault(s.thread_id, set()).add(s.thread_name)
    assert len(seen) == count, len(seen)
    wrong = {ident: names for ident, names in seen.items() if names != {idents[ident]}}
    assert not wrong, list(wrong.items())[:5]


# A thread's CPU as shown also holds its start (after registration) and its end (before
# the last reading): nothing natively on an idle machine, 7-11 ms under qemu-user, which
# emulates that code (0.308-0.311 s shown for 0.301 s measured, at 3b1a931 and d6c2fee).
# Natively under CI's load, once (3.15, lane B): 0.310 s for 0.3018 s, the CPU timer's 31
# expiries, which fall only on the thread's own CPU after arming: 8 ms of start and end. One
# interval of slack still fails the double count this test is for (0.54 s for 0.3 s).
_START_AND_END_S = 0.02 if EMULATED else 0.01


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_per_thread_cpu_time_matches_thread_time(mode):
    # One thread ends mid-session after 0.3 s of CPU (a drain pass reads its clock while it
    # runs: samples taken before that reading but drained after it were counted twice, 0.3 s
    # shown as 0.54 s); one burns 0.6 s and is still alive, blocked, at stop(). The profile's
    # CPU time of each (and the HTML's, which shows the same field) is read from the same
    # clock as time.thread_time(), at registration (before the thread measures) and as the
    # thread ends or at stop() (after): never below what the thread measured, and above it by
    # only the thread's start and end. The ended thread's used to be its CPU timer's count:
    # an interval short (0.29 s for 0.30 s in 10 runs of 10 on a quiet machine), two or more
    # when scheduler ticks missed its last expiry (0.28 s in CI).
    measured: dict[str, float] = {}
    release = threading.Event()

    def burner(name: str, seconds: float, wait: bool) -> None:
        t0 = time.thread_time()
        w.spin(seconds)
        measured[name] = time.thread_time() - t0
        if wait:
            release.wait()

    early = threading.Thread(target=burner, args=("early", 0.3, False), name="early")
    late = threading.Thread(target=burner, args=("late", 0.6, True), name="late")
    with spprof.Profiler(interval_ms=10, mode=mode) as p:
        early.start()
        early.join()
        late.start()
        while "late" not in measured:
            time.sleep(0.01)
        time.sleep(0.1)
    release.set()
    late.join()
    threads = {t.name: t for t in p.profile.threads}
    assert threads["early"].ended and not threads["late"].ended
    for name in ("early", "late"):
        shown = threads[name].cpu_ns / 1e9
        top = 1.02 * measured[name] + _START_AND_END_S
        assert measured[name] - 1e-6 <= shown <= top, (name, shown, measured)
    from spprof.output.html import page_data

    html_threads = {t["name"]: t for t in page_data(p.profile)["threads"]}
    for name in ("early", "late"):
        assert html_threads[name]["cpu_ns"] == threads[name].cpu_ns


@pytest.mark.parametrize("timer", ["thread", "itimer"])
def test_thread_hooked_in_an_earlier_session_ending_in_this_one_shows_its_exact_cpu(timer):
    # The threading hook of the first session leaves its mark on the thread; the second
    # finds the thread by its scan, blocked, and the thread's end is still read on the thread
    # itself: 0.3 s of CPU, not 0.29 s (the CPU timer's count) or a drain pass's estimate.
    ready, go = threading.Event(), threading.Event()
    measured: dict[str, float] = {}

    def body() -> None:
        ready.set()
        go.wait()
        t0 = time.thread_time()
        w.spin(0.3)
        measured["cpu"] = time.thread_time() - t0

    t = threading.Thread(target=body, name="two-sessions")
    with spprof.Profiler(interval_ms=10, timer=timer):
        t.start()
        assert ready.wait(10)
    with spprof.Profiler(interval_ms=10, timer=timer) as p:
        go.set()
        t.join()
    mine = {x.name: x for x in p.profile.threads}["two-sessions"]
    assert mine.ended
    shown = mine.cpu_ns / 1e9
    assert measured["cpu"] - 1e-6 <= shown <= 1.02 * measured["cpu"] + _START_AND_END_S, (
        shown,
        measured,
    )


SUBINTERPRETER_RUN = """
import json, threading, time
import spprof
try:
    import _interpreters as interpreters  # 3.13+
except ImportError:
    import _xxsubinterpreters as interpreters

CODE = '''
import time
def sub_spin():
    end = time.thread_time() + 0.6
    while time.thread_time() < end:
        pass
sub_spin()
'''

def run_it(iid, out):
    t0 = time.thread_time()
    interpreters.run_string(iid, CODE)
    out.append(time.thread_time() - t0)

cpu = []
with spprof.Profiler(interval_ms=5) as p:
    iid = interpreters.create()
    run_it(iid, cpu)  # the main thread
    t = threading.Thread(target=run_it, args=(iid, cpu), name="worker")
    t.start()
    t.join()
    interpreters.destroy(iid)
rows = [(s.thread_name, [f.function_name for f in s.frames], s.weight_ns) for s in p.get_samples()]
print(json.dumps({"cpu": cpu, "rows": rows, "iid": int(iid), "stats": p.profile.stats}))
"""


def test_time_in_a_subinterpreter_is_kept_under_a_frame_naming_it():
    # 2df7638: the time a thread spent running a subinterpreter vanished (0.83 s of CPU,
    # 0.19 s in functions, "0 dropped"). Its frames belong to another interpreter and are not
    # read; the time goes to a <subinterpreter N> leaf under the caller's stack, counted.
    r = run_python("-c", SUBINTERPRETER_RUN, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    marker = f"<subinterpreter {out['iid']}>"
    for thread, cpu in zip(("MainThread", "worker"), out["cpu"]):
        # (interpreters.create() runs the new interpreter's start-up on the main thread too)
        leaf = ["run_it", marker]
        if thread == "worker" and sys.version_info < (3, 12):
            # Before 3.12 a thread other than the interpreter's creator cannot be told to run
            # it (docs/usage.md, limits): its time stays on the line that called run_string.
            leaf = ["run_it"]
        weight = sum(
            wt for name, names, wt in out["rows"] if name == thread and names[-len(leaf) :] == leaf
        )
        assert abs(weight / 1e9 - cpu) <= 0.15 * cpu, (thread, weight, cpu)
    # 0.6 s at 5 ms is ~120 signals when the tick finds the threads running; under load fewer
    # come (84 in a CI lane), each weighing more: the weights above are the check, this one
    # says the samples are there at all (old code: 0).
    assert out["stats"]["samples_in_subinterpreters"] >= 40, out["stats"]
