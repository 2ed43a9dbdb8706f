"""Torture: an asyncio loop with many tasks and worker threads (tests/test_torture.py).

    asyncio_threads.py SECONDS

TASKS tasks (`task_body`) compute a little and yield to the loop; every few rounds a task
hands work to a thread: `loop.run_in_executor` on a pool whose threads are `pool_N`
(`executor_work`) or `asyncio.to_thread` on the loop's default executor, threads
`asyncio_N` (`to_thread_work`). Everything ends at the deadline. Prints nothing.
"""

from __future__ import annotations

import asyncio
import sys
import time
from concurrent.futures import ThreadPoolExecutor

TASKS = 200
POOL = 4


def executor_work(n: int) -> int:
    total = 0
    for i in range(n):
        total += (i * 7) % 11
    return total


def to_thread_work(n: int) -> int:
    total = 0
    for i in range(n):
        total ^= i * 13
    return total


async def task_body(i: int, deadline: float, pool: ThreadPoolExecutor) -> int:
    loop = asyncio.get_running_loop()
    rounds = 0
    while time.monotonic() < deadline:
        rounds += 1
        n = 0
        for j in range(200):
            n += (i + j) & 3
        if rounds % 8 == 0:
            await loop.run_in_executor(pool, executor_work, 3000)
        elif rounds % 8 == 4:
            await asyncio.to_thread(to_thread_work, 3000)
        else:
            await asyncio.sleep(0)
    return rounds


async def run_all(seconds: float) -> int:
    deadline = time.monotonic() + seconds
    with ThreadPoolExecutor(POOL, thread_name_prefix="pool") as pool:
        rounds = await asyncio.gather(*(task_body(i, deadline, pool) for i in range(TASKS)))
    return sum(rounds)


def main(seconds: float) -> None:
    asyncio.run(run_all(seconds))


if __name__ == "__main__":
    main(float(sys.argv[1]))
