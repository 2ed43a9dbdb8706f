"""A program that takes SIGPROF or ITIMER_PROF after spprof started with `timer="itimer"` (which
needs both): the program's timer and handler win. spprof notices at its next drain wake-up,
stops its own ITIMER_PROF, leaves the program's handler in place, says so once on stderr and
samples no more (`stats()["sig_itimer_yielded"]`), so its profile holds only the CPU time
before. Issue 24, "Signals". Each case in its own interpreter; the program's own handler counts
its calls."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import run_python, skip_when_emulated

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the itimer fallback is the Linux path"
)

PROGRAM = """
import json, signal, sys, time
import spprof

def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

ticks = []
with spprof.Profiler(interval_ms=10, timer="itimer") as p:
    c0 = time.process_time()
    burn(0.3)
    signal.signal(signal.SIGPROF, lambda s, f: ticks.append(1))
    if sys.argv[1] == "timer":
        signal.setitimer(signal.ITIMER_PROF, 0.005, 0.005)  # the program's own 5 ms sampler
    burn(0.15)  # spprof's next drain wake-up (50 ms) notices
    before = len(ticks)
    t0 = time.process_time()
    burn(1.0)
    cpu = time.process_time() - t0
    after = len(ticks) - before
    left = signal.getitimer(signal.ITIMER_PROF)[0]
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    session_cpu = time.process_time() - c0
st = p.profile.stats
spprof_s = sum(s.weight_ns for s in p.get_samples()) / 1e9
print(json.dumps({"ticks_after": after, "cpu": cpu, "left": left, "spprof_s": spprof_s,
                  "session_cpu": session_cpu, "yielded": st["sig_itimer_yielded"],
                  "given_up_s": st["cpu_sig_given_up_ns"] / 1e9,
                  "unaccounted_s": st["cpu_unaccounted_ns"] / 1e9,
                  "handler": signal.getsignal(signal.SIGPROF) is not signal.SIG_DFL}))
"""

MESSAGE = "the program installed its own SIGPROF handler or ITIMER_PROF timer"


def run_case(case: str) -> dict[str, object]:
    r = run_python("-c", PROGRAM, case, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(MESSAGE) == 1, r.stderr  # said once
    return json.loads(r.stdout.strip().splitlines()[-1])


@skip_when_emulated("qemu-user merges a host's ITIMER_PROF expirations (test_signal_sharing.py)")
def test_the_programs_own_sigprof_sampler_wins_over_the_itimer():
    # At 3697f84 spprof put its handler back in front of the program's and took the program's
    # 5 ms ITIMER_PROF ticks as its own 10 ms samples: the program got 0 of ~200 and the
    # profile held about twice the CPU time the program used.
    out = run_case("timer")
    expected = float(out["cpu"]) / 0.005  # type: ignore[arg-type]
    # Under load the kernel notices only part of the ITIMER_PROF expiries that fall due (134 of
    # 200 in a CI lane at load ~5; 30 of 60 measured plain): the bound is the old code's 0.
    assert int(out["ticks_after"]) >= 0.4 * expected, out  # type: ignore[call-overload]
    assert out["yielded"] == 1, out
    # spprof's counts stay true: the 0.3 s before the program took SIGPROF is in the profile,
    # none of the program's ticks are (the last 1.0 s burn is not sampled at all)
    spprof_s, session_cpu, cpu = (float(out[k]) for k in ("spprof_s", "session_cpu", "cpu"))  # type: ignore[arg-type]
    assert spprof_s >= 0.15, out
    assert spprof_s <= session_cpu - 0.9 * cpu, out
    # ... and the summary's CPU balance says where the rest went: after the program took
    # SIGPROF (the last 1.0 s and the 0.15 s before it), not "not accounted"
    given_up, unaccounted = float(out["given_up_s"]), float(out["unaccounted_s"])  # type: ignore[arg-type]
    assert given_up >= 0.9 * cpu, out
    assert abs(unaccounted) <= 0.2, out


def test_a_program_handler_alone_stops_spprofs_itimer():
    # The program takes SIGPROF but runs no timer of its own: spprof's ITIMER_PROF must not go
    # on feeding the program's handler. At 3697f84 it went on running (and spprof's handler was
    # put back in front of the program's).
    out = run_case("handler")
    assert out["yielded"] == 1, out
    assert out["left"] == 0.0, out  # no ITIMER_PROF left running
    assert out["ticks_after"] == 0, out
    assert out["handler"] is True, out  # the program's handler stays in place


# The program takes spprof's real-time sampling signal with signal.signal while four threads
# run at 1 ms. Python's C-level handler writes one byte to the wakeup fd per delivery (no
# coalescing, unlike the Python-level handler calls), so the bytes count exactly what reached
# the program's handler: its own 5 signals, plus any spprof tick.
RT_PROGRAM = """
import json, os, signal, sys, threading, time
import spprof

def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

stop = threading.Event()
def spin():
    while not stop.is_set():
        burn(0.001)

r, w = os.pipe()
os.set_blocking(w, False)
signal.set_wakeup_fd(w, warn_on_full_buffer=False)
threads = [threading.Thread(target=spin) for _ in range(3)]
with spprof.Profiler(interval_ms=1) as p:
    for t in threads:
        t.start()
    burn(0.1)
    name = spprof.stats()["sampling_signal"]
    signo = signal.SIGRTMIN + int(name.split("+")[1])
    signal.signal(signo, lambda s, f: None)
    burn(0.1)  # two drain passes: at 3697f84 the ticks before the first one went to the program
    for _ in range(5):
        os.kill(os.getpid(), signo)  # the program's own signals
        burn(0.01)
    burn(0.1)
    stop.set()
    for t in threads:
        t.join()
signal.set_wakeup_fd(-1)
os.set_blocking(r, False)
got = b""
try:
    while True:
        got += os.read(r, 65536)
except BlockingIOError:
    pass
st = p.profile.stats
print(json.dumps({"deliveries": got.count(bytes([signo])), "retaken": st["handler_retaken"],
                  "samples": len(p.get_samples())}))
"""


@skip_when_emulated("qemu-user delivers signals only between translated blocks")
def test_a_program_taking_the_sampling_signal_gets_only_its_own_signals():
    # At 3697f84 spprof took its signal back at the next drain pass (up to 50 ms later): at 1 ms
    # with four threads the program's handler got tens of spprof's ticks meanwhile (5-13 calls
    # of its Python handler for 5 signals, coalesced). Now signal.signal gives the signal back
    # in the same call: what remains is the few microseconds between Python's sigaction and
    # ours (docs/reliability.md, "Signals"), so at most one tick, very rarely.
    r = run_python("-c", RT_PROGRAM, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert 5 <= out["deliveries"] <= 6, out
    assert out["retaken"] >= 1, out
    assert out["samples"] > 100, out  # sampling went on after the program took the signal
