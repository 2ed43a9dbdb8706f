"""Threads that run, wait for the GIL and sleep, for the "one set of numbers" test
(tests/test_numbers.py): `spin` runs on two threads at once (GIL shares below 100 %), `nap`
sleeps (idle in wall mode)."""

from __future__ import annotations

import threading
import time


def spin(seconds: float) -> int:
    n = 0
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        n += 1
    return n


def nap(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)


def main() -> None:
    threads = [
        threading.Thread(target=spin, args=(0.4,), name="spinner"),
        threading.Thread(target=nap, args=(0.8,), name="sleeper"),
    ]
    for t in threads:
        t.start()
    spin(0.4)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
