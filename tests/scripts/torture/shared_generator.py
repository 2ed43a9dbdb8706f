"""Torture: threads share generators under a lock (tests/test_torture.py).

    shared_generator.py SECONDS

Ten `consumer` threads call next() on ONE shared `producer` generator under a lock: each
generator frame is resumed by a different thread every time, so its link to the caller is
rewritten on every resumption. Alongside, `sender` threads drive one shared coroutine-style
generator (`accumulator`) with send() and throw(), and `delegator` threads drive one shared
`delegating` generator that `yield from`s a `sub_accumulator`. At the deadline the producer
returns (the consumers end on StopIteration) and the other loops stop. Prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Generator, Iterator

from _threads import run_threads

CONSUMERS = 10
SENDERS = 3
DELEGATORS = 3
CHECK_EVERY = 64  # iterations between two clock reads


class Reset(Exception):
    """Thrown into the coroutines to reset them."""


def producer(deadline: float) -> Iterator[int]:
    x = 0
    while True:
        for _ in range(1000):
            x += 1
            yield x
        if time.monotonic() >= deadline:
            return  # every consumer then gets StopIteration


def accumulator() -> Generator[int, int, None]:
    total = 0
    while True:
        try:
            value = yield total
        except Reset:
            total = 0
            continue
        total += value & 7


def sub_accumulator() -> Generator[int, int, int]:
    total = 0
    while True:
        try:
            value = yield total
        except Reset:
            return total
        total += value & 3


def delegating() -> Generator[int, int, None]:
    while True:
        # send() and throw() pass through this frame into the sub-generator
        yield from sub_accumulator()


def consumer(lock: threading.Lock, gen: Iterator[int]) -> None:
    while True:
        with lock:
            try:
                next(gen)
            except StopIteration:
                return


def drive(deadline: float, lock: threading.Lock, coro: Generator[int, int, None]) -> None:
    """Resumes a shared coroutine with send() and, every 16th time, throw(): run by the
    sender threads on `accumulator` and by the delegator threads on `delegating`, where a
    throw ends the sub-generator and delegating starts a new one."""
    k = 0
    while time.monotonic() < deadline:
        for _ in range(CHECK_EVERY):
            k += 1
            with lock:
                if k % 16 == 0:
                    coro.throw(Reset())
                else:
                    coro.send(k)


def main(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    gen_lock, coro_lock, deleg_lock = threading.Lock(), threading.Lock(), threading.Lock()
    gen = producer(deadline)
    coro = accumulator()
    next(coro)
    deleg = delegating()
    next(deleg)
    threads = [
        threading.Thread(target=consumer, args=(gen_lock, gen), name=f"consumer-{i}")
        for i in range(CONSUMERS)
    ]
    threads += [
        threading.Thread(target=drive, args=(deadline, coro_lock, coro), name=f"sender-{i}")
        for i in range(SENDERS)
    ]
    threads += [
        threading.Thread(target=drive, args=(deadline, deleg_lock, deleg), name=f"delegator-{i}")
        for i in range(DELEGATORS)
    ]
    run_threads(threads)


if __name__ == "__main__":
    main(float(sys.argv[1]))
