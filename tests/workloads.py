"""CPU workloads whose hot lines the tests look up by their marker comments."""

from __future__ import annotations

import inspect
import time


def line_of(func, marker: str) -> int:
    """The line number of the first source line of `func` containing `marker`."""
    lines, start = inspect.getsourcelines(func)
    for offset, text in enumerate(lines):
        if marker in text:
            return start + offset
    raise AssertionError(f"{marker} not found in {func.__name__}")


def spin(seconds: float) -> int:
    """Burn `seconds` of this thread's CPU time in spin_inner."""
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += spin_inner(2000)
    return n


def spin_inner(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7  # SPIN_HOT
    return total


def alpha(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i  # ALPHA_HOT
    return total


def beta(n: int) -> int:
    total = 0
    for i in range(n):
        total ^= i * 3  # BETA_HOT
    return total


def gamma(n: int) -> int:
    total = 0
    for i in range(n):
        total += i % 5  # GAMMA_HOT
    return total


def produce():
    while True:
        total = 0
        for i in range(3000):
            total += i * i  # GEN_HOT
        yield total


def consume(seconds: float) -> int:
    gen = produce()
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += next(gen)  # CONSUME_CALL
    return n


def identity(x: int) -> int:
    return x


def map_calls(seconds: float) -> int:
    """C calling Python: map() enters the eval loop anew for every item."""
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += len(list(map(identity, range(20))))  # MAP_CALL
    return n


async def crunch(seconds: float) -> int:
    import asyncio

    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        for i in range(3000):
            n += i * i  # CORO_HOT
        await asyncio.sleep(0)
    return n


def recurse(depth: int, seconds: float) -> int:
    if depth == 0:
        return spin(seconds)
    return recurse(depth - 1, seconds) + 1
