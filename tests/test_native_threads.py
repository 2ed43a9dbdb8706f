"""Every OS thread is accounted: threads without a Python state (made by C libraries, before or
after start()), threads that take a state now and then (PyGILState_Ensure / Release), threads
that block the sampling signal, and the CPU balance of the summary (issue 23, sections 2-3).

Each case runs in its own interpreter (tests/scripts/native_threads.py) with a tiny C library
the test builds with cc; the C threads measure their own CPU time with their thread CPU clock.
Linux only here: macOS lists its threads with task_threads (compile-checked only, no Mac
runs these).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_python

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="threads without a Python state: Linux only"
)

SCRIPTS = Path(__file__).parent / "scripts"
SCRIPT = str(SCRIPTS / "native_threads.py")


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("ntlib") / "libnative_threads.so"
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-pthread",
            "-O1",
            "-o",
            str(out),
            str(SCRIPTS / "native_threads_lib.c"),
        ],
        check=True,
    )
    return str(out)


def run_case(lib: str, case: str, env: dict | None = None, **opts) -> dict:
    r = run_python(SCRIPT, lib, case, json.dumps(opts), env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def within(value: float, truth: float, rel: float) -> bool:
    return abs(value - truth) <= rel * truth


@pytest.mark.parametrize("native", [False, True], ids=["python-frames", "native"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_c_thread_sampled_with_its_cpu_and_name(lib, when, native):
    # Old code: such a thread was never sampled nor listed (no entry, 0 s).
    out = run_case(lib, "worker", when=when, native=native, seconds=0.6)
    t = out["thread"]
    assert t["entries"] == 1, t
    assert t["names"] == ["OMP worker 3"]
    assert t["native_only"] == [True]
    assert within(t["on_cpu_ns"], out["truth_ns"], 0.10), (t["on_cpu_ns"], out["truth_ns"])
    assert within(t["cpu_ns"][0], out["truth_ns"], 0.10), (t["cpu_ns"], out["truth_ns"])
    # Every sample sits under one native root frame naming the thread.
    assert t["roots"] == ['<thread "OMP worker 3">']
    assert t["native_roots"] == [True]
    if native:
        assert "spin" in t["leaves"], t["leaves"]  # its native stack, down to the C loop
    else:
        assert t["leaves"] == ['<thread "OMP worker 3">']


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_c_thread_named_in_latin1_keeps_the_profile(lib, mode):
    # pthread_setname_np takes bytes: a C library that named its worker "w\xe9rker" (Latin-1)
    # made stop() raise UnicodeDecodeError in every mode (the export decodes names strictly),
    # and the profile was lost. The name is kept with the stray byte written \xe9.
    out = run_case(lib, "worker", mode=mode, name="w\xe9rker", seconds=0.4)
    t = out["thread"]
    assert t["names"] == ["w\\xe9rker"], t
    assert t["roots"] == ['<thread "w\\xe9rker">'], t
    assert within(t["on_cpu_ns"], out["truth_ns"], 0.10), (t["on_cpu_ns"], out["truth_ns"])


@pytest.mark.parametrize("hold", [0.0, 0.6], ids=["found-without-state", "found-with-state"])
def test_gilstate_churn_thread_is_one_thread_with_its_cpu(lib, hold):
    # A C thread calls a Python callback (a thread state made and deleted each call) and spins
    # in C between calls. "found-with-state": the first call holds its state 0.6 s, so the
    # thread-state scan finds it first, then its state goes while the thread lives on. Old
    # code: one record per state, "ended" with a fraction of its CPU while alive, C time lost.
    out = run_case(lib, "churn", hold=hold, seconds=0.6, rounds=30, python_seconds=0.01)
    t = out["thread"]
    assert t["entries"] == 1, t
    assert t["names"] == ["churner"]
    assert within(t["on_cpu_ns"], out["truth_ns"], 0.10), (t["on_cpu_ns"], out["truth_ns"])
    assert t["python_samples"] > 0  # Python frames while it holds a state
    assert '<thread "churner">' in t["roots"]  # native-only otherwise
    if hold:
        assert out["stats"]["threads_rejoined"] >= 1


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_c_thread_blocking_the_signal_is_named_and_left_alone(lib, mode):
    out = run_case(lib, "worker", when="after", block=True, mode=mode, seconds=0.6)
    t = out["thread"]
    assert t["entries"] == 1 and t["names"] == ["OMP worker 3"]
    assert t["signal_blocked"] == [True]
    assert t["samples"] == 0 and t["idle_ns"] == 0  # no timer, no census: never called idle
    # Its clock is read every pass: at most one pass (250 ms) of it is lost at its end.
    assert t["cpu_ns"][0] >= 0.4 * out["truth_ns"], (t["cpu_ns"], out["truth_ns"])


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_c_thread_masked_only_before_it_first_runs_is_sampled(lib, mode):
    # A thread waits with every signal blocked and no CPU for 0.9 s (three scans), then
    # unblocks them and spins 0.6 s: what pthread_create's newborn looks like to a scan until
    # the scheduler runs it. Seen masked by two scans, the old code took it for a thread that
    # blocks the sampling signal and never sampled it (CI: one of ~25,000 churned threads);
    # here 3 of 3 runs, signal_blocked [True] and no sample. A thread must have run (1 ms of
    # CPU) to be taken for one that blocks the signal.
    out = run_case(lib, "worker", when="after", block=2, wait=0.9, mode=mode, seconds=0.6)
    t = out["thread"]
    assert t["entries"] == 1 and t["names"] == ["OMP worker 3"]
    assert t["signal_blocked"] == [False], t
    assert out["stats"]["threads_signal_blocked"] == 0
    # Found by the first scan after it unblocked (passes every 250 ms): most of its spin.
    assert t["on_cpu_ns"] >= 0.4 * out["truth_ns"], (t["on_cpu_ns"], out["truth_ns"])
    assert t["idle_ns"] <= 0.1 * out["truth_ns"], t


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_python_thread_blocking_the_signal_is_named_and_not_idle(lib, mode):
    # Old code: absent in cpu mode; 96 % idle in wall mode although it used its CPU.
    out = run_case(lib, "python_blocked", mode=mode, seconds=0.6)
    t = out["thread"]
    assert t["entries"] == 1 and t["names"] == ["masked"]
    assert t["signal_blocked"] == [True]
    assert within(t["cpu_ns"][0], out["truth_ns"], 0.10), (t["cpu_ns"], out["truth_ns"])
    # Wall mode: only the census ticks before the drain's check (a pass or two, 250 ms each)
    # wrote idle records for it (measured 0-60 ms of 600 on a loaded VM); old code: 96 %.
    assert t["idle_ns"] <= 0.3 * out["truth_ns"], t
    s = out["stats"]
    assert within(s["cpu_signal_blocked_ns"], out["truth_ns"], 0.10), s


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_a_thread_blocking_the_signal_behind_many_others_is_still_found(lib, mode):
    # 600 threads wait while the masked one spins: a pass reads the CPU clocks of at most 256
    # threads that take the signal (SessionThreads::kMaskChecksPerPass), in turn, so the
    # masked thread (slot 601) is reached on the third pass. A turn that always began at the
    # first slot would never reach it: no samples, its CPU left out of the balance.
    out = run_case(lib, "python_blocked", mode=mode, seconds=1.5, idle=600)
    t = out["thread"]
    assert t["entries"] == 1 and t["names"] == ["masked"]
    assert t["signal_blocked"] == [True]
    assert within(t["cpu_ns"][0], out["truth_ns"], 0.10), (t["cpu_ns"], out["truth_ns"])
    assert within(out["stats"]["cpu_signal_blocked_ns"], out["truth_ns"], 0.10), out["stats"]


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_sampling_signal_brings_no_eintr(lib, mode):
    # A C thread spins a little, then waits in read(), nanosleep() and a timed futex wait,
    # 1,500 times. Its CPU timer fires while it runs; with per-thread timers the signal is
    # generated on the way back to user space, never while it sleeps. Same count as without
    # spprof (zero), and the thread was sampled (the timer was armed on it).
    base = run_case(lib, "eintr", mode=mode, profile=False, rounds=1500)
    out = run_case(lib, "eintr", mode=mode, rounds=1500)
    assert out["waiter_samples"] > 0
    assert out["eintr"] <= base["eintr"], (out, base)


def test_cpu_balance_adds_up(lib):
    # C threads that spin at once (found up to 250 ms late), a Python spin on the main thread:
    # the profile and the named parts cover the process's CPU time to within 5 %.
    out = run_case(lib, "balance", seconds=0.6)
    s = out["stats"]
    process = s["cpu_process_ns"]
    # Every part, as shares of the process's CPU: pytest would cut the dict short.
    parts_said = " ".join(
        f"{k[4:-3]}={v / process:.3f}"
        for k, v in s.items()
        if k.startswith("cpu_") and k.endswith("_ns")
    )
    assert process >= out["truth_ns"]
    parts = (
        s["cpu_profile_ns"]
        + s["cpu_spprof_threads_ns"]
        + s["cpu_signal_blocked_ns"]
        + s["cpu_before_found_ns"]
        + s["cpu_unsampled_threads_ns"]
        + s["cpu_ended_between_scans_ns"]
    )
    assert parts + s["cpu_unaccounted_ns"] == process
    assert abs(s["cpu_unaccounted_ns"]) <= 0.05 * process, parts_said
    # The C threads are found by the next drain pass (every 250 ms): what each ran before is
    # named as such, at most a pass and a little; the profile holds the rest.
    assert s["cpu_before_found_ns"] <= 2 * 0.3e9, parts_said
    assert s["cpu_profile_ns"] + s["cpu_before_found_ns"] >= 0.85 * process, parts_said


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_c_threads_ending_while_found_are_neither_refused_nor_left_alone(lib, mode):
    # ~25,000 C threads of ~100 us, two at a time: the scan lists many that end before their
    # timer is made (timer_create on a dead thread's clock: EINVAL), and catches some in
    # pthread_create's first instructions, where the new thread blocks every signal. Old code,
    # cpu mode: "thread N will not be sampled" on stderr in 4 of 4 runs, and now and then such a
    # thread marked as blocking the signal (never sampled for its whole life).
    opts = {"seconds": 2, "width": 2, "each": 1e-4, "mode": mode}
    r = run_python(SCRIPT, lib, "thread_churn", json.dumps(opts), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "will not be sampled" not in r.stderr and "no CPU timer" not in r.stderr, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    s = out["stats"]
    # ~25,000 threads in 2 s plain; 1,000 under AddressSanitizer on a loaded machine (its
    # pthread_create is slow): enough either way for the scan to meet threads as they end.
    assert out["started"] >= 500, out
    assert s["timer_attach_failures"] == 0, s
    assert s["threads_signal_blocked"] == 0, s
    # Threads too short for any scan to see are named in the balance, not lost.
    assert abs(s["cpu_unaccounted_ns"]) <= 0.05 * s["cpu_process_ns"], s


def test_cpu_balance_line_in_summary_and_report(tmp_path):
    out = tmp_path / "p.spprof"
    target = tmp_path / "t.py"
    target.write_text(
        "import time\nt = time.thread_time()\nwhile time.thread_time() - t < 0.4: pass\n"
    )
    r = run_python("-m", "spprof", "-o", str(out), str(target))
    assert r.returncode == 0, r.stderr
    recorded = [ln.strip() for ln in r.stderr.splitlines() if "CPU balance:" in ln]
    assert len(recorded) == 1, r.stderr
    assert recorded[0].startswith("CPU balance: process ") and "profile " in recorded[0]
    rep = run_python("-m", "spprof", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    reported = [ln.strip() for ln in (rep.stdout + rep.stderr).splitlines() if "CPU balance:" in ln]
    assert reported == recorded


def test_openblas_threads_are_accounted(lib):
    # find_spec, not import: importing numpy here would start OpenBLAS's pool in the test
    # process, where later tests count the threads they sample.
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("no numpy wheel for this interpreter (Makefile DEV_DEPS)")
    out = run_case(lib, "numpy", env={"OPENBLAS_NUM_THREADS": "2"}, seconds=1.5)
    s = out["stats"]
    assert s["threads_native_only"] >= 1, out  # OpenBLAS's worker, no Python state
    process = s["cpu_process_ns"]
    # Old code: 47 % of the process's CPU time was in no profile.
    missing = process - s["cpu_profile_ns"] - s["cpu_spprof_threads_ns"]
    assert missing <= 0.05 * process, s
