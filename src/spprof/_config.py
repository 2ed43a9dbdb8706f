"""A session's arguments and the one place they are checked: SessionConfig.validate().

start(), Profiler and `spprof record` all build a SessionConfig and call validate() before
anything is armed, so a bad argument fails with the same ValueError (or OSError for an
output path) from every entry; the CLI prints it with its exit code. The extension checks
its own arguments again at the C boundary, where Python's checks cannot reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ._http_address import HttpAddress, parse_http_address
from .output import PathLike, check_format, check_writable, guess_format

MODES = ("cpu", "wall")
TIMERS = ("auto", "thread", "itimer")
DEFAULT_MEMORY_LIMIT_MB = 256


@dataclass(frozen=True)
class ValidConfig:
    """A checked SessionConfig: numbers as floats, defaults filled in, the format resolved."""

    interval_ms: float
    mode: str
    native: bool
    memory_limit_mb: float
    output_path: Optional[Path]
    output_format: str
    timer: str
    interpreter_frames: bool
    max_overhead_pct: Optional[float]
    async_tasks: bool = False
    greenlets: bool = False  # waiting greenlets (wall mode, _greenlet_census.py)
    http: Optional[HttpAddress] = None  # the pprof endpoint (_http.py), None: none
    subprocesses: bool = False  # child processes profiled too (_subprocesses.py)


@dataclass(frozen=True)
class SessionConfig:
    """The arguments of start() as given (docs/usage.md); validate() checks them."""

    interval_ms: object = 10
    mode: object = "cpu"
    native: object = False
    memory_limit_mb: object = None
    output_path: Optional[PathLike] = None
    output_format: Optional[str] = None
    timer: object = "auto"
    interpreter_frames: object = False
    max_overhead_pct: object = None
    async_tasks: object = False
    greenlets: object = False
    http: object = None
    http_allow_remote: object = False
    subprocesses: object = False

    def validate(self, names: Mapping[str, str] = {}) -> ValidConfig:
        """Check every argument; raise ValueError (OSError: output path) naming the first bad one.

        `names`: how the caller spells an argument in messages (the CLI: its flags), by field.
        """

        def name(field: str) -> str:
            return names.get(field, field)

        overhead = self.max_overhead_pct
        overhead_pct = _as_number(overhead)
        if overhead is not None and (overhead_pct is None or not 0 < overhead_pct <= 100):
            raise ValueError(
                f"{name('max_overhead_pct')} must be a percentage in (0, 100], got {overhead!r}"
            )
        interval = _as_number(self.interval_ms)
        if interval is None:
            raise ValueError(
                f"{name('interval_ms')} must be a number of milliseconds between 1 and 1000, "
                f"got {self.interval_ms!r}"
            )
        if not 1 <= interval <= 1000:
            raise ValueError(
                f"{name('interval_ms')} must be between 1 and 1000 ms, got {self.interval_ms!r}"
            )
        if self.mode not in MODES:
            raise ValueError(f"{name('mode')} must be 'cpu' or 'wall', got {self.mode!r}")
        if self.timer not in TIMERS:
            raise ValueError(
                f"{name('timer')} must be one of {', '.join(TIMERS)}, got {self.timer!r}"
            )
        if not isinstance(self.async_tasks, bool):
            raise ValueError(
                f"{name('async_tasks')} must be True or False, got {self.async_tasks!r}"
            )
        if not isinstance(self.greenlets, bool):
            raise ValueError(f"{name('greenlets')} must be True or False, got {self.greenlets!r}")
        if not isinstance(self.subprocesses, bool):
            raise ValueError(
                f"{name('subprocesses')} must be True or False, got {self.subprocesses!r}"
            )
        path = check_writable(self.output_path) if self.output_path is not None else None
        fmt = check_format(self.output_format) if self.output_format is not None else None
        if fmt is None:
            fmt = guess_format(path) if path is not None else "speedscope"
        limit = (
            float(DEFAULT_MEMORY_LIMIT_MB)
            if self.memory_limit_mb is None
            else _as_number(self.memory_limit_mb)
        )
        if limit is None or not 0 < limit < float("inf"):
            raise ValueError(
                f"{name('memory_limit_mb')} must be a positive number of megabytes, "
                f"got {self.memory_limit_mb!r}"
            )
        http = (
            None
            if self.http is None
            else parse_http_address(self.http, self.http_allow_remote, name("http"))
        )
        return ValidConfig(
            interval_ms=interval,
            mode=str(self.mode),
            native=bool(self.native),
            memory_limit_mb=limit,
            output_path=path,
            output_format=fmt,
            timer=str(self.timer),
            interpreter_frames=bool(self.interpreter_frames),
            max_overhead_pct=overhead_pct,
            async_tasks=self.async_tasks,
            greenlets=self.greenlets,
            http=http,
            subprocesses=self.subprocesses,
        )


def _as_number(value: object) -> Optional[float]:
    """`value` as a float if it is an int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
