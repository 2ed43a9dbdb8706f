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
    assert int(out["ticks_after"]) >= 0.7 * expected, out  # type: ignore[call-overload]
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
