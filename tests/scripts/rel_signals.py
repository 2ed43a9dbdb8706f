"""Signal workloads for tests/test_reliability_signals.py; each prints `RESULT {json}`.

rel_signals.py foreign N TIMER HANDLER   another process sends N SIGPROFs while we sample;
                                         HANDLER "python" installs a Python handler first
rel_signals.py app_after                 the application installs its SIGPROF handler
                                         after start()
rel_signals.py sigpending LIMIT THREADS TIMER
                                         RLIMIT_SIGPENDING=LIMIT, then THREADS threads
rel_signals.py exit_daemon OUT           exit with profiling on and daemon threads running
"""

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: workloads.py

import spprof
import workloads as w


def emit(**result):
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)


def worker_burn(seconds, out, key):
    t0 = time.thread_time()
    w.spin(seconds)
    out[key] = time.thread_time() - t0


def cmd_foreign(n, timer, handler):
    n = int(n)
    calls = []
    if handler == "python":
        signal.signal(signal.SIGPROF, lambda s, f: calls.append(s))
    cpu = {}
    spprof.start(interval_ms=1, timer=timer)
    threads = [
        threading.Thread(target=worker_burn, args=(1.0, cpu, f"t{i}"), name=f"t{i}")
        for i in range(2)
    ]
    for t in threads:
        t.start()
    sender = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, time, signal\n"
            "pid, n = int(sys.argv[1]), int(sys.argv[2])\n"
            "for _ in range(n):\n"
            "    os.kill(pid, signal.SIGPROF)\n"
            "    time.sleep(0.001)\n",
            str(os.getpid()),
            str(n),
        ]
    )
    worker_burn(1.0, cpu, "main")
    sender.wait(timeout=60)
    for t in threads:
        t.join()
    profile = spprof.stop()
    stats = spprof.stats()
    samples = profile.samples
    weight = {}
    for s in samples:
        weight[s.thread_name] = weight.get(s.thread_name, 0) + s.weight_ns
    emit(
        sent=n,
        sender_rc=sender.returncode,
        foreign=stats["foreign_signals"],
        python_handler_calls=len(calls),
        samples=len(samples),
        weight_s={k: v / 1e9 for k, v in weight.items()},
        cpu_s={("MainThread" if k == "main" else k): v for k, v in cpu.items()},
        handler_after=repr(signal.getsignal(signal.SIGPROF)),
    )


def cmd_app_after():
    calls = []

    def app_handler(signum, frame):
        calls.append(signum)

    spprof.start(interval_ms=1)
    w.spin(0.2)
    before = spprof.stats()["samples_captured"]
    signal.signal(signal.SIGPROF, app_handler)  # the application takes SIGPROF over
    os.kill(os.getpid(), signal.SIGPROF)
    w.spin(0.3)
    calls_during = len(calls)
    live = spprof.stats()
    profile = spprof.stop()
    calls_at_stop = len(calls)
    handler_after_stop = signal.getsignal(signal.SIGPROF) is app_handler
    os.kill(os.getpid(), signal.SIGPROF)
    w.spin(0.05)
    emit(
        captured_before_takeover=before,
        captured_after_takeover=live["samples_captured"] - before,
        app_calls_during=calls_during,
        app_calls_after_stop=len(calls) - calls_at_stop,
        handler_after_stop_is_app=handler_after_stop,
        timers_left=Path("/proc/self/timers").read_text().strip(),
        samples=len(profile.samples),
    )


def cmd_sigpending(limit, nthreads, timer):
    limit, nthreads = int(limit), int(nthreads)
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (limit, limit))
    cpu = {}
    start_error = None
    try:
        spprof.start(interval_ms=1, timer=timer)
    except Exception as exc:
        start_error = f"{type(exc).__name__}: {exc}"
    threads = [
        # 0.5 s each: under the process-wide itimer a signal lands on whichever thread runs,
        # and a 0.2 s thread could get none on a busy machine
        threading.Thread(target=worker_burn, args=(0.5, cpu, f"w{i}"), name=f"w{i}")
        for i in range(nthreads)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if start_error is not None:
        emit(start_error=start_error)
        return
    live = spprof.stats()
    profile = spprof.stop()
    stats = spprof.stats()
    sampled = {s.thread_name for s in profile.samples if s.thread_name.startswith("w")}
    emit(
        start_error=None,
        timer=live["timer"],
        timer_failures=stats["timer_failures"],
        timers_active_live=live["timers_active"],
        threads=nthreads,
        threads_sampled=len(sampled),
        samples=len(profile.samples),
        timers_left=Path("/proc/self/timers").read_text().strip(),
    )


def daemon_burn():
    while True:
        w.spin(0.05)


def cmd_exit_daemon(out):
    spprof.start(interval_ms=1, output_path=out)
    for i in range(3):
        threading.Thread(target=daemon_burn, name=f"daemon-{i}", daemon=True).start()
    w.spin(0.4)
    print("RESULT " + json.dumps({"exiting": True}), flush=True)
    # no stop(): the interpreter exits with profiling on and daemon threads running


COMMANDS = {
    "foreign": cmd_foreign,
    "app_after": cmd_app_after,
    "sigpending": cmd_sigpending,
    "exit_daemon": cmd_exit_daemon,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
