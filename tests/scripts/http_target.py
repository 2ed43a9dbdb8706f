"""Run under `spprof --http 127.0.0.1:0`: tests/test_http.py.

argv[1] is a directory shared with the test. The program writes the endpoint's port to
DIR/port (spprof.http_address()), then burns CPU on a thread named "worker" in hot_a until
DIR/next exists, then in hot_b for 0.3 s of the thread's CPU time, and ends.
"""

import os
import sys
import threading
import time

import spprof

DIR = sys.argv[1]
FLAG = os.path.join(DIR, "next")


def hot_a() -> int:
    # The flag is looked for every 50 ms of CPU only: os.path.exists releases the GIL, and a
    # thread that releases and retakes it thousands of times a second kept the endpoint's
    # threads from ever getting it on 3.14 (requests answered late or never).
    x = 0
    next_look = 0.0
    while True:
        if time.thread_time() >= next_look:
            if os.path.exists(FLAG):
                return x
            next_look = time.thread_time() + 0.05
        for i in range(20000):
            x += i * i


def hot_b() -> int:
    x = 0
    end = time.thread_time() + 0.3
    while time.thread_time() < end:
        for i in range(20000):
            x += i * i
    return x


def work() -> None:
    hot_a()
    hot_b()


open(os.path.join(DIR, "ran"), "w").close()
worker = threading.Thread(target=work, name="worker")
worker.start()
address = spprof.http_address()
assert address is not None, "no endpoint"
with open(os.path.join(DIR, "port.tmp"), "w") as f:
    f.write(str(address[1]))
os.rename(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
worker.join()
