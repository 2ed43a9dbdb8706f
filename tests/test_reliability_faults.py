"""Faults that are not spprof's reach the program exactly as without spprof; stop is race-free.

spprof's fault guard (a SIGSEGV/SIGBUS handler in front of the program's while a session runs)
recovers the faults of its own captures only. A real crash of the program must end the same
way with and without spprof: the same exit status (killed by SIGSEGV), and faulthandler, if
the program enabled it before or after start(), still prints the program's traceback. Each
case runs in its own interpreter, once under spprof and once without, and the two endings are
compared.

Start/stop cycles under heavy capture load exercise the stop handshake (capture_gate.h): a
capture still running when stop() frees the session is a use-after-free that AddressSanitizer
reports (make test-asan) and that corrupts memory otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap

import pytest

from conftest import run_python
from test_reliability_common import figure, scale

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the fault guard is Linux's"
)

CRASH = """
import ctypes, faulthandler, sys, time, threading
import spprof

WHEN = sys.argv[1]          # faulthandler: "none", "before" or "after" spprof.start()
PROFILE = sys.argv[2] == "1"

def busy(stop):
    while not stop.is_set():
        sum(i * i for i in range(300))

def crash_in_the_program():
    ctypes.string_at(0x10)   # the program's own bug: a read of unmapped memory

if WHEN == "before":
    faulthandler.enable()
stop = threading.Event()
threading.Thread(target=busy, args=(stop,), daemon=True).start()
if PROFILE:
    spprof.start(interval_ms=1)
if WHEN == "after":
    faulthandler.enable()
if WHEN == "after-retaken":
    faulthandler.enable()
    time.sleep(0.3)  # several drain wake-ups: the guard is back in front of faulthandler
t = time.thread_time() + 0.2
while time.thread_time() < t:
    sum(i * i for i in range(300))
print("crashing now", flush=True)
crash_in_the_program()
print("survived", flush=True)
"""


@pytest.mark.parametrize("faulthandler_when", ["none", "before", "after", "after-retaken"])
def test_a_crash_of_the_program_ends_as_without_spprof(tmp_path, faulthandler_when):
    if os.environ.get("SPPROF_TEST_ASAN") and faulthandler_when != "none":
        # AddressSanitizer owns SIGSEGV in that build: its report of the re-raised signal
        # itself faults and ends the process one way or the other depending on timing, with or
        # without spprof. The native fault-guard tests compare endings under ASan instead.
        pytest.skip("faulthandler + AddressSanitizer's own SIGSEGV handler: no stable ending")
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(CRASH))
    plain = run_python(str(script), faulthandler_when, "0", timeout=60)
    profiled = run_python(str(script), faulthandler_when, "1", timeout=60)
    for proc in (plain, profiled):
        assert "crashing now" in proc.stdout, proc.stderr[-2000:]
        assert "survived" not in proc.stdout
    # Ended as the plain interpreter ends: killed by the signal (not an exit code, not a hang);
    # under AddressSanitizer (make test-asan) its report and exit status 1, in both runs.
    if not os.environ.get("SPPROF_TEST_ASAN"):
        assert plain.returncode == -signal.SIGSEGV, plain.stderr[-2000:]
    assert profiled.returncode == plain.returncode, profiled.stderr[-2000:]
    if faulthandler_when == "none":
        assert "Fatal Python error" not in profiled.stderr
    else:
        # faulthandler ran, once, and named the function that crashed.
        for proc in (plain, profiled):
            fatal = proc.stderr.count("Fatal Python error: Segmentation fault")
            assert fatal == 1, proc.stderr[-3000:]
            assert "crash_in_the_program" in proc.stderr, proc.stderr[-3000:]


CYCLES = """
import json, sys, threading, time
import spprof

CYCLES = int(sys.argv[1])

def burn(stop):
    def deep(n):
        return deep(n - 1) if n else sum(i * i for i in range(200))
    while not stop.is_set():
        deep(40)

stop = threading.Event()
threads = [
    threading.Thread(target=burn, args=(stop,), name=f"burner-{i}", daemon=True) for i in range(6)
]
for t in threads:
    t.start()
per_cycle = []
for mode in ("cpu", "wall"):
    for i in range(CYCLES):
        spprof.start(interval_ms=1, mode=mode)
        t = time.monotonic() + 0.02
        while time.monotonic() < t:
            pass
        p = spprof.stop()
        per_cycle.append(sum(1 for s in p.samples if s.thread_name.startswith("burner")))
stop.set()
for t in threads:
    t.join()
st = spprof.stats()
print("RESULT " + json.dumps({"per_cycle": per_cycle, "captured": st["samples_captured"]}))
"""


def test_start_stop_cycles_under_heavy_capture_load(tmp_path):
    # Six threads deep in Python, sampled at 1 ms: every stop() races captures in flight.
    cycles = scale(30, 600)
    script = tmp_path / "cycles.py"
    script.write_text(textwrap.dedent(CYCLES))
    proc = run_python(str(script), str(cycles), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    res = json.loads(line[len("RESULT ") :])
    per_cycle = res["per_cycle"]
    figure(
        "start_stop_cycles",
        cycles=2 * cycles,
        samples_last=res["captured"],
        burner_samples=sum(per_cycle),
    )
    assert len(per_cycle) == 2 * cycles
    # The sessions were really sampling the burners (most cycles saw them).
    assert sum(1 for n in per_cycle if n > 0) >= 0.5 * len(per_cycle), per_cycle
