"""The profilers compared, behind one start/stop interface.

A `Config` names one profiler at one rate. `start(config)` begins profiling in this process and
returns a function that stops it and returns a small dict of what the profiler reports
(samples, distinct stacks, ...). py-spy and Austin run out of process: the runner attaches them
to the child by pid (`config.out_of_process`), so `start()` does nothing for them here. Scalene
runs the child itself (`scalene run ... benchmarks/child.py`, `config.wraps_child`), profiling
from the first line, so `start()` does nothing for it either.

cProfile and yappi are deterministic (every call is traced), so they have no rate. pyinstrument
runs at the interval asked; it samples the thread that started it only, as its users run it.
The other profilers are optional: `available(config)` says whether this interpreter has them.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple, Optional


class Config(NamedTuple):
    tool: str  # none, spprof, cProfile, pyinstrument, yappi, py-spy, austin, scalene
    rate_hz: int = 0  # 0 for deterministic profilers and the baseline
    mode: str = ""  # spprof: cpu, wall or native

    @property
    def label(self) -> str:
        parts = [self.tool]
        if self.mode:
            parts.append(self.mode)
        if self.rate_hz:
            parts.append(f"{self.rate_hz} Hz" if self.rate_hz < 1000 else "1 kHz")
        return " ".join(parts)

    @property
    def key(self) -> str:
        return f"{self.tool}-{self.mode or 'x'}-{self.rate_hz}"

    @property
    def out_of_process(self) -> bool:
        return self.tool in ("py-spy", "austin")

    @property
    def wraps_child(self) -> bool:
        return self.tool == "scalene"

    @staticmethod
    def parse(key: str) -> Config:
        tool, mode, rate = key.rsplit("-", 2)
        return Config(tool, int(rate), "" if mode == "x" else mode)


BASELINE = Config("none")

# Every profiled configuration of the overhead table, in column order.
CONFIGS = (
    Config("spprof", 100, "cpu"),
    Config("spprof", 1000, "cpu"),
    Config("spprof", 100, "wall"),
    Config("spprof", 1000, "wall"),
    Config("spprof", 100, "native"),  # CPU mode with native=True (skipped where it raises)
    Config("spprof", 1000, "native"),
    Config("cProfile"),
    Config("pyinstrument", 1000),  # its default interval (1 ms)
    Config("yappi"),  # wall clock (its cpu clock costs a syscall per call), all threads
    Config("py-spy", 100),  # its default rate
    Config("austin", 100),  # -i 10ms (its default is 100 us); wall-time mode, its default
    Config("scalene", 100),  # run --cpu-only, its default CPU sampling interval (10 ms)
)


def py_spy_path() -> Optional[str]:
    """py-spy installed next to this interpreter, else on PATH."""
    here = shutil.which("py-spy", path=str(__import__("pathlib").Path(sys.executable).parent))
    return here or shutil.which("py-spy")


def austin_path() -> Optional[str]:
    """Austin's binary (from the austin-dist wheel) next to this interpreter, else on PATH."""
    here = shutil.which("austin", path=str(__import__("pathlib").Path(sys.executable).parent))
    return here or shutil.which("austin")


def available(config: Config) -> Optional[str]:
    """None if `config` can run here, else why not (a short phrase for the table)."""
    if config.tool == "py-spy":
        return None if py_spy_path() else "py-spy not installed"
    if config.tool == "austin":
        exe = austin_path()
        if exe is None:
            return "austin not installed (PyPI austin-dist)"
        import subprocess

        out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
        if out.returncode != 0:  # e.g. a wheel built against a newer glibc than this one
            return "austin does not run here: " + (out.stderr or out.stdout).strip()[-160:]
        return None
    if config.tool == "scalene" and importlib.util.find_spec("scalene") is None:
        return "scalene not installed"
    if config.tool in ("pyinstrument", "yappi") and importlib.util.find_spec(config.tool) is None:
        return f"{config.tool} not installed"
    if config.tool == "spprof" and config.mode == "native":
        import spprof

        try:
            spprof.start(interval_ms=10, native=True)
        except NotImplementedError:
            return "native=True not implemented yet"
        spprof.stop()
    return None


def start(config: Config) -> Callable[[], dict]:
    """Start profiling this process as `config` says; returns the stop function."""
    if config.tool in ("none", "py-spy", "austin", "scalene"):
        return dict
    if config.tool == "spprof":
        import spprof

        spprof.start(
            interval_ms=1000.0 / config.rate_hz,
            mode="cpu" if config.mode == "native" else config.mode,
            native=config.mode == "native",
        )

        def stop_spprof() -> dict:
            spprof.stop()
            st = spprof.stats()
            return {
                "samples": st["samples_stored"],
                "signals": st["signals"],
                "dropped": st["samples_dropped"],
                "distinct_stacks": st["distinct_stacks"],
                "memory_bytes": st["memory_bytes"],
            }

        return stop_spprof
    if config.tool == "cProfile":
        import cProfile

        prof = cProfile.Profile()
        prof.enable()

        def stop_cprofile() -> dict:
            prof.disable()
            prof.create_stats()
            return {"functions": len(prof.stats)}  # type: ignore[attr-defined]

        return stop_cprofile
    if config.tool == "pyinstrument":
        from pyinstrument import Profiler

        prof = Profiler(interval=1.0 / config.rate_hz)
        prof.start()

        def stop_pyinstrument() -> dict:
            session = prof.stop()
            return {"samples": session.sample_count}

        return stop_pyinstrument
    if config.tool == "yappi":
        import yappi

        yappi.set_clock_type("wall")
        yappi.start(builtins=False, profile_threads=True)

        def stop_yappi() -> dict:
            yappi.stop()
            n = len(yappi.get_func_stats())
            yappi.clear_stats()
            return {"functions": n}

        return stop_yappi
    raise ValueError(f"unknown tool {config.tool!r}")


def tvd(a: Mapping[Any, float], b: Mapping[Any, float]) -> float:
    """Total variation distance between two distributions given as weights (any scale): half
    the sum of the absolute differences of their shares, over the keys of either. 0 if equal,
    1 if disjoint; an empty side counts as all-zero shares."""
    ta, tb = sum(a.values()) or 1, sum(b.values()) or 1
    return 0.5 * sum(abs(a.get(k, 0) / ta - b.get(k, 0) / tb) for k in a.keys() | b.keys())
