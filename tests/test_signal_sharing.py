"""Sharing signals with the program: spprof's per-thread timers deliver a real-time signal no
one else uses, so SIGPROF and ITIMER_PROF remain the program's (yappi-style samplers,
gperftools, its own); the itimer fallback, which needs SIGPROF, refuses when the program owns
it; a signal spprof did not send is never a sample."""

from __future__ import annotations

import json
import signal
import sys

import pytest

import spprof
from conftest import run_python, skip_when_emulated

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="signal-driven sampling is the Linux path"
)

PROGRAM_OWN_SAMPLER = """
import json, signal, sys, threading, time
import spprof

ticks = []
signal.signal(signal.SIGPROF, lambda s, f: ticks.append(1))

def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

with spprof.Profiler(interval_ms=5) as p:
    signal.setitimer(signal.ITIMER_PROF, 0.005, 0.005)  # the program's own 5 ms sampler
    t0 = time.process_time()
    burn(0.5)
    cpu = time.process_time() - t0
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
st = p.profile.stats
mine = sum(s.weight_ns for s in p.get_samples() if any(f.function_name == "burn" for f in s.frames))
print(json.dumps({"ticks": len(ticks), "cpu": cpu, "spprof_s": mine / 1e9,
                  "signal": st["sampling_signal"], "foreign": st["foreign_signals"]}))
"""


@skip_when_emulated(
    "qemu-user hands a host signal to the guest only between translated blocks, so the "
    "program's ITIMER_PROF expirations merge (53 of ~102 ticks arrived in one run)"
)
def test_program_with_its_own_sigprof_sampler_gets_every_tick():
    # At 2df7638 spprof's timers shared SIGPROF with the program: its 5 ms handler got 11-12
    # of ~100 ticks and spprof counted the program's signals as its own samples.
    r = run_python("-c", PROGRAM_OWN_SAMPLER, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    expected = out["cpu"] / 0.005
    # ITIMER_PROF expires on the scheduler tick: expirations merge, more so on a loaded
    # machine (63 of ~100 with two builds beside it; 31 of ~100 in a CI lane with other
    # test runs beside it); sharing the signal gave 11-12.
    assert out["ticks"] >= 0.25 * expected, out
    assert out["signal"].startswith("SIGRTMIN+"), out
    assert out["foreign"] == 0, out
    # spprof's own profile is right: 0.5 s of CPU in burn, not more
    assert abs(out["spprof_s"] - out["cpu"]) <= 0.15 * out["cpu"], out


def test_the_sampling_signal_is_reported_and_sigprof_left_alone():
    before = signal.getsignal(signal.SIGPROF)
    with spprof.Profiler(interval_ms=10):
        assert signal.getsignal(signal.SIGPROF) == before
        name = spprof.stats()["sampling_signal"]
    assert name.startswith("SIGRTMIN+"), name
    number = signal.SIGRTMIN + int(name.split("+")[1])
    assert signal.getsignal(number) == signal.SIG_DFL  # ours is gone after stop


def test_itimer_fallback_refuses_when_the_program_owns_sigprof():
    previous = signal.signal(signal.SIGPROF, lambda s, f: None)
    try:
        with pytest.raises(RuntimeError, match="SIGPROF handler"):
            spprof.start(interval_ms=10, timer="itimer")
        assert not spprof.is_active()
    finally:
        signal.signal(signal.SIGPROF, previous)
    signal.setitimer(signal.ITIMER_PROF, 10.0, 10.0)
    try:
        with pytest.raises(RuntimeError, match="ITIMER_PROF"):
            spprof.start(interval_ms=10, timer="itimer")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)


UNHANDLED_SIGPROF = """
import os, signal, time
import spprof
spprof.start(interval_ms=5)
time.sleep(0.1)
os.kill(os.getpid(), signal.SIGPROF)  # no handler: the default action, as without spprof
time.sleep(1)
print("survived")
"""


def test_a_sigprof_nobody_handles_ends_the_program_as_without_spprof():
    r = run_python("-c", UNHANDLED_SIGPROF, timeout=60)
    assert r.returncode == -signal.SIGPROF, (r.returncode, r.stdout, r.stderr)
    assert "survived" not in r.stdout
