"""The client end of the control channel (spprof/_control.py): requests to a process that
runs spprof, and their answers; every way it can fail is a CliError naming the cause."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

from .. import _control
from .errors import CliError


def parse_pid(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise CliError(f"a process id is a positive whole number, got {text!r}")
    return int(text)


class Connection:
    """One connection to process `pid`'s control socket (a context manager)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.settimeout(5.0)
            self.sock.connect(_socket_of(pid))
        except (ConnectionRefusedError, FileNotFoundError):
            self.sock.close()
            raise CliError(
                f"process {pid} is not running spprof any more (its session ended)"
            ) from None
        except BaseException:
            self.sock.close()
            raise

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, request: dict[str, Any]) -> None:
        try:
            self.sock.sendall(json.dumps(request).encode() + b"\n")
        except OSError as exc:
            raise CliError(f"process {self.pid} closed the connection: {exc.strerror}") from None

    def receive(self, timeout_s: float) -> dict[str, Any]:
        """The answer (ok true), else CliError."""
        deadline = time.monotonic() + timeout_s
        data = b""
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise CliError(f"process {self.pid} did not answer within {timeout_s:g} s")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            if not chunk:
                break
            data += chunk
        if not data:
            raise CliError(f"process {self.pid} closed the connection without an answer")
        try:
            answer = json.loads(data)
        except ValueError:
            raise CliError(f"process {self.pid} gave an answer that is not spprof's") from None
        if not isinstance(answer, dict) or not answer.get("ok"):
            error = answer.get("error") if isinstance(answer, dict) else None
            raise CliError(f"process {self.pid}: {error or 'the request failed'}")
        return answer


def ask(pid: int, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    with Connection(pid) as conn:
        conn.send(request)
        return conn.receive(timeout_s)


def runs_spprof(pid: int) -> bool:
    """Whether process `pid` answers on a control socket; CliError when there is no such
    process or it is another user's."""
    try:
        Connection(pid).__exit__()
    except CliError:
        _check_process(pid)
        return False
    return True


def _check_process(pid: int) -> None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise CliError(f"no process with id {pid}") from None
    except PermissionError:
        raise CliError(
            f"process {pid} belongs to another user: spprof reaches only your own processes"
        ) from None


def _socket_of(pid: int) -> str:
    """The path of `pid`'s control socket, or CliError saying why there is none."""
    _check_process(pid)
    not_running = (
        f"process {pid} is not running spprof (no control socket: it must run under "
        "`python -m spprof` or call spprof.start(), without SPPROF_CONTROL=0"
    )
    try:
        directory = _control.runtime_dir(create=False)
    except FileNotFoundError:
        raise CliError(not_running + ")") from None
    path = _control.socket_path(directory, pid)
    if not os.path.exists(path):
        env = os.environ.get("SPPROF_RUNTIME_DIR")
        where = f", and with the same SPPROF_RUNTIME_DIR={env}" if env else ""
        raise CliError(f"{not_running}{where})")
    return path
