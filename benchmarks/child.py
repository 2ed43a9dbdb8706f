"""One measurement in a fresh process: run a workload once under one profiler configuration.

    python -m benchmarks.child WORKLOAD SIZE CONFIG_KEY [--wait]

Prints one JSON line: the workload's wall and process-CPU seconds (profiler start and stop
excluded, timed separately), and what the profiler reported. With `--wait` it prints
`ready` and waits for a line on stdin before starting, so an out-of-process profiler
(py-spy) can attach first.
"""

from __future__ import annotations

import json
import os
import sys
import time

from benchmarks import tools
from benchmarks.workloads import WORKLOADS


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def main(argv: list) -> int:
    name, size, key = argv[0], int(argv[1]), argv[2]
    config = tools.Config.parse(key)
    workload = WORKLOADS[name]
    if "--wait" in argv:
        print("ready", flush=True)
        sys.stdin.readline()
    t0 = time.perf_counter()
    stop = tools.start(config)
    t1 = time.perf_counter()
    c1 = _cpu()
    workload.func(size)
    c2 = _cpu()
    t2 = time.perf_counter()
    info = stop()
    t3 = time.perf_counter()
    result = {
        "workload": name,
        "config": key,
        "wall_s": t2 - t1,
        "cpu_s": c2 - c1,
        "start_s": t1 - t0,
        "stop_s": t3 - t2,
        "info": info,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
