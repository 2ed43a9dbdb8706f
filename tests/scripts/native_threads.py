"""Threads without a Python state under spprof: one case per run (tests/test_native_threads.py).

Usage: native_threads.py LIB CASE [options as JSON]. LIB is native_threads_lib.c built by the
test. Prints one JSON object: the truth each C thread measured with its own CPU clock, and
what the profile says about it.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time

import spprof


def spin_python(seconds: float) -> None:
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1


def load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    lib.worker_start.restype = ctypes.c_long
    lib.worker_start.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_double,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_int,
    ]
    lib.worker_go.argtypes = [ctypes.c_int]
    lib.worker_join.restype = ctypes.c_double
    lib.worker_join.argtypes = [ctypes.c_int]
    lib.eintr_run.restype = ctypes.c_long
    lib.churn_short_threads.restype = ctypes.c_long
    lib.churn_short_threads.argtypes = [ctypes.c_double, ctypes.c_int, ctypes.c_double]
    lib.eintr_run.argtypes = [ctypes.c_long, ctypes.POINTER(ctypes.c_double)]
    return lib


def thread_report(profile: spprof.Profile, tid: int) -> dict:
    threads = [t for t in profile.threads if t.native_thread_id == tid]
    samples = [s for s in profile.samples if s.native_thread_id == tid]
    roots = sorted({s.frames[0].function_name for s in samples if s.frames})
    leaves = sorted({s.frames[-1].function_name for s in samples if s.frames})
    return {
        "entries": len(threads),
        "names": [t.name for t in threads],
        "cpu_ns": [t.cpu_ns for t in threads],
        "native_only": [getattr(t, "native_only", None) for t in threads],
        "signal_blocked": [getattr(t, "signal_blocked", None) for t in threads],
        "ended": [t.ended for t in threads],
        "samples": len(samples),
        "on_cpu_ns": sum(s.weight_ns for s in samples if s.on_cpu),
        "idle_ns": sum(s.weight_ns for s in samples if s.idle),
        "roots": roots,
        "leaves": leaves[:40],
        "native_roots": sorted({s.frames[0].is_native for s in samples if s.frames}),
        "python_samples": sum(
            1 for s in samples if any(f.function_name == "spin_python" for f in s.frames)
        ),
    }


def main() -> None:
    lib = load(sys.argv[1])
    case = sys.argv[2]
    opts = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    seconds = float(opts.get("seconds", 0.6))
    start_kw = {"mode": opts.get("mode", "cpu"), "native": bool(opts.get("native", False))}
    out: dict = {"case": case}
    if case == "worker":
        # One C thread (named as OpenMP names its workers) started before or after start(),
        # idle until the scan has surely found it (passes come every 250 ms), then spinning.
        before = opts.get("when", "after") == "before"
        block = int(opts.get("block", 0))  # 2: blocked only while it waits (a newborn's mask)
        name = str(opts.get("name", "OMP worker 3")).encode("latin-1")  # the OS's bytes
        if before:
            tid = lib.worker_start(0, name, seconds, block, None, 0)
        spprof.start(**start_kw)
        if not before:
            tid = lib.worker_start(0, name, seconds, block, None, 0)
        time.sleep(float(opts.get("wait", 0.6)))
        lib.worker_go(0)
        truth = lib.worker_join(0)
        time.sleep(0.1)
        profile = spprof.stop()
        out.update(tid=tid, truth_ns=int(truth * 1e9), thread=thread_report(profile, tid))
        out["stats"] = {"threads_signal_blocked": profile.stats.get("threads_signal_blocked")}
    elif case == "churn":
        # A C thread that calls a Python callback (PyGILState_Ensure / Release through ctypes)
        # and spins in C between calls: one thread, its whole CPU time.
        rounds = int(opts.get("rounds", 30))
        per_call = float(opts.get("python_seconds", 0.01))
        hold = [float(opts.get("hold", 0))]

        def call() -> None:
            # "hold": the first call keeps its thread state that long, so the thread-state
            # scan finds the thread first (then its state goes and the OS thread goes on).
            if hold[0]:
                time.sleep(hold[0])
                hold[0] = 0
            spin_python(per_call)

        callback = ctypes.CFUNCTYPE(None)(call)
        spprof.start(**start_kw)
        tid = lib.worker_start(
            1, b"churner", seconds, 0, ctypes.cast(callback, ctypes.c_void_p), rounds
        )
        if not hold[0]:
            time.sleep(0.6)
        lib.worker_go(1)
        c_truth = lib.worker_join(1)  # the C spin plus the callbacks (its whole CPU time)
        time.sleep(0.1)
        profile = spprof.stop()
        out.update(tid=tid, truth_ns=int(c_truth * 1e9), thread=thread_report(profile, tid))
        out["stats"] = {
            k: profile.stats.get(k) for k in ("threads_rejoined", "threads_native_only")
        }
    elif case == "eintr":
        rounds = int(opts.get("rounds", 1500))
        cpu = ctypes.c_double(0)
        if opts.get("profile", True):
            spprof.start(**start_kw)
            eintr = lib.eintr_run(rounds, ctypes.byref(cpu))
            profile = spprof.stop()
            waiter = [t for t in profile.threads if t.name == "eintr waiter"]
            out["waiter_samples"] = sum(t.samples for t in waiter)
        else:
            eintr = lib.eintr_run(rounds, ctypes.byref(cpu))
        out.update(eintr=eintr, waiter_cpu_ns=int(cpu.value * 1e9))
    elif case == "python_blocked":
        # A threading.Thread that blocks every signal, then spins in Python: left alone,
        # named, its CPU time reported (and not called idle in wall mode).
        import signal
        import threading

        truth: list[float] = []

        def body() -> None:
            signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals))
            t0 = time.thread_time()
            spin_python(seconds)
            truth.append(time.thread_time() - t0)

        # `idle` threads waiting meanwhile, started first: the masked thread's slot comes after
        # theirs, past the first pass's turn of the signal-mask checks.
        release = threading.Event()
        idle = [threading.Thread(target=release.wait) for _ in range(int(opts.get("idle", 0)))]
        spprof.start(**start_kw)
        for t in idle:
            t.start()
        th = threading.Thread(target=body, name="masked")
        th.start()
        th.join()
        release.set()
        for t in idle:
            t.join()
        profile = spprof.stop()
        tid = th.native_id or 0
        out.update(tid=tid, truth_ns=int(truth[0] * 1e9), thread=thread_report(profile, tid))
        out["stats"] = {k: v for k, v in profile.stats.items() if k.startswith("cpu_")}
    elif case == "numpy":
        # OpenBLAS's pool (OPENBLAS_NUM_THREADS set by the test): threads with no Python state.
        import numpy as np

        a = np.random.default_rng(1).random((600, 600))
        a @ a  # the pool starts on first use
        spprof.start(**start_kw)
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            a @ a
        profile = spprof.stop()
        out["stats"] = {
            k: v for k, v in profile.stats.items() if k.startswith(("cpu_", "threads_"))
        }
        out["threads"] = [[t.name, t.native_only, t.samples, t.cpu_ns] for t in profile.threads]
    elif case == "balance":
        # C threads that start spinning at once (found up to 250 ms late), a Python thread,
        # the main thread: the balance must add up.
        spprof.start(**start_kw)
        for i in range(2):
            lib.worker_start(2 + i, f"pool {i}".encode(), seconds, 0, None, 0)
            lib.worker_go(2 + i)
        spin_python(seconds)
        truth = sum(lib.worker_join(2 + i) for i in range(2))
        profile = spprof.stop()
        out["truth_ns"] = int(truth * 1e9)
        out["stats"] = {k: v for k, v in profile.stats.items() if k.startswith("cpu_")}
    elif case == "thread_churn":
        # C threads that live tens of microseconds, a few at a time: the scan lists many that
        # end before their timer is made.
        spprof.start(**start_kw)
        width, each = int(opts.get("width", 4)), float(opts.get("each", 5e-5))
        started = lib.churn_short_threads(seconds, width, each)
        profile = spprof.stop()
        out["started"] = started
        out["stats"] = {
            k: v for k, v in profile.stats.items() if k.startswith(("cpu_", "threads_", "timer_"))
        }
    else:
        raise SystemExit(f"unknown case {case}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
