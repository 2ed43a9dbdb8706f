"""Named asyncio tasks (tests/test_task_names.py): argv = MODE OUT.

For RUN seconds: `poller` (a task the program named "poller") burns CPU in `poll_forever`
and sleeps; four tasks named worker-1..4 run `worker()`, which burns CPU and sleeps; and
default-named tasks (Task-N) run `handle()`, each burning CPU and sleeping. MODE is spprof's
mode (cpu or wall), with async_tasks=True. OUT gets samples_json's JSON.
"""

import asyncio
import sys
import time

import samples_json

import spprof

RUN = 1.5


def burn(seconds):
    # CPU seconds, not wall: on a loaded machine a wall-timed burn got a third of its CPU
    # (poller: 0.14 s of CPU samples where a quiet run has ~0.4 s).
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def poll_forever():
    end = time.monotonic() + RUN
    while time.monotonic() < end:
        burn(0.004)
        await asyncio.sleep(0.01)  # line: poller sleeps


async def worker():
    end = time.monotonic() + RUN
    while time.monotonic() < end:
        burn(0.002)
        await asyncio.sleep(0.01)


async def handle():
    burn(0.004)
    await asyncio.sleep(0.05)


async def main():
    tasks = [asyncio.create_task(poll_forever(), name="poller")]
    tasks += [asyncio.create_task(worker(), name=f"worker-{i}") for i in range(1, 5)]
    end = time.monotonic() + RUN
    while time.monotonic() < end:
        tasks.append(asyncio.create_task(handle()))
        await asyncio.sleep(0.02)
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    mode, out = sys.argv[1:3]
    with spprof.Profiler(mode=mode, async_tasks=True) as p:
        asyncio.run(main())
    samples_json.write(out, p)
