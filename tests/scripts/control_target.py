"""Run under spprof (`python -m spprof ...`, or with argv[2] == "api": spprof.start()), or
with argv[2] == "plain" without it (for `spprof attach`): tests/test_control.py talks to it
with `spprof dump`, `record --pid`, `top` and `attach`.

argv[1] is a directory shared with the test. The program starts a thread named "waiter"
blocked on an Event, writes its pid to DIR/ready, then burns CPU in spin() on the main
thread until DIR/stop exists, and ends.
"""

import hashlib
import os
import sys
import threading
import time

DIR = sys.argv[1]
STOP = os.path.join(DIR, "stop")
gate = threading.Event()


def waiting() -> None:
    gate.wait()  # the waiter's line


def spin() -> int:
    # The flag is looked for every 50 ms of CPU only: a loop that lets the GIL go and takes
    # it back every millisecond (os.path.exists) keeps other threads from ever getting it
    # (CPython's GIL hand-off, docs/usage.md "pprof endpoint"), the drain thread too.
    x = 0
    next_look = 0.0
    while True:
        if time.thread_time() >= next_look:
            if os.path.exists(STOP):
                return x
            next_look = time.thread_time() + 0.05
        if HASH:
            hash_spin()
            continue
        for i in range(20000):  # the spinner's line
            x += i * i


# CONTROL_TARGET_SPIN=hash: the main thread's CPU goes to C (OpenSSL's SHA-256, which lets the
# GIL go for a buffer this large) instead of Python code: native frames for `dump`.
HASH = os.environ.get("CONTROL_TARGET_SPIN") == "hash"
BUFFER = bytes(1 << 20)


def hash_spin() -> None:
    for _ in range(4):
        hashlib.sha256(BUFFER).digest()  # the hashing line


if sys.argv[2:] == ["api"]:
    import spprof

    spprof.start(output_path=os.path.join(DIR, "own.spprof"))
waiter = threading.Thread(target=waiting, name="waiter")
waiter.start()
with open(os.path.join(DIR, "ready.tmp"), "w") as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(DIR, "ready.tmp"), os.path.join(DIR, "ready"))
spin()
gate.set()
waiter.join()
if sys.argv[2:] == ["plain"]:
    print("ended", "spprof" in sys.modules)
if sys.argv[2:] == ["api"]:
    p = spprof.stop()
    print({k: v for k, v in p.stats.items() if k.startswith("control")})
