"""Torture: greenlets switching back and forth in several OS threads (tests/test_torture.py).

    greenlet_switch.py SECONDS

Each of THREADS OS threads (`gthread-N`) runs a ring of RING greenlets (`ring_member`); each
member does a little Python work (`crunch_in_greenlet`) and switches to the next one, every
other time from a few frames deeper (`switch_from_depth`), so the interpreter's frame chain
is swapped under the profiler's feet thousands of times a second. Every member returns to
the thread's main greenlet at the deadline. Prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time

import greenlet
from _threads import run_threads

THREADS = 3
RING = 4
DEPTH = 4  # extra frames below a switch, every other switch


def crunch_in_greenlet(k: int) -> int:
    total = 0
    for i in range(40):
        total += (i * k) & 15
    return total


def switch_from_depth(depth: int, target: greenlet.greenlet) -> None:
    if depth == 0:
        target.switch()
    else:
        switch_from_depth(depth - 1, target)


def ring_member(ring: list[greenlet.greenlet], me: int, deadline: float) -> int:
    k = 0
    while time.monotonic() < deadline:
        for _ in range(16):
            k += 1
            crunch_in_greenlet(k)
            nxt = ring[(me + 1) % len(ring)]
            if nxt.dead:
                return k
            if k % 2:
                nxt.switch()
            else:
                switch_from_depth(DEPTH, nxt)
    return k  # back to the parent: the thread's main greenlet


def run_ring(deadline: float) -> None:
    ring: list[greenlet.greenlet] = []
    for i in range(RING):
        ring.append(greenlet.greenlet(lambda i=i: ring_member(ring, i, deadline)))
    ring[0].switch()
    # the others are suspended in a switch: let each see the deadline and return
    for _ in range(10 * RING):
        alive = [g for g in ring if not g.dead]
        if not alive:
            break
        alive[0].switch()


def main(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    threads = [
        threading.Thread(target=run_ring, args=(deadline,), name=f"gthread-{i}")
        for i in range(THREADS - 1)
    ]
    run_threads(threads, lambda: run_ring(deadline))  # the main thread is the third


if __name__ == "__main__":
    main(float(sys.argv[1]))
