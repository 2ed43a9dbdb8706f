"""spprof's own messages on stderr, which must never change how the program ends.

The program may have closed sys.stderr or fd 2, replaced sys.stderr, or pointed it at a full
device (/dev/full). Text sent through sys.stderr's buffer that cannot be written stays there,
and Python's final flush then fails: exit status 120 for a program that would have ended 0.
So a message goes straight to stderr's descriptor, after the program's pending text, and is
dropped when it cannot be written; a stderr without a descriptor (StringIO, pytest's capsys)
gets it through write() and flush(), errors ignored.
"""

from __future__ import annotations

import contextlib
import os
import sys


def say(text: str) -> bool:
    """Print `text` (and a newline) on stderr if that can be done; False when it could not."""
    stream = sys.stderr
    if stream is None or getattr(stream, "closed", False):
        return False
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        fd = -1
    if fd < 0:
        try:
            stream.write(text + "\n")
            stream.flush()
            return True
        except (OSError, ValueError, AttributeError):
            return False
    try:
        stream.flush()  # the program's own text first, in order
    except (OSError, ValueError):
        return False
    encoding = getattr(stream, "encoding", None) or "utf-8"
    data = (text + "\n").encode(encoding, "backslashreplace")
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        return False
    return True


def is_tty() -> bool:
    """Whether stderr is a terminal (False when it is closed or gone)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return bool(sys.stderr.isatty())
    return False
