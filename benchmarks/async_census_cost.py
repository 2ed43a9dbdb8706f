"""Cost of the asyncio census (issue 26): process CPU with 1,000 live tasks at 100 Hz.

A program keeps TASKS tasks alive for SECONDS, each looping on `await asyncio.sleep(d)`
with d drawn in [50, 150] ms, plus a little work per wake-up. It runs plain, in wall mode,
and in wall mode with `async_tasks=True` (the census every 50 ms on top), each in a fresh
interpreter, rounds interleaved. The figure is the process's CPU time (user + system, all
threads: spprof's included) over the run; the goal is wall+async <= 2x wall. The census
paces itself to <= 5 % of the time, so the number of censuses falls as tasks grow.

    python -m benchmarks.async_census_cost               # 1,000 tasks, 4 s, 3 rounds
    python -m benchmarks.async_census_cost --tasks 200 --seconds 1 --rounds 1   # smoke
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CONFIGS = ("plain", "wall", "wall-async")


def child(config: str, tasks: int, seconds: float) -> dict:
    import asyncio
    import random

    profiler = None
    if config != "plain":
        import spprof

        profiler = spprof.Profiler(interval_ms=10, mode="wall", async_tasks=config == "wall-async")
        profiler.start()

    async def worker(seed: int) -> None:
        rnd = random.Random(seed)
        while True:
            await asyncio.sleep(rnd.uniform(0.05, 0.15))
            sum(range(200))

    async def main() -> None:
        workers = [asyncio.create_task(worker(i)) for i in range(tasks)]
        await asyncio.sleep(seconds)
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    cpu0 = time.process_time()
    asyncio.run(main())
    cpu = time.process_time() - cpu0
    censuses = census_ns = 0
    if profiler is not None:
        profiler.stop()
        censuses = int(profiler.profile.stats.get("async_censuses", 0))
        census_ns = int(profiler.profile.stats.get("async_census_ns", 0))
    return {"cpu_s": cpu, "censuses": censuses, "census_ms": census_ns / 1e6 / max(1, censuses)}


def measure(config: str, tasks: int, seconds: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.async_census_cost", "--child", config]
    cmd += ["--tasks", str(tasks), "--seconds", str(seconds)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout
    result: dict = json.loads(out.strip().splitlines()[-1])
    return result


def run(tasks: int, seconds: float, rounds: int) -> dict[str, dict]:
    cpu: dict[str, list[float]] = {c: [] for c in CONFIGS}
    censuses = census_ms = 0.0
    for _ in range(rounds):
        for config in CONFIGS:
            r = measure(config, tasks, seconds)
            cpu[config].append(r["cpu_s"])
            if config == "wall-async":
                censuses, census_ms = r["censuses"], r["census_ms"]
    medians = {c: statistics.median(v) for c, v in cpu.items()}
    return {
        "cpu_s": medians,
        "ratio": medians["wall-async"] / medians["wall"],
        "censuses": censuses,
        "census_ms": census_ms,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.tasks, args.seconds)))
        return 0
    t0 = time.monotonic()
    r = run(args.tasks, args.seconds, args.rounds)
    cpu = r["cpu_s"]
    took = time.monotonic() - t0
    print(f"{args.tasks} tasks, {args.seconds} s, {args.rounds} rounds ({took:.0f} s)")
    print("| plain | wall | wall --async | wall --async / wall | censuses | CPU per census |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {cpu['plain']:.2f} s | {cpu['wall']:.2f} s | {cpu['wall-async']:.2f} s "
        f"| {r['ratio']:.2f}x | {r['censuses']:.0f} | {r['census_ms']:.1f} ms |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
