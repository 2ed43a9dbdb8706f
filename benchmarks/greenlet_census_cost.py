"""Cost of the greenlet census (issue 26, `--greenlets`): process CPU with 1,000 gevent
greenlets at 100 Hz, and the cost of one greenlet switch.

A program keeps GREENLETS gevent greenlets alive for SECONDS, each looping on
`gevent.sleep(d)` with d drawn in [50, 150] ms, plus a little work per wake-up. It runs plain,
in wall mode, and in wall mode with `greenlets=True` (the trace function at every switch and
the census every 50 ms on top), each in a fresh interpreter, rounds interleaved. The figure is
the process's CPU time (user + system, all threads: spprof's included) over the run; the goal
is wall+greenlets <= 2x wall, as for asyncio. Then two plain greenlets switch back and forth
SWITCHES times without and with the trace function: ns per switch.

    python -m benchmarks.greenlet_census_cost            # 1,000 greenlets, 4 s, 3 rounds
    python -m benchmarks.greenlet_census_cost --greenlets 200 --seconds 1 --rounds 1   # smoke
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CONFIGS = ("plain", "wall", "wall-greenlets")
SWITCHES = 200_000


def child(config: str, greenlets: int, seconds: float) -> dict:
    import random

    import gevent

    profiler = None
    if config != "plain":
        import spprof

        profiler = spprof.Profiler(
            interval_ms=10, mode="wall", greenlets=config == "wall-greenlets"
        )
        profiler.start()

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        while True:
            gevent.sleep(rnd.uniform(0.05, 0.15))
            sum(range(200))

    cpu0 = time.process_time()
    workers = [gevent.spawn(worker, i) for i in range(greenlets)]
    gevent.sleep(seconds)
    gevent.killall(workers)
    cpu = time.process_time() - cpu0
    censuses = census_ns = waiting = 0
    if profiler is not None:
        profiler.stop()
        stats = profiler.profile.stats
        censuses = int(stats.get("greenlet_censuses", 0))
        census_ns = int(stats.get("greenlet_census_ns", 0))
        waiting = int(stats.get("greenlet_waiting_seen", 0))
    return {
        "cpu_s": cpu,
        "censuses": censuses,
        "census_ms": census_ns / 1e6 / max(1, censuses),
        "waiting": waiting,
    }


def switch_ns(traced: bool) -> float:
    """ns per switch of two plain greenlets switching back and forth (best of 5)."""
    import greenlet

    import spprof

    if traced:
        spprof.start(mode="wall", greenlets=True)
        # What the traced figure is for: every switch calls spprof's trace function.
        if greenlet.gettrace() is None:
            raise SystemExit("greenlets=True installed no greenlet trace function")

    def pong() -> None:
        parent = greenlet.getcurrent().parent
        while True:
            parent.switch()

    g = greenlet.greenlet(pong)
    g.switch()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(SWITCHES // 2):
            g.switch()
        best = min(best, (time.perf_counter() - t) / SWITCHES * 1e9)
    if traced:
        spprof.stop()
    return best


def measure(args: list[str]) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.greenlet_census_cost", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout
    result: dict = json.loads(out.strip().splitlines()[-1])
    return result


def run(greenlets: int, seconds: float, rounds: int) -> dict:
    cpu: dict[str, list[float]] = {c: [] for c in CONFIGS}
    last: dict = {}
    switches: dict[str, list[float]] = {"plain": [], "traced": []}
    for _ in range(rounds):
        for config in CONFIGS:
            r = measure(
                ["--child", config, "--greenlets", str(greenlets), "--seconds", str(seconds)]
            )
            cpu[config].append(r["cpu_s"])
            if config == "wall-greenlets":
                last = r
        for kind in switches:
            switches[kind].append(measure(["--switches", kind])["ns"])
    medians = {c: statistics.median(v) for c, v in cpu.items()}
    return {
        "cpu_s": medians,
        "ratio": medians["wall-greenlets"] / medians["wall"],
        "last": last,
        "switch_ns": {k: statistics.median(v) for k, v in switches.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--greenlets", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    ap.add_argument("--switches", choices=("plain", "traced"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.greenlets, args.seconds)))
        return 0
    if args.switches:
        print(json.dumps({"ns": switch_ns(args.switches == "traced")}))
        return 0
    t0 = time.monotonic()
    r = run(args.greenlets, args.seconds, args.rounds)
    cpu, last, sw = r["cpu_s"], r["last"], r["switch_ns"]
    took = time.monotonic() - t0
    print(f"{args.greenlets} greenlets, {args.seconds} s, {args.rounds} rounds ({took:.0f} s)")
    print(
        "| plain | wall | wall --greenlets | wall --greenlets / wall | censuses "
        "| CPU per census | waiting seen |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {cpu['plain']:.2f} s | {cpu['wall']:.2f} s | {cpu['wall-greenlets']:.2f} s "
        f"| {r['ratio']:.2f}x | {last['censuses']:.0f} | {last['census_ms']:.1f} ms "
        f"| {last['waiting']} |"
    )
    print()
    print("| switch, plain | switch, traced |")
    print("|---|---|")
    print(f"| {sw['plain']:.0f} ns | {sw['traced']:.0f} ns |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
