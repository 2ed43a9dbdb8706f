"""Run by `spprof-subprocesses.pth` at the start-up of a Python process whose environment
names a --subprocesses family (_subprocesses.py): profile this process as one of its
children. Imported only then; any failure leaves the program unprofiled, never broken."""

from __future__ import annotations

import sys

# multiprocessing's helpers that live exactly as long as the program that started them: a
# profile of theirs could only be written after the root's, so none is taken. The forkserver
# stays in the family: the workers it forks are profiled.
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def _command_line() -> list[str]:
    argv = getattr(sys, "orig_argv", None)  # 3.10+; sys.argv holds only "-c" here
    if argv is not None:
        return list(argv)
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0")]
    except OSError:
        return []


def _is_helper(argv: list[str]) -> bool:
    code = argv[argv.index("-c") + 1] if "-c" in argv[:-1] else ""
    return any(f"from {m} import main" in code for m in _HELPERS)


def _start() -> None:
    try:
        from . import _session, _subprocesses

        if _subprocesses.from_environment() is None:
            return
        if _is_helper(_command_line()):
            _subprocesses.mark_helper()
        else:
            _session.start_family_child()
    except Exception as exc:  # never the program's problem
        try:
            from . import _debug

            _debug.debug(f"--subprocesses: this process is not profiled: {exc!r}")
        except Exception:
            pass


_start()
