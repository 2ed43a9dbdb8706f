"""Output formats. Each writer is a pure function from a Profile to bytes; none imports _ext.

`write` renders first and then replaces a regular target atomically (temporary file, then
rename), so a failed or interrupted write never leaves a half-written profile behind; devices,
FIFOs, /proc files and symlinks are written through, never replaced.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Union

if TYPE_CHECKING:
    from .._model import ProfileData

PathLike = Union[str, "os.PathLike[str]"]


def _writer(module: str, function: str = "render") -> Callable[[ProfileData], bytes]:
    """The module's render(), imported when first called: every profiled program imports
    spprof before its first line, and writes one format at most (importing the nine writers
    up front cost ~10 ms of a ~80 ms import, docs/performance.md "Start-up")."""

    def render(profile: ProfileData) -> bytes:
        writer: Callable[[ProfileData], bytes] = getattr(
            importlib.import_module(f"{__name__}.{module}"), function
        )
        return writer(profile)

    return render


# format name -> (renderer, default file suffix)
FORMATS: dict[str, tuple[Callable[[ProfileData], bytes], str]] = {
    "speedscope": (_writer("speedscope"), ".speedscope.json"),
    "collapsed": (_writer("collapsed"), ".collapsed.txt"),
    "spprof": (_writer("spprof_format"), ".spprof"),
    "pprof": (_writer("pprof"), ".pb.gz"),
    "chrome": (_writer("chrome"), ".trace.json"),
    "html": (_writer("html"), ".html"),
    "flamegraph": (_writer("flamegraph"), ".svg"),
    "gecko": (_writer("gecko"), ".gecko.json"),
    "heatmap": (_writer("heatmap"), ".heatmap.html"),
}

# format name -> how to look at the file, one line (the CLI prints it after writing one)
OPEN_HINTS: dict[str, str] = {
    "speedscope": "open it with https://www.speedscope.app (drag the file in) or `speedscope FILE`",
    "collapsed": "open it with `flamegraph.pl --countname=us FILE > flame.svg` (or inferno)",
    "spprof": "open it with `spprof report FILE`, or convert it: `spprof convert FILE -f html`",
    "pprof": "open it with `go tool pprof -http=: FILE`, or Pyroscope / Grafana",
    "chrome": "open it with https://ui.perfetto.dev or chrome://tracing",
    "html": "open it with any web browser (one file, works offline)",
    "flamegraph": "open it with any web browser: click to zoom, Ctrl-F to search",
    "gecko": "open it with https://profiler.firefox.com (Load a profile from file)",
    "heatmap": "open it with any web browser (one file, works offline)",
}


def check_format(fmt: str) -> str:
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    return fmt


def guess_format(path: PathLike) -> str:
    """The format a file name suggests (see docs/formats.md); speedscope when none fits.

    *.txt/*.folded/*.collapsed -> collapsed, *.spprof -> spprof, *.pb.gz/*.pprof -> pprof,
    *.trace.json/*.chrome.json -> chrome, *.heatmap.html -> heatmap, *.html/*.htm -> html,
    *.svg -> flamegraph, *.gecko.json -> gecko.
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
    if name.endswith(".gecko.json"):
        return "gecko"
    if name.endswith(".svg"):
        return "flamegraph"
    if name.endswith((".heatmap.html", ".heatmap.htm")):  # before *.html
        return "heatmap"
    if name.endswith((".html", ".htm")):
        return "html"
    return "speedscope"


# Pseudo-filesystems whose files cannot be renamed over, and whose links (/dev/stdout ->
# /proc/self/fd/1) name open descriptors, not paths: written through, never replaced.
_PSEUDO_DIRS = ("/proc", "/sys", "/dev/fd")
# Linux's own limit on the links followed in one path lookup.
_MAX_LINKS = 40


@dataclass(frozen=True)
class _Target:
    """Where `write` puts a profile and how (see `_target`)."""

    path: Path  # the user's path with ~ expanded: what messages name
    real: str  # the file written: `path`, or the file its symlink points at
    kind: str  # "replace" (temp file + rename), "device" or "fifo" (opened and written into)
    mode: Optional[int]  # an existing regular file's permission bits, kept by the replacement


def _in_pseudo_dir(path: str) -> bool:
    """Whether looking up `path` passes through /proc, /sys or /dev/fd (following its links)."""
    p = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        parent = os.path.realpath(os.path.dirname(p))
        if any(parent == d or parent.startswith(d + "/") for d in _PSEUDO_DIRS):
            return True
        p = os.path.join(parent, os.path.basename(p))
        if not os.path.islink(p):
            return False
        p = os.path.join(parent, os.readlink(p))
    return False


def _target(path: PathLike) -> _Target:
    p = Path(os.fspath(path)).expanduser()
    name = str(p)
    try:
        st: Optional[os.stat_result] = os.stat(name)
    except FileNotFoundError:
        st = None  # a new file, or a symlink to one
    except NotADirectoryError as exc:
        raise NotADirectoryError(
            exc.errno, f"output path {p}: a parent of it is a file, not a directory"
        ) from None
    except OSError as exc:
        raise OSError(exc.errno, f"output path {p}: {exc.strerror}") from None
    if st is None:
        return _Target(p, os.path.realpath(name), "replace", None)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"output path {p}: is a directory")
    if stat.S_ISFIFO(st.st_mode):
        return _Target(p, name, "fifo", None)
    if not stat.S_ISREG(st.st_mode) or _in_pseudo_dir(name):
        return _Target(p, name, "device", None)
    return _Target(p, os.path.realpath(name), "replace", stat.S_IMODE(st.st_mode) & 0o777)


def _create_temp(real: str) -> tuple[int, str]:
    """Create an empty temporary file beside `real`; return its descriptor and name.

    Mode 0o666 lets the kernel apply the umask (or the directory's default ACL) as it does to
    any new file; mkstemp's fixed 0o600 made every profile private.
    """
    directory, name = os.path.split(real)
    for _ in range(100):
        tmp = os.path.join(directory, f".{name[:200]}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary file name in {directory}")


def _probe(t: _Target) -> None:
    """Raise OSError naming t.path unless `write` could write there; leave nothing behind."""
    if t.kind == "fifo":
        # Opening a FIFO blocks until a reader comes (or fails at once with O_NONBLOCK), so
        # only its permission bits can be checked; root passes whatever they say.
        if not os.access(t.real, os.W_OK):
            raise PermissionError(errno.EACCES, f"output path {t.path}: the FIFO is not writable")
        return
    if t.kind == "device":
        try:
            os.close(os.open(t.real, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY))
        except OSError as exc:
            raise OSError(
                exc.errno, f"output path {t.path}: cannot be opened for writing: {exc.strerror}"
            ) from None
        return
    parent = os.path.dirname(t.real) or "."
    if not os.path.isdir(parent):
        raise FileNotFoundError(
            errno.ENOENT, f"output path {t.path}: directory {parent} does not exist"
        )
    if t.mode is not None and not os.access(t.real, os.W_OK):
        raise PermissionError(errno.EACCES, f"output path {t.path}: the file is not writable")
    try:
        fd, tmp = _create_temp(t.real)
    except OSError as exc:
        why = "is not writable" if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else ""
        raise OSError(
            exc.errno,
            f"output path {t.path}: directory {parent} {why or 'does not take new files'}"
            f" ({exc.strerror})",
        ) from None
    os.close(fd)
    os.unlink(tmp)
    _check_space(t.path, parent)


def _check_space(path: Path, directory: str) -> None:
    """Raise OSError (ENOSPC) when the filesystem holding `directory` has no free block left
    for this process: an empty probe file fits there, a profile would not."""
    try:
        st = os.statvfs(directory)
    except (OSError, AttributeError):  # no statvfs (Windows): nothing to check
        return
    free = st.f_bfree if os.geteuid() == 0 else st.f_bavail  # root may use the reserve
    if st.f_blocks > 0 and free == 0:
        raise OSError(
            errno.ENOSPC, f"output path {path}: no space left on the filesystem of {directory}"
        )


def check_writable(path: PathLike) -> Path:
    """Raise OSError now, naming `path`, if a profile could not be written there later.

    Checks what `write` will do: for a regular or new file, a probe file is created and
    removed in the directory that will hold the temporary file, and that filesystem must
    have free space; a device or /proc file is opened for writing and closed; a FIFO is
    checked by its permission bits only. Returns `path` with ~ expanded, made absolute: the
    program may change its working directory before the profile is written.
    """
    t = _target(path)
    _probe(t)
    return Path(os.path.abspath(t.path))


# Formats that merge threads unless asked to keep each as its root frame (py-spy's --threads);
# the others show threads apart already.
THREAD_ROOT_RENDERERS: dict[str, Callable[[ProfileData], bytes]] = {
    "collapsed": _writer("collapsed", "render_with_thread_roots"),
    "flamegraph": _writer("flamegraph", "render_with_thread_roots"),
}


def render(profile: ProfileData, fmt: str, thread_roots: bool = False) -> bytes:
    """`profile` in `fmt`; `thread_roots` keeps each thread as the root frame where `fmt`
    would merge threads (collapsed, flamegraph), and changes nothing elsewhere."""
    fmt = check_format(fmt)
    if thread_roots and fmt in THREAD_ROOT_RENDERERS:
        return THREAD_ROOT_RENDERERS[fmt](profile)
    return FORMATS[fmt][0](profile)


def _replace(real: str, data: bytes, mode: Optional[int]) -> None:
    fd, tmp = _create_temp(real)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                # Best effort: a filesystem without permission bits (FAT) refuses, harmlessly.
                with contextlib.suppress(OSError):
                    os.fchmod(f.fileno(), mode)
            f.write(data)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_through(real: str, data: bytes) -> None:
    # No O_CREAT: the node exists (checked); it is written into, never replaced. A FIFO's
    # open waits for a reader, as `echo > fifo` does.
    with os.fdopen(os.open(real, os.O_WRONLY | os.O_TRUNC | os.O_NOCTTY), "wb") as f:
        f.write(data)


def _rescue(data: bytes, path: Path) -> Optional[str]:
    """Write `data` to a new private file in a temporary directory; its name, or None.

    For a session's profile that cannot go where it was asked (the program deleted the
    directory, dropped root with os.setuid, filled the disk): said on stderr, never lost.
    Each candidate directory is tried in turn, as the program's user of this moment: the
    temporary directory tempfile chose (cached, maybe before a setuid), then /tmp and /var/tmp.
    Imported at the top: after a setuid the standard library may no longer be readable.
    """
    seen: set[str] = set()
    for d in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if d in seen:
            continue
        seen.add(d)
        try:
            fd, name = tempfile.mkstemp(
                prefix=f"spprof-{os.getpid()}-", suffix=f"-{path.name}", dir=d
            )
        except OSError:
            continue
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name)
            continue
        return name
    return None


def write(
    profile: ProfileData,
    path: PathLike,
    fmt: str,
    thread_roots: bool = False,
    rescue: bool = False,
) -> Path:
    """Write `profile` to `path` in `fmt`; return `path` with ~ expanded.

    A regular or new file (or one a symlink points at) is replaced atomically: a temporary
    file beside it, then a rename. A new file gets the umask's mode, as `open(path, "w")`
    would give it; an existing one keeps its permission bits (one that may be written but not
    replaced, such as another user's file in /tmp, is written into). Devices, FIFOs, sockets and
    files under /proc, /sys and /dev/fd are opened and written into. Errors are OSError
    naming `path`, never the temporary file. With `rescue` (a session's own output, written
    as the program ends), a regular file that cannot be written is written to a new file in
    the temporary directory instead, and the OSError names that file.
    """
    data = render(profile, fmt, thread_roots)
    try:
        return _write_data(data, path)
    except OSError as exc:
        if not rescue:
            raise
        p = Path(os.fspath(path)).expanduser()
        if _is_device_like(p):
            raise  # a device or FIFO the user chose: not a file that could go elsewhere
        rescued = _rescue(data, p)
        if rescued is None:
            raise
        raise OSError(
            exc.errno, f"{exc.strerror}; the profile was written to {rescued} instead"
        ) from exc


def _is_device_like(p: Path) -> bool:
    try:
        st = os.stat(p)
    except OSError:
        return False
    return not stat.S_ISREG(st.st_mode) or _in_pseudo_dir(str(p))


def _write_data(data: bytes, path: PathLike) -> Path:
    t = _target(path)
    _probe(t)
    try:
        if t.kind == "replace":
            try:
                _replace(t.real, data, t.mode)
            except PermissionError:
                # An existing file we may write but not replace (another user's world-writable
                # file in a sticky directory such as /tmp): written into, as open(path, "w").
                if t.mode is None or not os.access(t.real, os.W_OK):
                    raise
                _write_through(t.real, data)
        else:
            _write_through(t.real, data)
    except OSError as exc:
        raise OSError(exc.errno, f"output path {t.path}: {exc.strerror or exc}") from exc
    return t.path
