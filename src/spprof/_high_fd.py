"""spprof's own sockets (the pprof endpoint's, the control channel's) live at high descriptor
numbers: a program that opens files expecting the lowest free number (or dup2()s onto 3, 4,
...) must not find one of ours there. held_fd.cpp does the same for the native side."""

from __future__ import annotations

import fcntl
import os
import resource
import socket

from . import _debug

_DUPFD = getattr(fcntl, "F_DUPFD_CLOEXEC", fcntl.F_DUPFD)  # close-on-exec set after, too


def fd_floor() -> int:
    """held_fd_floor() in Python: 512, or half the soft RLIMIT_NOFILE when that is below 1024."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 1024:
        return max(3, soft // 2)
    return 512


def move_high(sock: socket.socket, what: str) -> socket.socket:
    """`sock` at a number >= fd_floor(), close-on-exec; itself when none is free up there."""
    try:
        high = fcntl.fcntl(sock.fileno(), _DUPFD, fd_floor())
        os.set_inheritable(high, False)
    except OSError as exc:  # no number free up there: keep the low one (still close-on-exec)
        _debug.debug(f"{what}: socket kept at fd {sock.fileno()}: {exc}")
        return sock
    family, kind = sock.family, sock.type
    sock.close()
    return socket.socket(family, kind, 0, high)


def identity(sock: socket.socket) -> tuple[int, int]:
    """(st_dev, st_ino): what proves, before a close or an accept, that the number is still
    ours (a daemon may close every descriptor and open its own at the same number)."""
    st = os.fstat(sock.fileno())
    return st.st_dev, st.st_ino


def still_ours(sock: socket.socket, ident: tuple[int, int]) -> bool:
    try:
        return identity(sock) == ident
    except (OSError, ValueError):
        return False
