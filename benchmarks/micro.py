"""In-process micro-measurements, each run by benchmarks/run.py in a fresh process.

    python -m benchmarks.micro handler DEPTH SECONDS RATE_HZ   # RATE_HZ 0: unprofiled
    python -m benchmarks.micro resolver KIND SECONDS            # KIND: idle, known, new
    python -m benchmarks.micro stop SAMPLES THREADS
    python -m benchmarks.micro rss SECONDS
    python -m benchmarks.micro threads MODE RATE_HZ SECONDS SLEEPERS
    python -m benchmarks.micro churn COUNT MODE           # MODE: off, cpu, wall

Each prints one JSON line. The runner derives the figures (docs/performance.md says how):

- handler: a CPU-bound loop at Python stack depth DEPTH in CPU mode; the runner runs it under
  `perf record` and attributes the main thread's samples inside spprof's extension (the
  handler: the resolver runs on the drain thread) and the extra kernel time (signal delivery)
  to the signals counted by spprof.
- resolver: the drain thread's CPU time (from /proc/self/task/TID/schedstat, nanoseconds) per
  record drained, with samples that repeat one stack (known) or that almost all have a stack
  never seen before (new); an idle session gives the fixed cost per drain period.
- stop: wall mode at 1 kHz with THREADS sleeping threads until SAMPLES samples are captured,
  then the latency of `spprof.stop()`.
- rss: a CPU-mode 1 kHz session of SECONDS over 48 recurring stacks; RSS over time.
- churn: a thread-per-request server: COUNT short threads started and joined one after
  another; RSS before and after (the runner compares with MODE off, run the same way), the
  time per thread, and the session's thread counters.
- threads: one thread burning SECONDS of CPU next to SLEEPERS sleeping threads, profiled in
  MODE at RATE_HZ: the CPU time of the profiler's own threads (wall census, drain), from
  /proc/self/task/TID/schedstat, and the signals the busy thread took.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time

import spprof
from benchmarks.workloads import stack_depth_here


def _spin_until(cpu_deadline: float) -> int:
    iterations = 0
    acc = 0
    while time.thread_time() < cpu_deadline:
        for i in range(2000):
            acc = (acc * 31 + i) & 0xFFFFFFFF
        iterations += 2000
    return iterations


def _at_depth(extra: int, cpu_seconds: float) -> int:
    if extra > 0:
        return _at_depth(extra - 1, cpu_seconds)
    return _spin_until(time.thread_time() + cpu_seconds)


def handler(
    depth: int, seconds: float, rate_hz: int, native: bool = False, imports: tuple = ()
) -> dict:
    # Libraries loaded first (numpy, pandas, torch): the native walk looks modules up among
    # every image the process has, so their number is part of its cost.
    for name in imports:
        importlib.import_module(name)
    extra = depth - stack_depth_here() - 1  # the frames _at_depth adds below this one
    if rate_hz:
        spprof.start(interval_ms=1000.0 / rate_hz, mode="cpu", native=native)
    c0 = time.thread_time()
    iterations = _at_depth(extra, seconds)
    cpu = time.thread_time() - c0
    out = {"depth": depth, "rate_hz": rate_hz, "cpu_s": cpu, "iterations": iterations}
    if rate_hz:
        profile = spprof.stop()
        st = spprof.stats()
        deepest = max((len(s.frames) for s in profile.samples), default=0)
        out.update(
            signals=st["signals"],
            samples=st["samples_stored"],
            overruns=st["timer_overruns"],
            dropped=st["samples_dropped"],
            observed_depth=deepest,
        )
    out["tid"] = threading.get_native_id()
    return out


# -- resolver ----------------------------------------------------------------------------------


def _tasks() -> set:
    return set(os.listdir("/proc/self/task"))


def _thread_cpu_ns(tid: str) -> int:
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])


def _path(bits: int, k: int, spin: int) -> int:
    if k == 0:
        acc = 0
        for i in range(spin):
            acc = (acc * 31 + i) & 0xFFFFFFFF
        return acc
    if (bits >> k) & 1:
        return _left(bits, k - 1, spin)
    return _right(bits, k - 1, spin)


def _left(bits: int, k: int, spin: int) -> int:
    return _path(bits, k, spin)


def _right(bits: int, k: int, spin: int) -> int:
    return _path(bits, k, spin)


def resolver(kind: str, seconds: float) -> dict:
    before = _tasks()
    spprof.start(interval_ms=1, mode="cpu")
    drain = sorted(_tasks() - before)
    c0 = {t: _thread_cpu_ns(t) for t in drain}
    deadline = time.monotonic() + seconds
    bits = 0
    while time.monotonic() < deadline:
        if kind == "idle":
            time.sleep(0.05)
        elif kind == "known":
            _path(0, 16, 3000)
        else:  # new: 2**16 paths of 16 levels, about one per sample
            bits += 1
            _path(bits, 16, 3000)
    time.sleep(0.3)  # let the drain take the last records (a pass at least every 250 ms)
    drain_ns = sum(_thread_cpu_ns(t) - c0[t] for t in drain)
    st = spprof.stats()
    spprof.stop()
    return {
        "kind": kind,
        "drain_threads": len(drain),
        "drain_cpu_ns": drain_ns,
        "drains": st["drains"],
        "records": st["records_drained"],
        "samples": st["samples_stored"],
        "distinct_stacks": st["distinct_stacks"],
        "distinct_frames": st["distinct_frames"],
        "memory_bytes": st["memory_bytes"],
    }


# -- the profiler's own threads -----------------------------------------------------------------


def profiler_threads(mode: str, rate_hz: int, seconds: float, sleepers: int) -> dict:
    done = threading.Event()
    workers = [threading.Thread(target=done.wait, daemon=True) for _ in range(sleepers)]
    for t in workers:
        t.start()
    before = _tasks()
    t0 = time.monotonic()
    spprof.start(interval_ms=1000 / rate_hz, mode=mode)
    ours = sorted(_tasks() - before)
    c0 = {t: _thread_cpu_ns(t) for t in ours}
    _spin_until(time.thread_time() + seconds)
    used = sum(_thread_cpu_ns(t) - c0[t] for t in ours)
    elapsed = time.monotonic() - t0
    st = spprof.stats()
    spprof.stop()
    done.set()
    return {
        "mode": mode,
        "rate_hz": rate_hz,
        "sleepers": sleepers,
        "busy_cpu_s": seconds,
        "elapsed_s": elapsed,
        "profiler_threads": len(ours),
        "profiler_cpu_ns": used,
        "signals": st["signals"],
        "wall_censuses": st.get("wall_ticks", 0),
        "wall_signals_sent": st.get("wall_signals_sent", 0),
        "samples": st["samples_stored"],
    }


# -- stop latency ------------------------------------------------------------------------------


def stop_latency(samples: int, threads: int) -> dict:
    done = threading.Event()
    workers = [threading.Thread(target=done.wait, daemon=True) for _ in range(threads)]
    for t in workers:
        t.start()
    spprof.start(interval_ms=1, mode="wall")
    t0 = time.monotonic()
    while spprof.stats()["samples_stored"] < samples and time.monotonic() - t0 < 120:
        _path(0, 8, 20000)
    captured = spprof.stats()["samples_stored"]
    s0 = time.perf_counter()
    profile = spprof.stop()
    stop_s = time.perf_counter() - s0
    st = spprof.stats()
    m0 = time.perf_counter()
    n = len(profile.samples)
    materialise_s = time.perf_counter() - m0
    done.set()
    return {
        "threads": threads + 1,
        "captured_before_stop": captured,
        "samples_stored": st["samples_stored"],
        "stop_s": stop_s,
        "materialise_samples_s": materialise_s,
        "samples_materialised": n,
        "record_s": s0 - t0,
    }


# -- RSS over a long session -------------------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss(seconds: float) -> dict:
    spprof.start(interval_ms=1, mode="cpu")
    t0 = time.monotonic()
    points = []
    next_point = t0
    k = 0
    while True:
        now = time.monotonic()
        if now >= next_point:
            st = spprof.stats()
            points.append(
                (round(now - t0, 1), _rss_bytes(), st["samples_stored"], st["memory_bytes"])
            )
            next_point += max(1.0, seconds / 30)
        if now - t0 >= seconds:
            break
        k += 1
        _path(k % 48, 6, 5000)  # 48 recurring stacks (6 levels of left/right)
    st = spprof.stats()
    s0 = time.perf_counter()
    spprof.stop()
    stop_s = time.perf_counter() - s0
    warm = next((p for p in points if p[0] >= min(5.0, seconds / 4)), points[0])
    return {
        "seconds": seconds,
        "points": points,
        "rss_start": points[0][1],
        "rss_warm": warm[1],
        "rss_end": points[-1][1],
        "samples": st["samples_stored"],
        "distinct_stacks": st["distinct_stacks"],
        "memory_bytes": st["memory_bytes"],
        "dropped": st["samples_dropped"],
        "stop_s": stop_s,
    }


# -- thread churn -----------------------------------------------------------------------------


def _request() -> None:
    pass


def churn(count: int, mode: str) -> dict:
    # Warm-up outside the measurement: the first threads grow the allocator's and the
    # interpreter's pools whatever the profiler does.
    for _ in range(200):
        t = threading.Thread(target=_request)
        t.start()
        t.join()
    if mode != "off":
        spprof.start(interval_ms=10, mode=mode)
    rss0 = _rss_bytes()
    t0 = time.perf_counter()
    for _ in range(count):
        t = threading.Thread(target=_request)
        t.start()
        t.join()
    elapsed = time.perf_counter() - t0
    rss1 = _rss_bytes()
    st = spprof.stats() if mode != "off" else {}
    if mode != "off":
        spprof.stop()
    return {
        "count": count,
        "mode": mode,
        "rss_before": rss0,
        "rss_after": rss1,
        "us_per_thread": elapsed / count * 1e6,
        "threads_seen": st.get("threads_seen", 0),
        "threads_alive_max": st.get("threads_alive_max", 0),
        "thread_memory_bytes": st.get("thread_memory_bytes", 0),
        "memory_bytes": st.get("memory_bytes", 0),
    }


def main(argv: list) -> int:
    what = argv[0]
    if what == "handler":
        # handler DEPTH SECONDS RATE_HZ [native|python [IMPORT,IMPORT...]]
        native = len(argv) > 4 and argv[4] == "native"
        imports = tuple(x for x in argv[5].split(",") if x) if len(argv) > 5 else ()
        out = handler(int(argv[1]), float(argv[2]), int(argv[3]), native, imports)
    elif what == "resolver":
        out = resolver(argv[1], float(argv[2]))
    elif what == "stop":
        out = stop_latency(int(argv[1]), int(argv[2]))
    elif what == "rss":
        out = rss(float(argv[1]))
    elif what == "churn":
        out = churn(int(argv[1]), argv[2])
    elif what == "threads":
        out = profiler_threads(argv[1], int(argv[2]), float(argv[3]), int(argv[4]))
    else:
        raise SystemExit(f"unknown measurement {what!r}")
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
