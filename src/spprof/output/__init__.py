"""Output formats. Each writer is a pure function from a Profile to bytes; none imports _ext.

`write` renders first and then replaces the target atomically, so a failed or interrupted
write never leaves a half-written profile behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Union

from . import chrome, collapsed, html, pprof, speedscope, spprof_format

if TYPE_CHECKING:
    from .._model import Profile

PathLike = Union[str, "os.PathLike[str]"]

# format name -> (renderer, default file suffix)
FORMATS: dict[str, tuple[Callable[[Profile], bytes], str]] = {
    "speedscope": (speedscope.render, ".speedscope.json"),
    "collapsed": (collapsed.render, ".collapsed.txt"),
    "spprof": (spprof_format.render, ".spprof"),
    "pprof": (pprof.render, ".pb.gz"),
    "chrome": (chrome.render, ".trace.json"),
    "html": (html.render, ".html"),
}


def check_format(fmt: str) -> str:
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    return fmt


def guess_format(path: PathLike) -> str:
    """The format a file name suggests (see docs/formats.md); speedscope when none fits.

    *.txt/*.folded/*.collapsed -> collapsed, *.spprof -> spprof, *.pb.gz/*.pprof -> pprof,
    *.trace.json/*.chrome.json -> chrome, *.html/*.htm -> html.
    """
    name = os.fspath(path).lower()
    if name.endswith((".txt", ".folded", ".collapsed")):
        return "collapsed"
    if name.endswith(".spprof"):
        return "spprof"
    if name.endswith((".pb.gz", ".pprof", ".pb")):
        return "pprof"
    if name.endswith((".trace.json", ".chrome.json")):
        return "chrome"
    if name.endswith((".html", ".htm")):
        return "html"
    return "speedscope"


def check_writable(path: PathLike) -> Path:
    """Raise OSError now if `path` cannot be written later (missing or read-only directory)."""
    p = Path(os.fspath(path)).expanduser()
    if p.is_dir():
        raise IsADirectoryError(21, f"output path is a directory: {p}")
    parent = p.parent if str(p.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise NotADirectoryError(20, f"output path is under a file, not a directory: {parent}")
    if not parent.is_dir():
        raise FileNotFoundError(2, f"output directory does not exist: {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(13, f"output directory is not writable: {parent}")
    if p.exists() and not os.access(p, os.W_OK):
        raise PermissionError(13, f"output file is not writable: {p}")
    return p


def render(profile: Profile, fmt: str) -> bytes:
    return FORMATS[check_format(fmt)][0](profile)


def write(profile: Profile, path: PathLike, fmt: str) -> Path:
    data = render(profile, fmt)
    target = check_writable(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=str(target.parent or "."))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target
