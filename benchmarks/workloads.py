"""Benchmark workloads: each is a function of one integer size, with a full and a smoke size.

The full sizes take 2-3 s unprofiled on the 2-core reference machine (docs/performance.md);
the smoke sizes take a few milliseconds, so CI can run every benchmark once. No workload
prints, allocates unboundedly or depends on anything outside the standard library.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sys
import threading
import zlib
from typing import Callable, NamedTuple

# -- pure-Python CPU: the n-body simulation of pyperformance, trimmed ---------------------------

_PI = 3.14159265358979323
_SOLAR_MASS = 4 * _PI * _PI
_DAYS_PER_YEAR = 365.24


def _bodies():
    return [
        ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], _SOLAR_MASS),
        (
            [4.84143144246472090e00, -1.16032004402742839e00, -1.03622044471123109e-01],
            [
                1.66007664274403694e-03 * _DAYS_PER_YEAR,
                7.69901118419740425e-03 * _DAYS_PER_YEAR,
                -6.90460016972063023e-05 * _DAYS_PER_YEAR,
            ],
            9.54791938424326609e-04 * _SOLAR_MASS,
        ),
        (
            [8.34336671824457987e00, 4.12479856412430479e00, -4.03523417114321381e-01],
            [
                -2.76742510726862411e-03 * _DAYS_PER_YEAR,
                4.99852801234917238e-03 * _DAYS_PER_YEAR,
                2.30417297573763929e-05 * _DAYS_PER_YEAR,
            ],
            2.85885980666130812e-04 * _SOLAR_MASS,
        ),
        (
            [1.28943695621391310e01, -1.51111514016986312e01, -2.23307578892655734e-01],
            [
                2.96460137564761618e-03 * _DAYS_PER_YEAR,
                2.37847173959480950e-03 * _DAYS_PER_YEAR,
                -2.96589568540237556e-05 * _DAYS_PER_YEAR,
            ],
            4.36624404335156298e-05 * _SOLAR_MASS,
        ),
        (
            [1.53796971148509165e01, -2.59193146099879641e01, 1.79258772950371181e-01],
            [
                2.68067772490389322e-03 * _DAYS_PER_YEAR,
                1.62824170038242295e-03 * _DAYS_PER_YEAR,
                -9.51592254519715870e-05 * _DAYS_PER_YEAR,
            ],
            5.15138902046611451e-05 * _SOLAR_MASS,
        ),
    ]


def _advance(dt, steps, bodies, pairs):
    for _ in range(steps):
        for (r1, v1, m1), (r2, v2, m2) in pairs:
            dx = r1[0] - r2[0]
            dy = r1[1] - r2[1]
            dz = r1[2] - r2[2]
            mag = dt * ((dx * dx + dy * dy + dz * dz) ** (-1.5))
            b1m = m1 * mag
            b2m = m2 * mag
            v1[0] -= dx * b2m
            v1[1] -= dy * b2m
            v1[2] -= dz * b2m
            v2[0] += dx * b1m
            v2[1] += dy * b1m
            v2[2] += dz * b1m
        for r, (vx, vy, vz), _m in bodies:
            r[0] += dt * vx
            r[1] += dt * vy
            r[2] += dt * vz


def nbody(size: int) -> float:
    """`size` thousand steps of a 5-body simulation (pure float arithmetic, one frame)."""
    bodies = _bodies()
    pairs = [(bodies[i], bodies[j]) for i in range(len(bodies)) for j in range(i + 1, len(bodies))]
    _advance(0.01, size * 1000, bodies, pairs)
    return bodies[0][0][0]


# -- recursion-heavy ---------------------------------------------------------------------------


def _fib(n: int) -> int:
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


def recursion(size: int) -> int:
    """`size` evaluations of naive fib(20): ~22,000 calls each, stacks up to 20 deep."""
    return sum(_fib(20) for _ in range(size))


# -- generators and asyncio ----------------------------------------------------------------------


def _gen_pipeline(n: int) -> int:
    nums = (i for i in range(n))
    squares = (x * x for x in nums)
    evens = (x for x in squares if x % 2 == 0)
    return sum(evens)


async def _worker(steps: int) -> int:
    total = 0
    for i in range(steps):
        total += _gen_pipeline(20)
        if i % 4 == 0:
            await asyncio.sleep(0)
    return total


async def _async_main(tasks: int, steps: int) -> int:
    results = await asyncio.gather(*(_worker(steps) for _ in range(tasks)))
    return sum(results)


def generators_asyncio(size: int) -> int:
    """`size` rounds of 50 asyncio tasks, each running generator pipelines between awaits."""
    total = 0
    for _ in range(size):
        total += asyncio.run(_async_main(50, 200))
    return total


# -- many short calls ----------------------------------------------------------------------------


def _tiny(a: int, b: int) -> int:
    return a + b


class _Point:
    __slots__ = ("x", "y")

    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


def short_calls(size: int) -> int:
    """`size` hundred thousand iterations of three tiny Python calls plus a method call."""
    acc = 0
    for i in range(size * 100_000):
        acc = _tiny(acc, i) & 0xFFFF
        acc = _tiny(acc, 1)
        acc += _Point(i, -i).norm1() & 1
    return acc


# -- C-heavy: JSON and regex ---------------------------------------------------------------------

_DOC = {
    "users": [
        {
            "id": i,
            "name": f"user{i}",
            "email": f"user{i}@example.org",
            "tags": ["a", "b", "c"][: i % 3 + 1],
            "score": i * 1.5,
            "active": i % 2 == 0,
        }
        for i in range(200)
    ]
}


def json_work(size: int) -> int:
    """`size` round trips of a 200-record document through json.dumps and json.loads."""
    n = 0
    for _ in range(size):
        text = json.dumps(_DOC)
        n += len(json.loads(text)["users"])
    return n


_TEXT = " ".join(
    f"user{i}@example.org visited /path/{i * 7}?q={i * 13} at 2024-01-{i % 28 + 1:02d}"
    for i in range(400)
)
_EMAIL = re.compile(r"[\w.]+@[\w.]+\.\w+")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_PATH = re.compile(r"/path/(\d+)\?q=(\d+)")


def regex_work(size: int) -> int:
    """`size` passes of three regular expressions over a 25 KB text."""
    n = 0
    for _ in range(size):
        n += len(_EMAIL.findall(_TEXT))
        n += sum(1 for _ in _DATE.finditer(_TEXT))
        n += len(_PATH.sub("/p", _TEXT))
    return n


# -- GIL-releasing C in threads ------------------------------------------------------------------

_BLOB = bytes(range(256)) * 4096  # 1 MiB


def _hash_zlib(rounds: int, out: list) -> None:
    acc = 0
    for _ in range(rounds):
        acc ^= hashlib.sha256(_BLOB).digest()[0]
        acc ^= len(zlib.compress(_BLOB[: 256 * 1024], 1))
    out.append(acc)


def gil_release_threads(size: int) -> int:
    """2 threads (one per core) hashing 1 MiB with sha256 and zlib-compressing 256 KiB,
    `size` rounds each; both release the GIL for the C work."""
    out: list = []
    threads = [threading.Thread(target=_hash_zlib, args=(size, out)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(out)


# -- CPU-bound Python threads ----------------------------------------------------------------------


def _spin(n: int, out: list) -> None:
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    out.append(acc)


def _threads(count: int, total: int) -> int:
    out: list = []
    threads = [threading.Thread(target=_spin, args=(total // count, out)) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(out)


def threads4(size: int) -> int:
    """4 CPU-bound Python threads sharing `size` million loop iterations (GIL contention)."""
    return _threads(4, size * 1_000_000)


def threads16(size: int) -> int:
    """16 CPU-bound Python threads sharing `size` million loop iterations."""
    return _threads(16, size * 1_000_000)


# -- deep stacks -----------------------------------------------------------------------------------


def _descend(depth: int, work: int) -> int:
    if depth > 1:
        return _descend(depth - 1, work)
    acc = 0
    for i in range(work):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


def deep_stack(size: int, depth: int = 200) -> int:
    """`size` descents to Python stack depth `depth` (default 200), each spinning 100,000 loop
    iterations at the bottom: nearly every sample walks the whole stack."""
    return sum(_descend(depth, 100_000) for _ in range(size))


def stack_depth_here() -> int:
    """The current Python stack depth (frames), for calibrating deep-stack helpers."""
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


# -- registry --------------------------------------------------------------------------------------


class Workload(NamedTuple):
    name: str
    func: Callable[[int], object]
    full: int  # 2-3 s unprofiled on the reference machine
    smoke: int  # a few milliseconds
    kind: str


WORKLOADS = {
    w.name: w
    for w in (
        Workload("nbody", nbody, 640, 1, "pure-Python CPU"),
        Workload("recursion", recursion, 3200, 1, "recursion-heavy (fib)"),
        Workload("generators_asyncio", generators_asyncio, 160, 1, "generators + asyncio"),
        Workload("short_calls", short_calls, 141, 1, "many short calls"),
        Workload("json", json_work, 11200, 10, "C-heavy: json"),
        Workload("regex", regex_work, 3840, 5, "C-heavy: re"),
        Workload("gil_release", gil_release_threads, 1600, 1, "hashlib/zlib in 2 threads"),
        Workload("threads4", threads4, 61, 1, "4 CPU-bound threads"),
        Workload("threads16", threads16, 54, 1, "16 CPU-bound threads"),
        Workload("deep_stack", deep_stack, 500, 2, "deep stacks (depth 200)"),
    )
}
