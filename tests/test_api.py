"""The library API: arguments, errors, session lifecycle, context manager, decorator."""

from __future__ import annotations

import functools
import json
import operator
import os
import signal
import statistics
import sys
import time
from pathlib import Path

import pytest

import spprof
from conftest import self_weight_by_function
from spprof import _session


def burn(seconds: float) -> int:
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += sum(i * i for i in range(200))
    return n


def test_time_in_spprofs_own_start_and_stop_is_dropped_not_shown(monkeypatch):
    # Timers run from inside start() to inside stop(). Stretch both ends with C-only work (a
    # `x in range(...)` scan has no Python frame of its own), so samples surely land there.
    scan = functools.partial(operator.contains, range(5_000_000))  # ~0.12 s of CPU
    monkeypatch.setattr(_session._debug, "enabled", True)
    monkeypatch.setattr(_session._debug, "debug", scan)  # start() logs after arming
    monkeypatch.setattr(_session, "_remove_thread_hook", functools.partial(scan, None))  # stop()
    try:
        spprof.start(interval_ms=1)
        burn(0.2)
        p = spprof.stop()
    finally:
        monkeypatch.undo()
        _session._remove_thread_hook()
    own = {os.path.join(os.path.dirname(spprof.__file__), f) for f in ("_session.py", "_debug.py")}
    assert [s for s in p.samples if any(f.filename in own for f in s.frames)] == []
    assert p.stats["samples_in_profiler"] >= 1  # the stretched ends were sampled, then dropped
    in_burn = sum(s.weight_ns for s in p.samples if "burn" in {f.function_name for f in s.frames})
    assert in_burn >= 0.9 * sum(s.weight_ns for s in p.samples)  # what is left is the program


def test_time_below_spprofs_helpers_is_dropped_whatever_runs_there(monkeypatch):
    # start() calls helpers after arming (child CPU marks, stats); what they call (stdlib
    # Python, a dataclass __init__) is the running frame then, not spprof's file. Stretch one
    # with stdlib Python work (statistics.median_low sorts 3M ints: ~0.15 s), then check no
    # sample of it is left. The old running-frame-only rule kept ~100 such samples.
    stretch = functools.partial(statistics.median_low, range(3_000_000))
    monkeypatch.setattr(_session._children, "_children_cpu_ns", stretch)
    try:
        spprof.start(interval_ms=1)
        monkeypatch.undo()
        burn(0.2)
        p = spprof.stop()
    finally:
        monkeypatch.undo()
    assert [s for s in p.samples if any("statistics" in f.filename for f in s.frames)] == []
    assert p.stats["samples_in_profiler"] >= 1
    in_burn = sum(s.weight_ns for s in p.samples if "burn" in {f.function_name for f in s.frames})
    assert in_burn >= 0.9 * sum(s.weight_ns for s in p.samples)


@pytest.mark.parametrize("bad", [0, -1, 0.5, 1001, "ten", None, True, float("nan")])
def test_bad_interval_is_a_value_error_naming_the_interval(bad):
    with pytest.raises(ValueError, match="interval"):
        spprof.start(interval_ms=bad)
    assert not spprof.is_active()


@pytest.mark.parametrize("good", [1, 1000, 2.5])
def test_interval_bounds_are_inclusive(good):
    spprof.start(interval_ms=good)
    try:
        assert spprof.is_active()
    finally:
        p = spprof.stop()
    assert p.interval_ms == float(good)


def test_unknown_mode_and_format_and_timer_are_value_errors():
    with pytest.raises(ValueError, match="mode"):
        spprof.start(mode="gpu")
    with pytest.raises(ValueError, match="format"):
        spprof.start(output_path="x.out", format="svg")
    with pytest.raises(ValueError, match="timer"):
        spprof.start(timer="hpet")
    with pytest.raises(ValueError, match="memory_limit_mb"):
        spprof.start(memory_limit_mb=0)


def test_start_twice_and_stop_without_start_are_runtime_errors():
    with pytest.raises(RuntimeError, match="not profiling"):
        spprof.stop()
    spprof.start()
    try:
        with pytest.raises(RuntimeError, match="already"):
            spprof.start()
    finally:
        spprof.stop()
    with pytest.raises(RuntimeError, match="not profiling"):
        spprof.stop()


def test_unwritable_output_path_fails_before_profiling(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        spprof.start(output_path=tmp_path / "missing" / "p.json")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores directory permissions
            pytest.skip("running as root: read-only directories are writable")
        with pytest.raises(PermissionError, match="not writable"):
            spprof.start(output_path=ro / "p.json")
    finally:
        ro.chmod(0o700)
    assert not spprof.is_active()


def test_output_path_is_a_directory_is_an_os_error(tmp_path):
    with pytest.raises(IsADirectoryError):
        spprof.start(output_path=tmp_path)


def test_profiler_context_manager_collects_the_function_that_ran():
    with spprof.Profiler(interval_ms=5) as p:
        burn(0.3)
    samples = p.get_samples()
    assert samples is p.profile.samples
    weights = self_weight_by_function(samples)
    top = max(weights, key=weights.get)
    assert top in ("burn", "<genexpr>")
    others = [
        (s.frames[-1].function_name, s.frames[-1].filename, s.frames[-1].lineno)
        for s in samples
        if s.frames[-1].function_name not in ("burn", "<genexpr>")
    ]
    assert not others, others
    # frames[0] is the outermost frame: a test function of this module or pytest's machinery
    assert any(
        f.function_name == "test_profiler_context_manager_collects_the_function_that_ran"
        for f in samples[0].frames
    )
    assert p.profile.mode == "cpu"
    assert p.profile.duration_ns > 250_000_000


def test_sample_fields_identify_the_thread():
    import threading

    with spprof.Profiler(interval_ms=5) as p:
        burn(0.2)
    s = p.get_samples()[0]
    assert s.thread_id == threading.get_ident()
    assert s.native_thread_id == threading.get_native_id()
    assert s.thread_name == threading.current_thread().name
    assert s.on_cpu is True
    assert s.weight_ns >= 5_000_000
    assert s.timestamp_ns > 0


def test_profile_decorator_writes_each_call(tmp_path):
    out = tmp_path / "decorated.speedscope.json"

    @spprof.profile(output_path=out, interval_ms=5)
    def work():
        return burn(0.2)

    assert work() > 0
    doc = json.loads(out.read_text())
    names = {f["name"] for f in doc["shared"]["frames"]}
    assert any("burn" in n for n in names)
    assert work.last_profile.sample_count > 10


def test_stop_writes_output_path_in_the_format_of_its_suffix(tmp_path):
    out = tmp_path / "p.collapsed.txt"
    spprof.start(interval_ms=5, output_path=out)
    burn(0.2)
    p = spprof.stop()
    text = out.read_text()
    assert p.sample_count > 0
    assert any(
        line.split(";")[-1].startswith("burn") or "genexpr" in line for line in text.splitlines()
    )


def test_stats_report_the_session(tmp_path):
    spprof.start(interval_ms=2)
    burn(0.3)
    live = spprof.stats()
    p = spprof.stop()
    after = spprof.stats()
    assert live["timer"] in ("per-thread", "itimer")
    assert live["samples_captured"] > 0
    assert after["samples_captured"] >= live["samples_captured"]
    assert after["timers_active"] == 0
    assert after["samples_dropped"] == p.dropped_count == 0
    assert after["timer"] == live["timer"]


def test_itimer_fallback_can_be_chosen_and_samples_this_thread():
    cpu0 = time.thread_time_ns()
    with spprof.Profiler(interval_ms=5, timer="itimer") as p:
        burn(0.3)
    cpu = time.thread_time_ns() - cpu0
    assert spprof.stats()["timer"] == "itimer"
    w = self_weight_by_function(p.get_samples())
    assert set(w) <= {"burn", "<genexpr>"}
    # Each sample stands for the thread's CPU since its previous one, so the profile holds the
    # thread's CPU even where the kernel noticed half the expiries (a loaded machine: 30
    # signals for 60 intervals, measured). Only the stretch after the last sample is missing.
    assert 0.85 * cpu - 10_000_000 <= sum(w.values()) <= cpu


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/timers is Linux")
def test_no_timer_or_handler_survives_stop():
    before = signal.getsignal(signal.SIGPROF)
    spprof.start(interval_ms=5)
    burn(0.05)
    assert Path("/proc/self/timers").read_text().strip() != ""
    spprof.stop()
    assert Path("/proc/self/timers").read_text().strip() == ""
    assert signal.getsignal(signal.SIGPROF) == before


def test_foreign_sigprof_reaches_a_python_handler_installed_before_start():
    calls = []
    previous = signal.signal(signal.SIGPROF, lambda signum, frame: calls.append(signum))
    try:
        spprof.start(interval_ms=10)
        os.kill(os.getpid(), signal.SIGPROF)
        burn(0.05)  # Python runs its handler at the next bytecode boundary
        spprof.stop()
        assert calls == [signal.SIGPROF]
        # spprof samples on a real-time signal: SIGPROF never reached its handler at all
        assert spprof.stats()["foreign_signals"] == 0
        os.kill(os.getpid(), signal.SIGPROF)
        burn(0.02)
        assert calls == [signal.SIGPROF, signal.SIGPROF]
    finally:
        signal.signal(signal.SIGPROF, previous)


def test_memory_limit_drops_and_counts_samples():
    # Each of 400 functions sits under a chain of three of its own, so nearly every sample is a
    # new stack of four new frames (~1.5 KB each, measured).
    code = "\n".join(
        f"def f{i}():\n    return burn(0.0015)\n"
        + "".join(
            f"def f{i}_{d}():\n    return f{i}{'_' + str(d - 1) if d else ''}()\n" for d in range(3)
        )
        for i in range(400)
    )
    ns = {"burn": burn}
    exec(compile(code, "<many>", "exec"), ns)

    def workload() -> None:
        for _ in range(2):
            for i in range(400):
                ns[f"f{i}_2"]()

    # How much the stacks take is measured on an unlimited run of the same work: the kernel
    # delivers from ~80 (loaded machine, ASan) to ~250 signals per CPU second. The limit is the
    # threads' own memory (contexts and the ring pages they touched) plus a third of that.
    with spprof.Profiler(interval_ms=1):
        workload()
    free = spprof.stats()
    assert free["dropped_memory_limit"] == 0
    stacks_bytes = free["memory_bytes"] - free["thread_memory_bytes"]
    limit_mb = (free["thread_memory_bytes"] + stacks_bytes / 3) / (1024 * 1024)
    with spprof.Profiler(interval_ms=1, memory_limit_mb=limit_mb) as p:
        workload()
    stats = spprof.stats()
    assert stats["dropped_memory_limit"] > 0
    assert p.profile.dropped_count >= stats["dropped_memory_limit"]
    assert stats["memory_bytes"] <= stats["memory_limit_bytes"] * 1.5
