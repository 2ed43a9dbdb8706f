"""`spprof top PID [-d S] [-n N] [--top N]`: a live view of a process that runs spprof.

Every S seconds (default 1) a window of the last S seconds (cli/record_pid.py's request)
becomes one screen: the functions by self and by total time, and each thread's CPU %. On a
terminal the screen is redrawn in place and `q` (or Ctrl-C) leaves; elsewhere (a pipe)
each screen is printed after the last. Leaving closes the connection: the target drops the
window it was taking and goes on as before.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import sys
from collections.abc import Iterator
from typing import Any, Optional

from .._model import ProfileData
from ..output.report import _label, _seconds, _short_path
from .errors import Parser, guarded
from .inputs import load_inputs
from .remote import Connection, parse_pid

CLEAR = "\x1b[H\x1b[2J"


def _parser() -> Parser:
    p = Parser(
        prog="spprof top",
        description="A live view of a process that runs spprof: top functions, thread CPU.",
    )
    p.add_argument("pid", help="the process id")
    p.add_argument(
        "-d", "--delay", type=float, default=1.0, metavar="S", help="seconds per screen (0.2-60)"
    )
    p.add_argument(
        "-n", "--iterations", type=int, default=0, metavar="N", help="end after N screens"
    )
    p.add_argument("--top", type=int, default=0, metavar="N", help="functions per list")
    return p


def screen(profile: ProfileData, pid: int, rows: int, width: int, top: int = 0) -> str:
    """One screen of `profile` (a window) for a terminal of `rows` x `width`."""
    argv = " ".join(profile.metadata.get("argv") or [])
    span = profile.duration_ns or 1
    total = profile.total_weight_ns or 1
    lines = [
        f"spprof top - process {pid}: {argv}"[:width],
        f"{profile.sample_count} samples over {_seconds(span)} ({profile.mode} mode, "
        f"{profile.interval_ms:g} ms interval)   q: quit"[:width],
        "",
        f"  {'THREAD':<24} {'TID':>8} {'CPU%':>6}",
    ]
    threads = sorted(profile.threads, key=lambda t: t.cpu_ns, reverse=True)
    for t in threads[:8]:
        lines.append(f"  {t.label[:24]:<24} {t.native_thread_id:>8} {100 * t.cpu_ns / span:>5.1f}%")
    if len(threads) > 8:
        lines.append(f"  ... and {len(threads) - 8} more threads")
    funcs = profile.aggregate()
    room = max(3, (rows - len(lines) - 6) // 2)
    per_list = min(top, room) if top > 0 else room
    for title, key in (("self", "self_ns"), ("total", "total_ns")):
        lines += ["", f"  {'%' + title.upper():>7} {'TIME':>8}  FUNCTION (FILE:LINE)"]
        ranked = sorted(funcs, key=lambda f: getattr(f, key), reverse=True)
        for f in ranked[:per_list]:
            value = getattr(f, key)
            if value == 0:
                break
            line = f.hottest_total_line if key == "total_ns" else f.hottest_line
            label = _label(f.qualname, _short_path(f.filename, 40), line)
            lines.append(f"  {100 * value / total:>6.1f}% {_seconds(value):>8}  {label}"[:width])
    return "\n".join(lines) + "\n"


class _Keys:
    """The terminal in cbreak mode while top runs (a key is read as it is typed); put back
    as it was at the end. Nothing when stdin is not a terminal."""

    def __init__(self) -> None:
        self.fd: Optional[int] = None
        self.saved: Any = None

    def __enter__(self) -> _Keys:
        if sys.stdin.isatty():
            import termios
            import tty

            self.fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)

    def quit_typed(self, timeout_s: float) -> bool:
        if self.fd is None:
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        return bool(ready) and os.read(self.fd, 32)[:1] in (b"q", b"Q")


def _windows(pid: int, delay: float, keys: _Keys) -> Iterator[Optional[ProfileData]]:
    """One window's profile per screen; None when `q` was typed meanwhile."""
    while True:
        with Connection(pid) as conn:
            conn.send({"cmd": "window", "seconds": delay})
            # On a terminal, watch for `q` while the window runs; else receive() waits.
            while keys.fd is not None and not select.select([conn.sock], [], [], 0)[0]:
                if keys.quit_typed(0.05):
                    yield None
                    return
            answer = conn.receive(delay + 60)
        path = str(answer["path"])
        try:
            profile = load_inputs([path], "top")
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        yield profile


def _top(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    pid = parse_pid(opts.pid)
    if not 0.2 <= opts.delay <= 60:
        raise ValueError(f"top: --delay must be 0.2-60 seconds, got {opts.delay:g}")
    live = sys.stdout.isatty()
    shown = 0
    try:
        with _Keys() as keys:
            for profile in _windows(pid, opts.delay, keys):
                if profile is None:
                    break
                size = shutil.get_terminal_size()
                text = screen(profile, pid, size.lines if live else 40, size.columns, opts.top)
                sys.stdout.write(CLEAR + text if live else text + "\n")
                sys.stdout.flush()
                shown += 1
                if opts.iterations and shown >= opts.iterations:
                    break
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    return guarded(_top, list(sys.argv[2:] if argv is None else argv))
