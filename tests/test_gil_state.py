"""The GIL read from another thread (capture/pyframes/gil_state.h).

The Mach sampler (macOS) cannot ask PyGILState_Check for the thread it holds suspended: it
reads the GIL's own state, `locked` and `last_holder`, at offsets mirrored per CPython version.
Those offsets are checked against the internal headers at build time where they are installed;
these tests read them at run time on every interpreter the suite runs on, through
`_ext._gil_reading`, the same reader, so a wrong offset fails here on Linux before it gives
macOS wrong GIL shares and no <GC> frame. Each case runs in its own interpreter: a wrong
offset can crash.
"""

from __future__ import annotations

import json

from conftest import run_python

_PROGRAM = r"""
import json, threading, time
from spprof import _ext

readings = {}
# Alone: the caller holds the GIL; let go, nobody takes it.
readings["alone"] = [_ext._gil_reading(0.005) for _ in range(5)]
# Beside a thread spinning in Python: let go, the spinner takes it and keeps it (it is the
# only thread that wants it) until the caller asks for it back.
stop = False
def spin():
    while not stop:
        pass
t = threading.Thread(target=spin, name="spinner")
t.start()
time.sleep(0.05)
readings["spinner"] = [_ext._gil_reading(0.02) for _ in range(10)]
stop = True
t.join()
print(json.dumps({"readings": readings, "spinner": t.ident, "main": threading.main_thread().ident}))
"""


def test_the_gil_reader_names_the_caller_then_nobody_then_the_thread_that_took_it():
    r = run_python("-c", _PROGRAM, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    alone, spinner = out["readings"]["alone"], out["readings"]["spinner"]
    # held by the caller while it runs Python; never read as the caller's once let go
    assert all(held and not mine for held, mine, _ in alone + spinner), out
    # nobody holds it while the only Python thread sleeps without it
    assert [ident for _, _, ident in alone] == [0] * 5, out
    # the spinner holds it 20 ms after the caller let go: every time but for a rare handover
    # still under way (a reading between take_gil's two stores names nobody)
    named = [ident for _, _, ident in spinner]
    assert named.count(out["spinner"]) >= 8, out
    assert out["main"] not in named, out
