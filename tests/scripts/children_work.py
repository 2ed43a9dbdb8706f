"""Work done in child processes: a fork pool of two workers and one subprocess.run of Python.

Prints `TRUTH {"children_cpu": seconds}`: the CPU time each child measured of its own work.
"""

import json
import multiprocessing
import subprocess
import sys
import time

SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def task(seconds: float) -> float:
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        pass
    return time.process_time() - t0


def main() -> None:
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pooled = sum(pool.map(task, [0.15] * 6))
    t0 = time.time()
    subprocess.run([sys.executable, "-c", SPIN.format(s=0.3)], check=True)
    print("TRUTH " + json.dumps({"children_cpu": pooled + 0.3, "wall": time.time() - t0}))
    task(0.1)  # some work of its own


if __name__ == "__main__":
    main()
