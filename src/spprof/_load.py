"""spprof.load: read a lossless .spprof file (output/spprof_format.py) back into a Profile.

Every way a file can be wrong (not gzip, truncated, another format, a newer version, a
section cut short, an index out of range) ends in one ProfileFormatError naming the file, so
callers print one line instead of a traceback from gzip, json or struct.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import struct
import zlib
from typing import Any, Union

from . import _async_view, _greenlet_view, _mypyc_names, _runner_frames
from ._model import Frame, ThreadRecord
from ._profile import Profile
from ._rows import ROW_SIZE, SERIAL_MASK, STACK, THREAD_AND_FLAGS, TIMESTAMP, WEIGHT
from .output.spprof_format import (
    MAGIC,
    ROW_PLANES,
    TIME_RAW,
    TIME_RESIDUAL,
    TIME_RESIDUAL_US,
    VERSION,
    field,
)

PathLike = Union[str, "os.PathLike[str]"]

_SECTION = struct.Struct("<4sQ")
# Keys every thread entry has (newer optional ones, with defaults, may be absent in old files).
_THREAD_KEYS = tuple(
    f.name for f in dataclasses.fields(ThreadRecord) if f.default is dataclasses.MISSING
)


class ProfileFormatError(ValueError):
    """A file is not a readable spprof profile; `path` names it, the message says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class _Bad(Exception):
    """Internal: a reason the payload is invalid; load() adds the file name."""


def load(path: PathLike) -> Profile:
    """Read a profile saved with format "spprof". OSError if it cannot be read at all."""
    name = os.fspath(path)
    with open(name, "rb") as f:
        data = f.read()
    return loads(data, name)


def loads(data: bytes, name: str = "<bytes>") -> Profile:
    """Decode the bytes of a .spprof file; `name` appears in error messages."""
    try:
        return _decode(_gunzip(data))
    except _Bad as exc:
        raise ProfileFormatError(name, str(exc)) from None


def _gunzip(data: bytes) -> bytes:
    if not data:
        raise _Bad("empty file, not an spprof profile")
    if data[:2] != b"\x1f\x8b":
        head = data[:64].lstrip()[:1]
        kind = {b"{": "JSON ", b"[": "JSON ", b"<": "HTML "}.get(head, "")
        raise _Bad(
            f"not an spprof profile (a {kind}file; only profiles saved with format "
            "'spprof' can be loaded)"
        )
    try:
        return gzip.decompress(data)
    except EOFError:
        raise _Bad("truncated spprof profile (the compressed data ends early)") from None
    except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise _Bad(f"corrupt spprof profile ({exc})") from None


def _sections(body: bytes) -> dict[bytes, bytes]:
    head = len(MAGIC) + 1
    if body[: len(MAGIC)] != MAGIC:
        raise _Bad("not an spprof profile (gzip file without the SPPROF header)")
    if len(body) < head:
        raise _Bad("truncated spprof profile (no version byte)")
    version = body[len(MAGIC)]
    if version > VERSION:
        raise _Bad(f"spprof file version {version} is newer than this spprof reads ({VERSION})")
    out: dict[bytes, bytes] = {}
    pos = head
    while True:
        if pos + _SECTION.size > len(body):
            raise _Bad("truncated spprof profile (section header cut short)")
        tag, size = _SECTION.unpack_from(body, pos)
        pos += _SECTION.size
        if pos + size > len(body):
            raise _Bad(f"truncated spprof profile (section {tag!r} cut short)")
        if tag == b"END!":
            return out
        out[tag] = body[pos : pos + size]  # unknown tags are kept and ignored: forward-compatible
        pos += size


def _int(v: Any, what: str, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise _Bad(f"bad {what}: {v!r}")
    return int(v)


def _decode(body: bytes) -> Profile:
    sec = _sections(body)
    for tag in (b"META", b"TIME", b"ROWS"):
        if tag not in sec:
            raise _Bad(f"missing section {tag.decode()}")
    try:
        meta = json.loads(sec[b"META"].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Bad(f"unreadable META section ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != "spprof":
        raise _Bad("META section is not an spprof header")
    try:
        return _build(meta, sec[b"TIME"], sec[b"ROWS"])
    except (KeyError, TypeError, IndexError, ValueError, struct.error) as exc:
        # A structurally valid file with wrong field types: still the file's fault.
        raise _Bad(f"inconsistent profile data ({type(exc).__name__}: {exc})") from None


def _build(meta: dict[str, Any], time_sec: bytes, rows_sec: bytes) -> Profile:
    # Version 1 has no folded rows: a row per sample.
    n = (
        _int(meta["row_count"], "row_count")
        if "row_count" in meta
        else _int(meta["sample_count"], "sample_count")
    )
    folds = _folds(meta.get("folds") or [], n)
    strings = meta["strings"]
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        raise _Bad("bad string table")
    frames = []
    for fr in meta["frames"]:
        name, qual, fname, line, first, native = fr
        frames.append(
            Frame(
                function_name=strings[_int(name, "string index")],
                qualname=strings[_int(qual, "string index")],
                filename=strings[_int(fname, "string index")],
                lineno=_int(line, "line number", -(1 << 31)),
                first_lineno=_int(first, "line number", -(1 << 31)),
                is_native=bool(native),
            )
        )
    stacks: list[tuple[int, ...]] = []
    prev: tuple[int, ...] = ()
    for entry in meta["stacks"]:
        common = _int(entry[0], "stack prefix")
        if common > len(prev):
            raise _Bad("bad stack prefix")
        ids = prev[:common] + tuple(_int(i, "frame id") for i in entry[1:])
        if any(i >= len(frames) for i in ids):
            raise _Bad("stack refers to a frame that does not exist")
        stacks.append(ids)
        prev = ids
    threads = []
    for t in meta["threads"]:
        if not isinstance(t, dict) or any(k not in t for k in _THREAD_KEYS):
            raise _Bad("bad thread table entry")
        threads.append(ThreadRecord.from_dict(t))
    for i, t in enumerate(threads):
        if t.serial != i:
            raise _Bad("thread table is not in serial order")

    stack_addresses = _stack_addresses(meta.get("addresses") or [], stacks)
    libraries = meta.get("native_libraries") or {}
    if not isinstance(libraries, dict) or not all(isinstance(k, str) for k in libraries):
        raise _Bad("bad native_libraries table")
    native_libraries = {k: _int(v, "load bias") for k, v in libraries.items()}

    rows = _rows(n, time_sec, rows_sec, _int(meta["start_ns"], "start_ns"))
    # Indices in the rows must point into the tables, or every reader would fail later.
    stack_ids = struct.unpack(f"<{n}I", field(rows, n, *STACK))
    if n and max(stack_ids) >= len(stacks):
        raise _Bad("a sample refers to a stack that does not exist")
    serials = {x & SERIAL_MASK for x in struct.unpack(f"<{n}I", field(rows, n, *THREAD_AND_FLAGS))}
    if serials and max(serials) >= len(threads):
        raise _Bad("a sample refers to a thread that does not exist")

    profile = Profile(
        interval_ms=float(meta["interval_ms"]),
        mode=str(meta["mode"]),
        duration_ns=_int(meta["duration_ns"], "duration_ns"),
        start_ns=_int(meta["start_ns"], "start_ns"),
        frame_table=frames,
        stacks=stacks,
        rows=rows,
        thread_table=threads,
        dropped_count=_int(meta["dropped_count"], "dropped_count"),
        stats=dict(meta.get("stats") or {}),
        metadata=dict(meta.get("metadata") or {}),
        folds=folds,
        stack_addresses=stack_addresses,
        native_libraries=native_libraries,
    )
    if profile.stats.get("written_without_gil"):
        # The exit-signal watcher's dump (session/exit_dump.h) holds the runner's frames the
        # CLI hides when it writes: hidden here, as every other profile has them hidden.
        _runner_frames.hide_spprof_frames(profile)
        # Nor were mypyc's C names read back (no Python there): from the modules on disk.
        frames = profile.frame_table
        profile.frame_table = _mypyc_names.rename_frames(
            frames, _mypyc_names.modules_on_disk(frames)
        )
        # Nor were the asyncio view and pure-Python gevent's root made (both read the stacks
        # only): made here. The waiting tasks' and greenlets' censuses are not in such a file.
        if profile.metadata.get("async_tasks"):
            profile.stats.update(_async_view.root_at_tasks(profile))
        if profile.metadata.get("greenlets"):
            profile.stats["greenlet_run_roots_dropped"] = _greenlet_view.drop_greenlet_run(profile)
    return profile


def _stack_addresses(
    entries: Any, stacks: list[tuple[int, ...]]
) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """[[stack id, address of each frame...], ...] as Profile.stack_addresses."""
    if not isinstance(entries, list):
        raise _Bad("bad addresses list")
    out: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for entry in entries:
        if not isinstance(entry, list) or not entry:
            raise _Bad("bad addresses entry")
        sid = _int(entry[0], "stack id")
        if sid >= len(stacks) or len(entry) - 1 != len(stacks[sid]):
            raise _Bad(f"addresses of stack {sid} do not match its frames")
        at = tuple(_int(a, "address") for a in entry[1:])
        if any(a >= 1 << 64 for a in at):
            raise _Bad(f"an address of stack {sid} is not a 64-bit one")
        out[sid] = (stacks[sid], at)
    return out


def _folds(flat: Any, n: int) -> dict[int, int]:
    """[row, samples, row, samples, ...] (rows ascending, each holding 2 or more) as a dict."""
    if not isinstance(flat, list) or len(flat) % 2:
        raise _Bad("bad folds list")
    folds: dict[int, int] = {}
    prev = -1
    for k in range(0, len(flat), 2):
        row, count = _int(flat[k], "folded row"), _int(flat[k + 1], "folded row's samples", 2)
        if row <= prev or row >= n:
            raise _Bad(f"folded row {row} is out of order or past the {n} rows")
        folds[row] = count
        prev = row
    return folds


def _rows(n: int, time_sec: bytes, rows_sec: bytes, start_ns: int) -> bytes:
    n_planes = len(ROW_PLANES)
    if len(rows_sec) != n * n_planes:
        raise _Bad(f"ROWS section holds {len(rows_sec)} bytes, expected {n * n_planes}")
    if len(time_sec) != 1 + 8 * n:
        raise _Bad(f"TIME section holds {len(time_sec)} bytes, expected {1 + 8 * n}")
    buf = bytearray(n * ROW_SIZE)
    for i, k in enumerate(ROW_PLANES):
        buf[k::ROW_SIZE] = rows_sec[i * n : (i + 1) * n]
    if n == 0:
        return bytes(buf)
    words = bytearray(8 * n)
    for k in range(8):
        words[k::8] = time_sec[1 + k * n : 1 + (k + 1) * n]
    values = struct.unpack(f"<{n}Q", words)
    kind = time_sec[0]
    if kind in (TIME_RESIDUAL, TIME_RESIDUAL_US):
        scale = 1000 if kind == TIME_RESIDUAL_US else 1
        weights = struct.unpack(f"<{n}Q", field(buf, n, *WEIGHT))
        tf = struct.unpack(f"<{n}I", field(buf, n, *THREAD_AND_FLAGS))
        last: dict[int, int] = {}
        ts: list[int] = []
        append = ts.append
        get = last.get
        # The hot loop of loading: zigzag decoding inlined ((z >> 1) ^ -(z & 1)).
        for z, w, s in zip(values, weights, tf):
            s &= SERIAL_MASK
            t = get(s, start_ns) + w + ((z >> 1) ^ -(z & 1)) * scale
            append(t)
            last[s] = t
        if min(ts) < 0 or max(ts) >= 1 << 64:
            raise _Bad("timestamp column decodes out of range")
        words = bytearray(struct.pack(f"<{n}Q", *ts))
    elif kind != TIME_RAW:
        raise _Bad(f"unknown timestamp encoding {kind}")
    for k in range(8):
        buf[TIMESTAMP[0] + k :: ROW_SIZE] = words[k::8]
    return bytes(buf)
