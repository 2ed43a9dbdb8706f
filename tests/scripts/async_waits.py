"""Waiting asyncio tasks (tests/test_async_census.py): argv = CASE MODE OUT.

CASE "waits": for RUN seconds, `sleeper` awaits asyncio.sleep, `getter` a Queue.get, `reader` a
read on a 127.0.0.1 socket nobody writes to, and `cruncher` burns CPU, yielding with
`await asyncio.sleep(0)`; each waiting task measures the time its awaits took. CASE "nested":
`main` gathers `gatherer` (which gathers two `leaf`s), `grouper` (a TaskGroup with one `leaf`,
3.11+) and `awaiter` (which awaits a task running `leaf`); every leaf sleeps HOLD seconds.
MODE is spprof's mode (cpu or wall), with async_tasks=True. OUT gets JSON: the measured
waits, the stats, and the samples as [thread name, weight_ns, [[function, file, line], ...]].
"""

import asyncio
import json
import sys
import time

import spprof

RUN = 2.0
HOLD = 1.0
waited = {"sleeper": 0.0, "getter": 0.0, "reader": 0.0}


async def sleeper():
    end = time.monotonic() + RUN
    while time.monotonic() < end:
        t = time.monotonic()
        await asyncio.sleep(0.08)  # line: sleeper awaits
        waited["sleeper"] += time.monotonic() - t


async def getter(queue):
    while True:
        t = time.monotonic()
        item = await queue.get()  # line: getter awaits
        waited["getter"] += time.monotonic() - t
        if item is None:
            return


async def reader(stream):
    while True:
        t = time.monotonic()
        data = await stream.read(100)  # line: reader awaits
        waited["reader"] += time.monotonic() - t
        if not data:
            return


def spin():
    x = 0
    for i in range(20000):
        x += i * i
    return x


async def cruncher():
    end = time.monotonic() + RUN
    while time.monotonic() < end:
        spin()
        await asyncio.sleep(0)


async def waits():
    queue = asyncio.Queue()
    accepted = []  # the server's ends stay open (3.14 closes a StreamWriter collected)
    server = await asyncio.start_server(lambda r, w: accepted.append(w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    stream, writer = await asyncio.open_connection("127.0.0.1", port)
    tasks = [
        asyncio.create_task(sleeper()),
        asyncio.create_task(getter(queue)),
        asyncio.create_task(reader(stream)),
        asyncio.create_task(cruncher()),
    ]
    await asyncio.sleep(RUN)
    await queue.put(None)
    stream.feed_eof()
    await asyncio.gather(*tasks)
    writer.close()
    server.close()


async def leaf():
    await asyncio.sleep(HOLD)  # line: leaf awaits


async def gatherer():
    await asyncio.gather(leaf(), leaf())  # line: gatherer awaits


async def grouper():
    if sys.version_info >= (3, 11):
        async with asyncio.TaskGroup() as group:  # line: grouper awaits
            group.create_task(leaf())
    else:
        await leaf()


async def awaiter():
    await asyncio.create_task(leaf())  # line: awaiter awaits


async def nested():
    await asyncio.gather(gatherer(), grouper(), awaiter())  # line: main awaits


async def interrupted():
    """CASE "sigint": 8,000 waiting tasks make each census long, a loop that wakes every
    millisecond makes the main thread run most of them (python_tick.h); the test sends
    SIGINT. Prints "interrupted" when KeyboardInterrupt reaches the program."""
    waiting = [asyncio.create_task(asyncio.sleep(60)) for _ in range(8000)]
    print("ready", flush=True)
    try:
        while True:
            await asyncio.sleep(0.001)
    finally:
        for w in waiting:
            w.cancel()


def main():
    case, mode, out = sys.argv[1:4]
    if case == "sigint":
        # run_until_complete, not asyncio.run: 3.11+'s Runner puts its own SIGINT handler in
        # place, which cancels the main task instead of raising where the signal is handled.
        spprof.start(mode=mode, async_tasks=True)
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(interrupted())
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        spprof.stop()
        return
    with spprof.Profiler(mode=mode, async_tasks=True) as p:
        asyncio.run(waits() if case == "waits" else nested())
    samples = [
        [s.thread_name, s.weight_ns, [[f.function_name, f.filename, f.lineno] for f in s.frames]]
        for s in p.get_samples()
    ]
    with open(out, "w") as f:
        json.dump({"waited": waited, "stats": p.profile.stats, "samples": samples}, f)


if __name__ == "__main__":
    main()
