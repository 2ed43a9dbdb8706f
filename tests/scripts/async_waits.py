"""Waiting asyncio tasks (tests/test_async_census.py): argv = CASE MODE OUT.

CASE "waits": for RUN seconds, `sleeper` awaits asyncio.sleep, `getter` a Queue.get,
`reader` a read on a 127.0.0.1 socket nobody writes to, and `cruncher` burns CPU, yielding
with `await asyncio.sleep(0)`; each waiting task measures the time its awaits took. CASE
"uvloop": the same on uvloop's loop, without cruncher; "uvloop_thread": that in a thread.
CASE "nested":
`main` gathers `gatherer` (which gathers two `leaf`s), `grouper` (a TaskGroup with one `leaf`,
3.11+) and `awaiter` (which awaits a task running `leaf`); every leaf sleeps HOLD seconds.
MODE is spprof's mode (cpu or wall), with async_tasks=True. OUT gets JSON: the measured
waits, the stats, and the samples as [thread name, weight_ns, [[function, file, line], ...]].
"""

import asyncio
import sys
import threading
import time

import samples_json

import spprof

RUN = 2.0
HOLD = 1.0
UVLOOP = False
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
    ]
    if not UVLOOP:  # uvloop's ready queue cannot be read: a yielding cruncher looks waiting
        tasks.append(asyncio.create_task(cruncher()))
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


def sigint(mode):
    """CASE "sigint": a periodic call (what runs the census) that takes 40 ms of every 50,
    while the main thread wakes every millisecond, so it makes most calls itself (a pending
    call, python_tick.h); the test sends SIGINT. Prints "interrupted" when KeyboardInterrupt
    reaches the program."""
    from spprof import _ext

    def slow_tick():
        end = time.perf_counter() + 0.04
        while time.perf_counter() < end:
            pass

    spprof.start(mode=mode)
    _ext._python_tick(slow_tick, 0.05)
    print("ready", flush=True)
    try:
        while True:
            time.sleep(0.001)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    _ext._python_tick(None, 0.05)
    spprof.stop()


def main():
    case, mode, out = sys.argv[1:4]
    if case == "sigint":
        return sigint(mode)
    with spprof.Profiler(mode=mode, async_tasks=True) as p:
        if case in ("uvloop", "uvloop_thread"):
            import uvloop

            global UVLOOP
            UVLOOP = True
            if case == "uvloop":
                uvloop.run(waits())
            else:  # not the main thread: found by the Runner (3.11+) or uvloop.run's frame
                loop_thread = threading.Thread(target=uvloop.run, args=(waits(),), name="loop")
                loop_thread.start()
                loop_thread.join()
        else:
            asyncio.run(waits() if case == "waits" else nested())
    samples_json.write(out, p, waited=waited)


if __name__ == "__main__":
    main()
