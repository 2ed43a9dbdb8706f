"""`spprof attach PID [-d S] [-o OUT] [options]`: profile a process that was not started with
spprof, on CPython 3.14+ (sys.remote_exec, PEP 768).

The client writes a small script into its runtime directory (0700, _control.py) and asks
the target to run it (sys.remote_exec): the script imports spprof in the target and starts a
session with the client's settings (spprof/_attach.py). Then it is `record --pid`: a window
of S seconds (or until Ctrl-C), written here in any format. At the end a second script stops
the session attach started, so the process goes on as it was.

remote_exec needs what a debugger needs: the same user, and ptrace permission over the
target (Linux: kernel.yama.ptrace_scope 0, or CAP_SYS_PTRACE; macOS: root), a target of the
same CPython version that has not disabled remote debugging, and spprof importable there.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from typing import Any, Optional

from .. import _control
from .errors import CliError, Parser, guarded
from .record import add_session_options, interval_ms, output_format, session_config
from .record_pid import output_path, take_window, write_window
from .remote import parse_pid, runs_spprof

RUN_WITHIN_S = 10.0  # the target's main thread runs the script at its next bytecode


def _parser() -> Parser:
    p = Parser(
        prog="spprof attach",
        description="Profile a running Python 3.14+ process that was not started with spprof.",
    )
    p.add_argument("pid", help="the process id")
    p.add_argument(
        "-d", "--duration", type=float, default=None, metavar="S",
        help="seconds to record (default: until Ctrl-C)",
    )  # fmt: skip
    add_session_options(p)
    return p


def _settings(opts: Any, fmt: str) -> dict[str, Any]:
    if opts.subprocesses:
        raise CliError("attach: --subprocesses needs the program started under spprof")
    session_config(opts, fmt)  # every option checked here, before the target is touched
    return {
        "interval_ms": interval_ms(opts),
        "mode": opts.mode,
        "native": opts.native,
        "timer": opts.timer,
        "interpreter_frames": opts.interpreter_frames,
        "max_overhead_pct": opts.max_overhead,
        "async_tasks": opts.async_tasks,
        "greenlets": opts.greenlets,
    }


def _run_in_target(pid: int, directory: str, call: str, what: str) -> Optional[str]:
    """Have the target run `from spprof import _attach; _attach.<call>`, with RESULT its
    result file; its answer, or None when it did not run within RUN_WITHIN_S."""
    fd, script = tempfile.mkstemp(prefix=f"attach-{pid}-", suffix=".py", dir=directory)
    result = script[: -len(".py")] + ".result"
    body = (
        f"RESULT = {result!r}\n"
        "try:\n"
        "    from spprof import _attach\n"
        "except BaseException as exc:\n"
        "    with open(RESULT, 'w') as f:\n"
        "        f.write('error: spprof cannot be imported in this process: %r' % (exc,))\n"
        "else:\n"
        f"    _attach.{call}\n"
    )
    with os.fdopen(fd, "w") as f:
        f.write(body)
    try:
        try:
            sys.remote_exec(pid, script)  # type: ignore[attr-defined]
        except (OSError, RuntimeError) as exc:
            raise CliError(
                f"attach: cannot {what} process {pid}: {exc} (sys.remote_exec needs ptrace "
                "permission over it: the same user and kernel.yama.ptrace_scope 0, or "
                "CAP_SYS_PTRACE; and a CPython of the same version with remote debugging on)"
            ) from None
        deadline = time.monotonic() + RUN_WITHIN_S
        while time.monotonic() < deadline:
            try:
                with open(result) as f:
                    answer = f.read()
            except FileNotFoundError:
                time.sleep(0.02)
                continue
            with contextlib.suppress(OSError):
                os.unlink(script)
            return answer
        return None
    finally:
        # The script stays if the target has not run it yet (it reads it then); the next
        # session's tidying removes it after two hours.
        with contextlib.suppress(OSError):
            os.unlink(result)


def _attach(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    pid = parse_pid(opts.pid)
    if opts.duration is not None and not 0 < opts.duration <= 3600:
        raise CliError(f"attach: duration must be 0-3600 seconds, got {opts.duration:g}")
    if not hasattr(sys, "remote_exec"):
        raise CliError(
            "attach needs CPython 3.14 or later (sys.remote_exec, PEP 768); this is "
            f"CPython {sys.version_info.major}.{sys.version_info.minor}: run the program "
            "under `python -m spprof`, or call spprof.start() in it"
        )
    fmt = output_format(opts.format, opts.output)
    settings = _settings(opts, fmt)
    out = output_path(opts, pid, fmt)
    if runs_spprof(pid):
        raise CliError(f"process {pid} runs spprof already: use `spprof record --pid {pid}`")
    directory = _control.runtime_dir(create=True)
    # The target answers where this side looks, whatever its own SPPROF_RUNTIME_DIR says.
    call = f"attach({json.dumps(settings)!r}, RESULT, {directory!r})"
    said = _run_in_target(pid, directory, call, "attach to")
    if said is None:
        _run_in_target(pid, directory, "detach(RESULT)", "detach from")
        raise CliError(
            f"attach: process {pid} did not run spprof's code within {RUN_WITHIN_S:g} s (its "
            "main thread runs no Python code now: blocked in a C call?); nothing was started"
        )
    if said != "ok":
        raise CliError(f"attach: process {pid}: {said.removeprefix('error: ')}")
    try:
        profile = take_window(pid, opts.duration, opts.quiet)
    finally:
        done = _run_in_target(pid, directory, "detach(RESULT)", "detach from")
        if done is None and not opts.quiet:
            print(
                f"spprof: the session in process {pid} stops when its main thread next runs "
                "Python code",
                file=sys.stderr,
            )
    write_window(profile, out, fmt, opts)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    return guarded(_attach, list(sys.argv[2:] if argv is None else argv))
