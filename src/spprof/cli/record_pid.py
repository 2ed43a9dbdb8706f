"""`spprof record --pid PID [--duration S] [-o OUT] [-f FORMAT]`: a window of the next S
seconds (or until Ctrl-C) on the session a running process already has, written here in any
format. The process takes the window and saves it as .spprof in the runtime directory
(_control.py); this side converts it, so rendering costs the target nothing."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import Any, Optional

from .. import _stderr
from .._profile import Profile
from ..output import FORMATS, check_writable, write
from ..output.report import summary
from .errors import CliError
from .inputs import load_inputs
from .remote import Connection, parse_pid

# Options that shape a session: the target's session has its own, a window cannot change them.
SESSION_OPTIONS = (
    "-i", "--interval", "-r", "--rate", "--mode", "--timer", "--native",
    "--interpreter-frames", "--async", "--max-overhead", "--subprocesses", "--http",
    "--http-allow-remote",
)  # fmt: skip
UNTIL_CTRL_C_S = 3600  # the longest window: the target's limit (_control.MAX_WINDOW_S)


def _given(argv: list[str], option: str) -> bool:
    return any(a == option or a.startswith(option + "=") for a in argv)


def record_pid(opts: argparse.Namespace, argv: list[str], fmt: str) -> int:
    pid = parse_pid(opts.pid)
    if opts.module is not None or opts.code is not None or opts.target:
        raise CliError("--pid records a process that runs already: give no program to run")
    shaping = [o for o in SESSION_OPTIONS if _given(argv, o)]
    if shaping:
        raise CliError(
            f"--pid takes a window on the session process {pid} runs, with its settings: "
            f"{', '.join(shaping)} cannot change them"
        )
    out = output_path(opts, pid, fmt)
    profile = take_window(pid, opts.duration, opts.quiet)
    write_window(profile, out, fmt, opts)
    return 0


def output_path(opts: argparse.Namespace, pid: int, fmt: str) -> Path:
    return check_writable(
        Path(opts.output) if opts.output else Path(f"spprof-{pid}{FORMATS[fmt][1]}")
    )


def take_window(pid: int, duration: Optional[float], quiet: bool) -> Profile:
    """A window of the next `duration` seconds (None: until Ctrl-C) on process pid's session."""
    request: dict[str, Any] = {"cmd": "window", "seconds": duration or UNTIL_CTRL_C_S}
    if duration is None:
        request["until_end"] = True
        if not quiet:
            _stderr.say(f"spprof: recording process {pid}; Ctrl-C to stop")
    answer = _ask_window(pid, request, duration)
    path = str(answer["path"])
    try:
        return load_inputs([path], "record --pid")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def write_window(profile: Profile, out: Path, fmt: str, opts: argparse.Namespace) -> None:
    """Written in `fmt`, with the CLI's sample filters (py-spy's: wall mode leaves idle
    samples out unless --idle; --gil keeps samples holding the GIL) and its summary."""
    kept = profile
    if (profile.mode == "wall" and not opts.idle) or opts.gil:
        kept = profile.filter(idle=opts.idle or profile.mode != "wall", gil_only=opts.gil)
    write(kept, out, fmt, thread_roots=opts.threads)
    if not opts.quiet:
        _stderr.say(summary(kept, top=opts.top, output=str(out), fmt=fmt, threads_of=profile))


def _ask_window(pid: int, request: dict[str, Any], duration: Optional[float]) -> dict[str, Any]:
    """The window's answer; Ctrl-C (no --duration) ends it early and still gets it."""
    with Connection(pid) as conn:
        conn.send(request)
        if duration is not None:
            return conn.receive(duration + 60)
        try:
            return conn.receive(UNTIL_CTRL_C_S + 60)
        except KeyboardInterrupt:
            conn.send({"cmd": "end"})
        return conn.receive(60)
