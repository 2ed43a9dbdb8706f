"""A window that asks for waiting work its session does not count (tests/test_census_window.py):
argv = KIND OUT, run under `spprof --mode wall` (no --async, no --greenlets).

KIND "async": a `Profiler(async_tasks=True)` block in which `napper` awaits asyncio.sleep
for 1 s; KIND "greenlet": a `Profiler(greenlets=True)` block in which a gevent greenlet
`napper` sleeps 1 s. OUT gets the block's samples and stats (samples_json.py).
"""

import sys

import samples_json

import spprof

HOLD = 1.0


def run_async():
    import asyncio

    async def napper():
        await asyncio.sleep(HOLD)  # line: napper waits

    async def main():
        await asyncio.gather(napper())

    with spprof.Profiler(async_tasks=True) as p:
        asyncio.run(main())
    return p


def run_greenlet():
    import gevent

    def napper():
        gevent.sleep(HOLD)  # line: napper waits

    with spprof.Profiler(greenlets=True) as p:
        gevent.spawn(napper).join()
    return p


def main():
    kind, out = sys.argv[1:3]
    p = run_async() if kind == "async" else run_greenlet()
    samples_json.write(out, p)


if __name__ == "__main__":
    main()
