"""Torture: generators delegating to each other hundreds deep, in several threads
(tests/test_torture.py).

    generator_recursion.py SECONDS

Each `deep-N` thread builds a chain of DEPTH `deep_gen` generators, each `yield from` the
next, ending in `leaf_gen`, and drains it: every item resumes the whole chain. Two `shared-N`
threads drain one shared chain under a lock. Prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

from _threads import run_threads

DEPTH = 300
THREADS = 3
SHARED_THREADS = 2
LEAF_ITEMS = 200


def leaf_gen(items: int) -> Iterator[int]:
    for k in range(items):
        total = 0
        for i in range(300):
            total += (i * k) & 7
        yield total


def deep_gen(depth: int, items: int) -> Iterator[int]:
    if depth == 0:
        yield from leaf_gen(items)
    else:
        yield from deep_gen(depth - 1, items)


def drain_chains(deadline: float) -> None:
    while time.monotonic() < deadline:
        for _ in deep_gen(DEPTH, LEAF_ITEMS):
            pass


def drain_shared(deadline: float, lock: threading.Lock, chain: list[Iterator[int]]) -> None:
    while time.monotonic() < deadline:
        with lock:
            try:
                next(chain[0])
            except StopIteration:
                chain[0] = deep_gen(DEPTH, LEAF_ITEMS)


def main(seconds: float) -> None:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * DEPTH + 1000))
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    chain = [deep_gen(DEPTH, LEAF_ITEMS)]
    threads = [
        threading.Thread(target=drain_chains, args=(deadline,), name=f"deep-{i}")
        for i in range(THREADS)
    ]
    threads += [
        threading.Thread(target=drain_shared, args=(deadline, lock, chain), name=f"shared-{i}")
        for i in range(SHARED_THREADS)
    ]
    run_threads(threads)


if __name__ == "__main__":
    main(float(sys.argv[1]))
