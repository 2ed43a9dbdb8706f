"""spprof's debug log on the Python side: SPPROF_DEBUG=1 writes it to stderr."""

from __future__ import annotations

import os
import sys

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _parse(value: str) -> bool:
    v = value.lower()  # exactly the words the native log accepts (log.cpp)
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    print(
        f"[spprof warning] SPPROF_DEBUG={value!r} is not one of 1/0/true/false/yes/no/on/off;"
        " debug log off",
        file=sys.stderr,
    )
    return False


enabled = _parse(os.environ.get("SPPROF_DEBUG", ""))


def debug(msg: str) -> None:
    if enabled:
        print(f"[spprof debug] {msg}", file=sys.stderr, flush=True)
