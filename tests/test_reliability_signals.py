"""Signals from outside and from the application: foreign SIGPROFs, SIGINT during a
`python -m spprof` session, an application that owns SIGPROF, too few pending signals for
one timer per thread, and interpreter exit with profiling on. Each runs in a subprocess
(tests/scripts/rel_signals.py) with a timeout."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time

import pytest

import spprof
from conftest import SCRIPTS, on_one_version
from test_reliability_common import figure, run_workload, scale

EXIT_SCRIPT = SCRIPTS / "cli_exit_signals.py"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="SIGPROF-driven sampling is the Linux path"
)


@pytest.mark.parametrize(("timer", "handler"), [("auto", "python"), ("itimer", "none")])
def test_kill_prof_from_another_process_while_sampling(timer, handler):
    # Per-thread timers use a real-time signal: SIGPROF is the program's alone, its handler
    # gets every one. The itimer fallback owns SIGPROF: a foreign one is counted, never a
    # sample. (With no handler at all and per-thread timers, SIGPROF kills the program as it
    # would without spprof: test_signal_sharing.py.)
    n = scale(300, 3000)
    _, r = run_workload("rel_signals.py", "foreign", n, timer, handler, timeout=120)
    figure(
        f"foreign_sigprof[{timer},{handler}]",
        sent=n,
        foreign_counted=r["foreign"],
        python_handler_calls=r["python_handler_calls"],
        samples=r["samples"],
    )
    assert r["sender_rc"] == 0
    # standard signals merge while pending, so some of the n may arrive as one
    if timer == "auto":
        assert r["foreign"] == 0, r  # never reached spprof's handler
        # Python runs its handler once per trip of its flag: signals arriving meanwhile merge
        assert 1 <= r["python_handler_calls"] <= n, r
        assert r["handler_after"].startswith("<function")
    else:
        assert 0.5 * n <= r["foreign"] <= n, r
    if handler == "python":
        assert r["handler_after"].startswith("<function")
    else:
        assert r["python_handler_calls"] == 0
        assert r["handler_after"] == "<Handlers.SIG_DFL: 0>"
    threads = {"MainThread", "t0", "t1"}
    assert threads <= set(r["weight_s"]), r
    if timer == "auto":  # per-thread timers: each thread's time is right
        for name in threads:
            assert abs(r["weight_s"][name] - r["cpu_s"][name]) <= 0.1 * r["cpu_s"][name], r
    else:  # setitimer merges expirations (docs/reliability.md): shares, not totals
        total = sum(r["weight_s"][n] for n in threads)
        for name in threads:
            assert 0.2 <= r["weight_s"][name] / total <= 0.47, r


def test_sigint_during_a_cli_session_with_threads_dies_by_sigint_and_writes_the_profile(
    tmp_path,
):
    out = tmp_path / "int.json"
    code = (
        "import threading, time, sys\n"
        "def busy():\n"
        "    while True:\n"
        "        sum(i * i for i in range(1000))\n"
        "for i in range(3):\n"
        "    threading.Thread(target=busy, name=f'busy-{i}', daemon=True).start()\n"
        "print('READY', flush=True)\n"
        "busy()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "spprof", "-q", "-i", "1", "-o", str(out), "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "SPPROF_DEBUG"},
        preexec_fn=_default_signals,
    )
    try:
        assert proc.stdout.readline().strip() == "READY"
        time.sleep(0.7)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGINT, err  # as `python` ends on Ctrl-C
    assert "KeyboardInterrupt" in err
    doc = json.loads(out.read_text())
    names = {p["name"] for p in doc["profiles"]}
    assert any("busy-" in n for n in names) and any("MainThread" in n for n in names), names
    frames = {f["name"] for f in doc["shared"]["frames"]}
    assert "busy" in frames


# ---- the CLI and the signals that end a program ----------------------------------------------

EXIT_SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT]


def _default_signals() -> None:
    """In the child: the actions a program started from a terminal has (a shell may have left
    SIGINT/SIGQUIT ignored for background jobs), and no core file for SIGQUIT."""
    for signum in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _run_until_signalled(tmp_path, how: str, signum: int, *extra: str):
    """Run tests/scripts/cli_exit_signals.py under the CLI, send `signum` once it is READY and
    has run 1 s; return (returncode, seconds from the signal to the end, stdout, stderr, out)."""
    out = tmp_path / "p.spprof"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spprof", "-i", "1", "-o", str(out), str(EXIT_SCRIPT), how, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "SPPROF_DEBUG"},
        preexec_fn=_default_signals,
    )
    try:
        assert proc.stdout.readline().strip() == "READY"
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signum)
        try:
            stdout, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, err = proc.communicate()
            pytest.fail(f"still running 10 s after {signal.Signals(signum).name}: {err}")
        return proc.returncode, time.monotonic() - sent, stdout, err, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _assert_worker_profiled(out) -> None:
    profile = spprof.load(out)
    burns = [s for s in profile.samples if any(f.function_name == "worker_burn" for f in s.frames)]
    # The worker spun for the second before the signal: by weight (a loaded machine delivers
    # fewer, heavier samples), at least a fifth of it (its share of a core under such load)
    assert sum(s.weight_ns for s in burns) >= 0.2e9, len(burns)
    assert {s.thread_name for s in burns} == {"worker"}


@pytest.mark.parametrize("how", ["py", "c"])
@pytest.mark.parametrize("signum", EXIT_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_exit_signal_writes_the_profile_then_the_process_dies_by_it(tmp_path, signum, how):
    # py: the main thread in Python with a non-daemon worker (threading._shutdown would wait
    # for it forever); c: the main thread in one long C call, which returns only in 30 s.
    rc, seconds, _, err, out = _run_until_signalled(tmp_path, how, signum)
    figure(f"cli_exit_signal[{signal.Signals(signum).name},{how}]", seconds=round(seconds, 3))
    assert rc == -signum, err  # killed by the signal, as without spprof
    assert seconds < 2.0, err
    assert "Profile written to" in err  # the summary
    _assert_worker_profiled(out)


@pytest.mark.parametrize("signum", EXIT_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_exit_signal_while_c_code_holds_the_gil_says_so_and_still_dies_by_it(tmp_path, signum):
    rc, seconds, _, err, out = _run_until_signalled(tmp_path, "gil", signum)
    assert rc == -signum, err
    assert seconds < 3.5, err
    # What the drain resolved is written without the GIL (session/exit_dump.h), said in one line.
    lines = [line for line in err.splitlines() if line.startswith("spprof: ")]
    assert len(lines) == 1, err
    assert "held the GIL" in lines[0] and f"to {out} " in lines[0], lines
    assert spprof.load(out).stats["written_without_gil"] == 1


def test_sigint_in_python_code_prints_keyboardinterrupt_and_dies_by_sigint(tmp_path):
    # A daemon worker: with a non-daemon one, python itself waits for it after Ctrl-C.
    rc, seconds, _, err, out = _run_until_signalled(tmp_path, "py", signal.SIGINT, "daemon")
    assert rc == -signal.SIGINT, err
    assert seconds < 2.0, err
    traceback = err[err.index("Traceback (most recent call last)") :]
    assert traceback.rstrip().endswith("KeyboardInterrupt"), err
    assert "cli_exit_signals.py" in traceback
    package = os.path.dirname(os.path.abspath(spprof.__file__))
    assert "runpy" not in traceback and package not in traceback, traceback
    _assert_worker_profiled(out)


def test_the_programs_own_sigterm_handler_keeps_priority(tmp_path):
    rc, _, stdout, err, out = _run_until_signalled(tmp_path, "own", signal.SIGTERM, "daemon")
    assert "HANDLED" in stdout
    assert rc == 7, err  # the program went on and exited by itself
    _assert_worker_profiled(out)


def test_application_installing_its_sigprof_handler_after_start_both_keep_working():
    _, r = run_workload("rel_signals.py", "app_after", timeout=60)
    figure("app_handler_after_start", **{k: v for k, v in r.items() if k != "timers_left"})
    # ours is removed at stop: the application's stays, and receives SIGPROF afterwards
    assert r["handler_after_stop_is_app"]
    assert r["app_calls_after_stop"] == 1
    assert r["timers_left"] == ""
    assert r["app_calls_during"] >= 1
    # ... and sampling kept working after the takeover (0.3 s of CPU at 1 ms)
    assert r["captured_after_takeover"] > 30, r


def test_application_handler_after_start_is_kept_at_stop_and_timers_are_gone():
    # The part of the above that holds today: no timer survives, the app's handler stays.
    _, r = run_workload("rel_signals.py", "app_after", timeout=60)
    assert r["handler_after_stop_is_app"]
    assert r["app_calls_after_stop"] == 1
    assert r["timers_left"] == ""
    # sampling ran before the takeover (0.2 s at 1 ms: 200 on an idle machine, 5-10 at a load
    # of 6, where the tick rarely finds the thread)
    assert r["captured_before_takeover"] >= 3, r


@on_one_version("5 s: the timers' limit, the same on every version")
def test_rlimit_sigpending_too_low_for_one_timer_per_thread():
    # At most 4 pending signals/timers for this user: a few threads get a timer, the rest
    # are reported on stderr and left unsampled (or, if even the first is refused, the
    # session falls back to setitimer). Never a crash.
    proc, r = run_workload("rel_signals.py", "sigpending", 4, 10, "auto", timeout=60)
    figure(
        "rlimit_sigpending[4]",
        timer=r["timer"],
        threads=r["threads"],
        threads_sampled=r["threads_sampled"],
        timer_failures=r["timer_failures"],
    )
    assert r["timers_left"] == ""
    if r["timer"] == "itimer":
        assert r["threads_sampled"] == r["threads"]
        assert "falling back to setitimer" in proc.stderr
    else:
        assert r["timer_failures"] >= 1
        assert r["threads_sampled"] < r["threads"]
        assert r["threads_sampled"] >= 0
        assert "will not be sampled" in proc.stderr
        assert "Resource temporarily unavailable" in proc.stderr


@on_one_version("13 s: the native timer fallback, the same on every version")
def test_rlimit_sigpending_zero_falls_back_to_itimer_or_refuses_clearly():
    proc, r = run_workload("rel_signals.py", "sigpending", 0, 10, "auto", timeout=60)
    figure("rlimit_sigpending[0,auto]", timer=r["timer"], threads_sampled=r["threads_sampled"])
    assert r["timer"] == "itimer"
    assert r["threads_sampled"] == 10
    assert "falling back to setitimer(ITIMER_PROF)" in proc.stderr
    proc, r = run_workload("rel_signals.py", "sigpending", 0, 10, "thread", timeout=60)
    assert r["start_error"].startswith("RuntimeError: no thread could be sampled"), r


def test_exit_with_profiling_on_and_daemon_threads_running_writes_the_profile(tmp_path):
    out = tmp_path / "exit.json"
    run_workload("rel_signals.py", "exit_daemon", str(out), timeout=60)
    doc = json.loads(out.read_text())
    names = {p["name"] for p in doc["profiles"]}
    assert sum(1 for n in names if "daemon-" in n) == 3, names
    assert any("MainThread" in n for n in names)
    frames = {f["name"] for f in doc["shared"]["frames"]}
    assert {"daemon_burn", "spin_inner", "cmd_exit_daemon"} <= frames
