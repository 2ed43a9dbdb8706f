"""The censuses' rows in the memory limit (tests/test_census_memory.py): argv = LIMIT_MB OUT.

In wall mode with async_tasks=True and memory_limit_mb=LIMIT_MB: TASKS tasks, each running a
coroutine function of its own (made with exec), awaiting asyncio.sleep for RUN seconds: each
waits on a chain of its own, a row per second each. OUT gets the stats and the task track's
weight as JSON.
"""

import asyncio
import json
import sys

import spprof
from spprof._async_census import TRACK_SUFFIX

TASKS = 2000
RUN = 3.0


def coroutine_functions():
    source = "".join(
        f"async def wait_{i}():\n    await asyncio.sleep({RUN})\n" for i in range(TASKS)
    )
    space = {"asyncio": asyncio}
    exec(compile(source, "<waiters>", "exec"), space)
    return [space[f"wait_{i}"] for i in range(TASKS)]


async def main(functions):
    await asyncio.gather(*(f() for f in functions))


if __name__ == "__main__":
    limit, out = float(sys.argv[1]), sys.argv[2]
    functions = coroutine_functions()
    with spprof.Profiler(mode="wall", async_tasks=True, memory_limit_mb=limit) as p:
        asyncio.run(main(functions))
    waiting = sum(s.weight_ns for s in p.get_samples() if s.thread_name.endswith(TRACK_SUFFIX))
    with open(out, "w") as f:
        json.dump({"stats": p.profile.stats, "waiting_s": waiting / 1e9}, f)
