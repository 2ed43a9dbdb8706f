"""asyncio programs for tests/test_async_view.py: one case per process.

    python async_view.py CASE ASYNC OUT.json
    spprof --async ... async_view.py CASE cli   (the CLI profiles it: no JSON written)

CASE "three": two CPU-bound tasks, crunch_a and crunch_b, that measure with the thread's CPU
clock how much CPU their own work takes (crunch_a twice crunch_b's), each yielding to the
loop with `await asyncio.sleep(0)` between chunks, and a third task that only awaits
asyncio.sleep. CASE "gather": a parent task awaiting gather() of two CPU-bound children,
child_x and child_y. CASE "threads": the "three" program's loop run in two threads at once.
CASE "pytasks": "three" with asyncio's pure-Python Task (a task factory), whose step is a
Python frame (Task.__step) where the C task has none. CASE "window": "three" inside a
`Profiler(async_tasks=True)` block on a session started without it. CASE "uvloop": "three"
on uvloop's loop, compiled: no Python frame between its runner and a task's coroutine.
ASYNC is "1" for spprof.start(async_tasks=True), "0" without, "cli" for neither (the program
runs under `spprof --async`). Writes to OUT.json what each
task measured and, per sample, its weight, thread and frames (name, file, line), root first.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import spprof

measured: dict[str, float] = {}


def chunks(seed: int) -> Iterator[float]:
    """CPU per chunk between two yields to the loop: 0.5-3.5 ms, pseudo-random, so that the
    tasks' turns never fall in step with the sampling timer's tick (a fixed 2 ms chunk per
    task, alternating, put every 4 ms tick in the same task for long runs)."""
    while True:
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        yield 0.0005 + (seed % 3000) / 1e6


def spin(seconds: float) -> int:
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


async def crunch_a(seconds: float, key: str = "crunch_a") -> None:
    used, chunk = 0.0, chunks(17)
    while used < seconds:
        t0 = time.thread_time()
        spin(next(chunk))  # crunch_a's loop line
        used += time.thread_time() - t0
        await asyncio.sleep(0)
    measured[key] = measured.get(key, 0.0) + used


async def crunch_b(seconds: float, key: str = "crunch_b") -> None:
    used, chunk = 0.0, chunks(4242)
    while used < seconds:
        t0 = time.thread_time()
        spin(next(chunk))
        used += time.thread_time() - t0
        await asyncio.sleep(0)
    measured[key] = measured.get(key, 0.0) + used


async def sleeper(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def three(scale: float) -> None:
    await asyncio.gather(
        asyncio.ensure_future(crunch_a(1.2 * scale)),
        asyncio.ensure_future(crunch_b(0.6 * scale)),
        asyncio.ensure_future(sleeper(0.5)),
    )


async def three_pure_python_tasks(scale: float) -> None:
    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Future[Any]:
        return asyncio.tasks._PyTask(coro, loop=loop, **kw)  # type: ignore[attr-defined]

    asyncio.get_running_loop().set_task_factory(factory)
    await asyncio.ensure_future(three(scale))


async def child_x(seconds: float) -> None:
    await crunch_a(seconds, "child_x")


async def child_y(seconds: float) -> None:
    await crunch_b(seconds, "child_y")


async def parent() -> None:
    await asyncio.gather(child_x(0.8), child_y(0.4))


def main() -> None:
    case, how = sys.argv[1], sys.argv[2]
    if how != "cli":
        spprof.start(interval_ms=2, async_tasks=how == "1" and case != "window")
    window = None
    if case == "three":
        asyncio.run(three(1.0))
    elif case == "pytasks":
        asyncio.run(three_pure_python_tasks(1.0))
    elif case == "window":
        with spprof.Profiler(async_tasks=how == "1") as window:
            asyncio.run(three(1.0))
    elif case == "gather":
        asyncio.run(parent())
    elif case == "uvloop":
        import uvloop

        uvloop.run(three(1.0))
    elif case == "threads":
        threads = [threading.Thread(target=asyncio.run, args=(three(0.5),)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        raise SystemExit(f"unknown case {case!r}")
    if how == "cli":
        return
    profile = spprof.stop()
    if window is not None:
        assert window.profile is not None
        profile = window.profile
    samples = [
        [s.weight_ns, s.thread_id, [[f.display_name, f.filename, f.lineno] for f in s.frames]]
        for s in profile.samples
    ]
    with open(sys.argv[3], "w") as f:
        json.dump(
            {
                "measured": measured,
                "samples": samples,
                "metadata": profile.metadata,
                "loop_line": crunch_a.__code__.co_firstlineno + 4,
                "asyncio_dir": asyncio.__file__.rsplit("/", 1)[0],
            },
            f,
        )


if __name__ == "__main__":
    main()
