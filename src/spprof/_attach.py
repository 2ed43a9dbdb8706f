"""The target's side of `spprof attach PID` (cli/attach.py): code sys.remote_exec runs in a
process that was not started with spprof (CPython 3.14+, PEP 768), on its main thread at its
next bytecode. attach() starts a session with the client's settings; detach() stops it again,
only if attach() started it (a session the program started itself is the program's). Each
writes its outcome to the client's result file ("ok" or "error: ..."), atomically; neither
prints nor raises into the program."""

from __future__ import annotations

import json
import os
from typing import Any

from . import _control, _debug, _session

_started = False  # the running session is attach()'s


def _say(result_path: str, text: str) -> None:
    tmp = result_path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, result_path)
    except OSError as exc:
        _debug.debug(f"attach: could not answer at {result_path}: {exc}")


def attach(settings_json: str, result_path: str, runtime_dir: str) -> None:
    global _started
    try:
        settings: dict[str, Any] = json.loads(settings_json)
        if _session.is_active():
            _say(result_path, "error: this process runs spprof already")
            return
        _control.use_runtime_dir(runtime_dir)  # where the client looks
        _session.start(**settings)
        _started = True
    except Exception as exc:  # the program goes on; the client says why
        _say(result_path, f"error: {exc}")
        return
    _say(result_path, "ok")


def detach(result_path: str) -> None:
    global _started
    try:
        if _started and _session.is_active():
            _session.stop()  # the profile is the client's window, already taken
            _say(result_path, "ok")
        else:
            _say(result_path, "error: no session of spprof attach runs here")
    except Exception as exc:
        _say(result_path, f"error: {exc}")
    finally:
        _started = False
