"""Workload run under the signal-safety shim: sampling at 1 ms in several threads that allocate,
lock, hash with the GIL released, start and end, while the main thread burns CPU.

argv: cpu_seconds timer [mode [native]]. Runs until the process used cpu_seconds of CPU
(all threads), so a busy machine stretches the run instead of shrinking the sample count;
capped at 6x in wall time.
Prints `RESULT {json}` with the profile's facts and spprof.stats().
"""

import hashlib
import json
import sys
import threading
import time

import spprof

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
TIMER = sys.argv[2] if len(sys.argv) > 2 else "auto"
MODE = sys.argv[3] if len(sys.argv) > 3 else "cpu"
NATIVE = len(sys.argv) > 4 and sys.argv[4] == "native"


def allocate_heavily(stop):
    # malloc/free on every line: a handler that allocated would deadlock or corrupt here.
    n = 0
    while not stop.is_set():
        d = {i: [i] * 8 for i in range(300)}
        s = {str(i) * 3 for i in range(300)}
        n += len(d) + len(s)
    return n


def lock_heavily(stop):
    lock = threading.Lock()
    cond = threading.Condition()
    n = 0
    while not stop.is_set():
        for _ in range(200):
            with lock:
                n += 1
        with cond:
            cond.notify_all()
    return n


def hash_without_gil(stop):
    data = b"\xa5" * (4 << 20)
    while not stop.is_set():
        hashlib.sha256(data).hexdigest()


def short_lived(k):
    return sum(i * i for i in range(60000 + k))  # a few ms of CPU: sampled


def churn_threads(stop):
    k = 0
    while not stop.is_set():
        t = threading.Thread(target=short_lived, args=(k,), name=f"short-{k}")
        t.start()
        t.join()
        k += 1


def main_burn(cpu_seconds):
    wall_end = time.monotonic() + 6 * cpu_seconds
    n = 0
    while time.process_time() < cpu_seconds and time.monotonic() < wall_end:
        n += sum(i * 3 for i in range(2000))
    return n


stop = threading.Event()
spprof.start(interval_ms=1, timer=TIMER, mode=MODE, native=NATIVE)
workers = [
    threading.Thread(target=allocate_heavily, args=(stop,), name="allocator"),
    threading.Thread(target=lock_heavily, args=(stop,), name="locker"),
    threading.Thread(target=hash_without_gil, args=(stop,), name="hasher"),
    threading.Thread(target=churn_threads, args=(stop,), name="churner"),
]
for t in workers:
    t.start()
main_burn(time.process_time() + SECONDS)
stop.set()
for t in workers:
    t.join()
stats_live = spprof.stats()
profile = spprof.stop()
stats = spprof.stats()
samples = profile.samples
functions = sorted({f.function_name for s in samples for f in s.frames})
print(
    "RESULT "
    + json.dumps(
        {
            "samples": len(samples),
            "functions": functions,
            "thread_names": sorted({s.thread_name for s in samples if s.thread_name}),
            "threads_seen": stats["threads_seen"],
            "signals": stats["signals"],
            "timer": stats_live["timer"],
            "dropped": profile.dropped_count,
            "unknown_frames": stats["unknown_frames"],
        }
    )
)
