"""Torture: Python code running in subinterpreters from worker threads (tests/test_torture.py).

    subinterpreters.py SECONDS

Where the running CPython offers them (`concurrent.interpreters` on 3.14+, `_interpreters` on
3.13, `_xxsubinterpreters` on 3.9-3.12), WORKERS threads (`subinterp-N`) each create a
subinterpreter, run a short loop in it (`sub_work`), destroy it and start again until the
deadline, while the main thread computes in `main_thread_work`. The first line on stdout is
`SUBINTERPRETERS ran=<module> runs=N` or `SUBINTERPRETERS unavailable`.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from typing import Any, Callable

from _threads import run_threads

WORKERS = 2
RUN_SECONDS = 0.1  # each subinterpreter's share of work

SUB_CODE = """
import time

def sub_work(deadline):
    total = 0
    while time.monotonic() < deadline:
        for i in range(500):
            total += (i * 3) & 7
    return total

sub_work(time.monotonic() + {seconds!r})
"""


def find_api() -> tuple[str, Callable[[str], None]] | None:
    """(module name, run(code) in a fresh subinterpreter), or None where there are none."""
    for name in ("concurrent.interpreters", "_interpreters", "_xxsubinterpreters"):
        try:
            mod: Any = importlib.import_module(name)
        except ImportError:
            continue
        if name == "concurrent.interpreters":

            def run_high(code: str, mod: Any = mod) -> None:
                interp = mod.create()
                try:
                    interp.exec(code)
                finally:
                    interp.close()

            return name, run_high

        def run_low(code: str, mod: Any = mod) -> None:
            interp = mod.create()
            try:
                failure = mod.run_string(interp, code)
                if failure is not None:  # 3.13: an exception snapshot instead of raising
                    raise RuntimeError(f"subinterpreter failed: {failure}")
            finally:
                mod.destroy(interp)

        return name, run_low
    return None


def worker(
    run: Callable[[str], None], deadline: float, runs: list[int], errors: list[str], k: int
) -> None:
    code = SUB_CODE.format(seconds=RUN_SECONDS)
    try:
        while time.monotonic() < deadline:
            run(code)
            runs[k] += 1
    except Exception as exc:  # reported by main(): the exit code must say it
        errors.append(repr(exc))


def main_thread_work(deadline: float) -> int:
    total = 0
    while time.monotonic() < deadline:
        for i in range(1000):
            total += (i * 5) % 9
    return total


def main(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    api = find_api()
    if api is None:
        print("SUBINTERPRETERS unavailable", flush=True)
        main_thread_work(deadline)
        return
    name, run = api
    runs = [0] * WORKERS
    errors: list[str] = []
    threads = [
        threading.Thread(
            target=worker, args=(run, deadline, runs, errors, k), name=f"subinterp-{k}"
        )
        for k in range(WORKERS)
    ]
    run_threads(threads, lambda: main_thread_work(deadline))
    print(f"SUBINTERPRETERS ran={name} runs={sum(runs)}", flush=True)
    if errors:
        sys.exit(f"subinterpreter errors: {errors}")


if __name__ == "__main__":
    main(float(sys.argv[1]))
