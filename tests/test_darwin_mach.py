"""macOS only: the Mach sampler, through the public API.

Nothing here can run on the Linux machines the project is developed on; these are the checks
for whoever has a Mac (docs/darwin.md has the checklist). The sampler suspends each Python
thread in turn from its own thread, so it samples with wall-clock semantics: blocked threads
are sampled too, and each sample is weighted by the time since that thread's previous one.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import spprof

darwin_only = pytest.mark.skipif(sys.platform != "darwin", reason="Mach sampler: macOS only")

# The Mach sampler's counters: exported by stats() on macOS only (platform.h, PlatformStats).
MACH_ONLY_STATS = (
    "sampler_ticks",
    "missed_ticks",
    "threads_sampled",
    "threads_skipped",
    "threads_unmatched",
    "total_suspend_ns",
    "max_suspend_ns",
    "mach_walk_errors",
    "off_cpu_skipped",
    "mach_native_only_samples",
)


def _burn(seconds: float) -> int:
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += sum(i * i for i in range(200))
    return n


def _fib(n: int) -> int:
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


def _samples_of(prof, ident: int):
    return [s for s in prof.samples if s.thread_id == ident]


def _function_names(samples) -> set[str]:
    return {f.function_name for s in samples for f in s.frames}


@darwin_only
def test_architecture_is_detected_and_timer_is_mach():
    assert platform.machine() in ("arm64", "x86_64")
    spprof.start(interval_ms=10)
    try:
        _burn(0.1)
        st = spprof.stats()
    finally:
        prof = spprof.stop()
    assert st["timer"] == "mach"
    for key in (*MACH_ONLY_STATS, "walk_errors", "samples_captured", "samples_dropped"):
        assert key in st, key
    assert st["signals"] == 0  # no signal is sent
    assert st["samples_captured"] > 0
    assert prof.samples, "no sample in 100 ms of CPU work"


@darwin_only
def test_samples_from_at_least_two_threads_with_four_workers():
    spprof.start(interval_ms=10)
    try:
        workers = [threading.Thread(target=_burn, args=(0.5,), name=f"w{i}") for i in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        prof = spprof.stop()
    idents = {s.thread_id for s in prof.samples}
    worker_idents = {w.ident for w in workers}
    assert len(idents) >= 2, idents
    assert idents & worker_idents, "no worker thread was sampled"
    named = {s.thread_name for s in prof.samples if s.thread_id in worker_idents}
    assert named & {"w0", "w1", "w2", "w3"}


@darwin_only
def test_sampling_rate_within_ten_percent_over_two_seconds():
    interval_ms = 10
    main = threading.get_ident()
    spprof.start(interval_ms=interval_ms)
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 2.0:  # on CPU: CPU mode keeps every tick
            sum(i * i for i in range(1000))
    finally:
        elapsed = time.monotonic() - t0
        prof = spprof.stop()
    mine = _samples_of(prof, main)
    expected = elapsed * 1000 / interval_ms
    assert 0.9 * expected <= len(mine) <= 1.1 * expected, (len(mine), expected)
    # Weights are measured elapsed time, so they add up to the wall time even when the
    # sampler overslept (mach_wait_until is 1-2 ms late at 10 ms).
    total_s = sum(s.weight_ns for s in mine) / 1e9
    assert 0.9 * elapsed <= total_s <= 1.1 * elapsed, (total_s, elapsed)


@darwin_only
def test_maximum_suspension_under_100_microseconds():
    spprof.start(interval_ms=5)
    try:
        workers = [threading.Thread(target=_fib, args=(24,)) for _ in range(3)]
        for w in workers:
            w.start()
        _fib(25)
        for w in workers:
            w.join()
        st = spprof.stats()
    finally:
        spprof.stop()
    assert st["threads_sampled"] > 0
    assert st["max_suspend_ns"] < 100_000, st
    assert st["total_suspend_ns"] >= st["max_suspend_ns"]


@darwin_only
def test_overhead_under_five_percent_at_100_hz():
    def timed() -> float:
        t = time.perf_counter()
        _fib(27)
        return time.perf_counter() - t

    timed()  # warm up
    base = statistics.median(timed() for _ in range(5))
    spprof.start(interval_ms=10)
    try:
        profiled = statistics.median(timed() for _ in range(5))
    finally:
        spprof.stop()
    assert profiled <= base * 1.05, (base, profiled)


@darwin_only
def test_threads_started_during_profiling_are_sampled():
    spprof.start(interval_ms=5)
    try:
        time.sleep(0.05)
        late = threading.Thread(target=_burn, args=(0.5,), name="late-starter")
        late.start()
        late.join()
    finally:
        prof = spprof.stop()
    mine = _samples_of(prof, late.ident)
    assert len(mine) >= 10, len(mine)
    assert "_burn" in _function_names(mine)


@darwin_only
def test_thread_ending_mid_session_is_handled():
    spprof.start(interval_ms=5)
    try:
        short = threading.Thread(target=_burn, args=(0.2,), name="short-lived")
        short.start()
        short.join()
        _burn(0.3)  # sampling continues after the thread is gone
        st = spprof.stats()
    finally:
        prof = spprof.stop()
    assert _samples_of(prof, short.ident), "the short thread was never sampled"
    assert _samples_of(prof, threading.get_ident()), "sampling stopped after the thread ended"
    assert st["samples_captured"] > 0


@darwin_only
def test_thread_blocked_on_io_is_sampled():
    a, b = socket.socketpair()
    ready = threading.Event()

    def blocked_reader() -> bytes:
        ready.set()
        return a.recv(1)  # blocks until the main thread writes

    try:
        try:
            spprof.start(interval_ms=10, mode="wall")  # blocked threads: wall-clock semantics
        except NotImplementedError:
            pytest.skip("wall mode is not implemented yet; CPU mode drops blocked samples")
        try:
            reader = threading.Thread(target=blocked_reader, name="io-blocked")
            reader.start()
            ready.wait()
            time.sleep(0.5)
            b.sendall(b"x")
            reader.join()
        finally:
            prof = spprof.stop()
    finally:
        a.close()
        b.close()
    mine = _samples_of(prof, reader.ident)
    assert len(mine) >= 20, len(mine)  # ~50 expected over 0.5 s
    assert "blocked_reader" in _function_names(mine)
    # Blocked in recv: the sampler reports it off-CPU most of the time.
    assert sum(1 for s in mine if not s.on_cpu) >= len(mine) // 2


@darwin_only
def test_no_entitlement_or_root_needed():
    if os.geteuid() == 0:
        pytest.skip("running as root proves nothing here")
    script = textwrap.dedent(
        """
        import spprof, time
        spprof.start(interval_ms=5)
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            pass
        prof = spprof.stop()
        print(len(prof.samples))
        """
    )
    env = dict(os.environ)
    env.pop("SPPROF_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 0
    assert "FATAL" not in done.stderr


@darwin_only
def test_native_thread_ids_match_threading():
    spprof.start(interval_ms=5)
    try:
        w = threading.Thread(target=_burn, args=(0.2,))
        w.start()
        w.join()
    finally:
        prof = spprof.stop()
    mine = _samples_of(prof, w.ident)
    assert mine
    assert {s.native_thread_id for s in mine} == {w.native_id}


@pytest.mark.skipif(sys.platform == "darwin", reason="the signal platforms' side of the same split")
def test_signal_platforms_export_no_mach_counters():
    spprof.start(interval_ms=10)
    try:
        _burn(0.05)
        st = spprof.stats()
    finally:
        spprof.stop()
    assert st["timer"] != "mach"
    assert not set(MACH_ONLY_STATS) & set(st), sorted(set(MACH_ONLY_STATS) & set(st))
    for key in ("signals", "foreign_signals", "timer_overruns", "timers_active", "timer_failures"):
        assert key in st, key


# A pthread started from C, after start(), that never takes a Python state: it names itself,
# gives its thread id, and spins until its own CPU clock shows `seconds`.
_C_SPINNER = r"""
#include <pthread.h>
#include <stdint.h>
#include <time.h>

static double want_;
static uint64_t tid_;
static volatile double sink_;

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* run(void* arg) {
    (void)arg;
    pthread_setname_np("c spinner");
    pthread_threadid_np(NULL, &tid_);
    while (cpu_seconds() < want_) {
        for (int i = 0; i < 10000; ++i) sink_ += i * 0.5;
    }
    return NULL;
}

uint64_t spin_in_c_thread(double seconds) {
    pthread_t t;
    want_ = seconds;
    if (pthread_create(&t, NULL, run, NULL) != 0) return 0;
    pthread_join(t, NULL);
    return tid_;
}
"""

_C_SPINNER_SCRIPT = textwrap.dedent(
    """
    import ctypes, json, sys
    import spprof
    lib = ctypes.CDLL(sys.argv[1])
    lib.spin_in_c_thread.restype = ctypes.c_uint64
    lib.spin_in_c_thread.argtypes = [ctypes.c_double]
    native = sys.argv[2] == "native"
    spprof.start(interval_ms=10, native=native)
    tid = lib.spin_in_c_thread(0.6)  # ctypes lets the GIL go while the C thread runs
    prof = spprof.stop()
    threads = [t for t in prof.threads if t.native_thread_id == tid]
    samples = [s for s in prof.samples if s.native_thread_id == tid]
    print(json.dumps({
        "tid": tid,
        "scan": prof.stats.get("os_threads_scan"),
        "native_only_samples": prof.stats.get("mach_native_only_samples"),
        "names": [t.name for t in threads],
        "native_only": [getattr(t, "native_only", None) for t in threads],
        "samples": len(samples),
        "on_cpu_ns": sum(s.weight_ns for s in samples if s.on_cpu),
        "roots": sorted({s.frames[0].function_name for s in samples if s.frames}),
        "depths": sorted({len(s.frames) for s in samples}),
    }))
    """
)


@darwin_only
@pytest.mark.parametrize("mode", ["python-frames", "native"])
def test_c_thread_without_python_state_is_sampled(tmp_path, mode):
    # Before task_threads was listed (os_threads_darwin.cpp returned false) such a thread was
    # never attached: no entry, no sample, os_threads_scan "unsupported".
    cc = os.environ.get("CC") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "spinner.c"
    src.write_text(_C_SPINNER)
    lib = tmp_path / "libspinner.dylib"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    done = subprocess.run(
        [sys.executable, "-c", _C_SPINNER_SCRIPT, str(lib), mode],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr  # its own interpreter: a crash is a failure
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["tid"] != 0
    assert out["scan"] == "task_threads"
    assert out["names"] == ["c spinner"], out
    assert out["native_only"] == [True], out
    # 0.6 s of its CPU at 10 ms, less at most one drain pass before the scan found it.
    assert out["samples"] >= 20, out
    assert out["native_only_samples"] >= out["samples"], out
    # Every sample sits under the one frame naming it, as on Linux.
    assert out["roots"] == ['<thread "c spinner">'], out
    if mode == "python-frames":
        assert out["depths"] == [1], out
    else:
        assert max(out["depths"]) > 1, out  # its frame-pointer pcs under the name
