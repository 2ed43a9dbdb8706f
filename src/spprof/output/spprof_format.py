"""The lossless spprof file: every sample, stack, frame and thread of a Profile, gzip'd.

Layout (docs/formats.md has the full description): a gzip stream whose content is

    b"SPPROF\\x00" + version byte, then sections: 4-byte ASCII tag, u64 LE length, payload
      META  UTF-8 JSON: session fields, thread table, string table, frames, stacks, and
            (version 2) row_count and folds: the rows holding more than one sample;
            (--native) addresses and native_libraries: pprof's per-address locations
      TIME  1 kind byte + timestamp column (8 byte planes of per-thread residuals)
      ROWS  16 byte planes: weight_ns (8), stack id (4), thread serial | flags << 24 (4)
      END!  empty

Why columnar byte planes: the sample rows are 24-byte records whose high bytes are almost
always zero or repeat; writing byte k of every row together gives gzip long runs, and
splitting and merging planes is a C-speed slice (`rows[k::24]`), so a 5-million-sample
profile saves and loads in a few seconds of pure Python. Timestamps are the only column with
real entropy; each is stored as its distance from the prediction "previous sample of the same
thread + this sample's weight", in whole microseconds, zigzag-encoded, which leaves mostly
timer jitter. Timestamps are therefore kept to +-500 ns; everything else is exact.

`render` lives here; `spprof._load.load` reads the file back.
"""

from __future__ import annotations

import gzip
import json
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

# The file stores the rows' bytes as planes: a change to the row layout is a new VERSION.
from .._rows import ROW_SIZE, SERIAL_MASK, THREAD_AND_FLAGS, TIMESTAMP, WEIGHT

if TYPE_CHECKING:
    from .._model import ProfileData

MAGIC = b"SPPROF\x00"
# 2: META has row_count and folds (a blocked thread's wait kept as one row holding many
# samples, wall mode). A profile without folded rows is still written as version 1, which
# every spprof reads; a reader of version 1 only would count a folded wait as one sample.
VERSION = 2
ROW_PLANES = range(WEIGHT[0], ROW_SIZE)  # every row byte except the timestamp's
U64 = 1 << 64

# TIME section kinds
TIME_RESIDUAL = 0  # zigzag(ts - (previous ts of the thread, else start_ns) - weight)
# The same residual in whole microseconds, predicted from the *decoded* previous timestamp so
# rounding never accumulates: every timestamp is within 500 ns of the recorded one. The
# default: the capture's own clock jitter is microseconds, and nanosecond residuals are what
# made a 10-minute, 1 kHz, 8-thread profile 10 MB instead of a few.
TIME_RESIDUAL_US = 2
TIME_RAW = 1  # plain timestamps: only when a residual does not fit 64 bits (absurd clocks)

_SECTION = struct.Struct("<4sQ")


def planes(data: bytes, width: int, picks: range) -> list[bytes]:
    """Byte k of every `width`-byte record, for each k in `picks`."""
    return [data[k::width] for k in picks]


def _section(tag: bytes, payload: bytes) -> bytes:
    return _SECTION.pack(tag, len(payload)) + payload


def field(rows: Union[bytes, bytearray], n: int, offset: int, width: int) -> bytes:
    """The `width`-byte field at `offset` of each of `n` rows, as consecutive words.

    Built by interleaving the field's byte planes again: C-speed slicing, no Python loop.
    """
    out = bytearray(n * width)
    for k in range(width):
        out[k::width] = rows[offset + k :: ROW_SIZE]
    return bytes(out)


def _columns(profile: ProfileData) -> tuple[tuple[int, ...], tuple[int, ...], list[int]]:
    """(timestamps, weights, thread serials) of every row, in row order."""
    n = profile.row_count
    rows = profile.rows
    ts = struct.unpack(f"<{n}Q", field(rows, n, *TIMESTAMP))
    weights = struct.unpack(f"<{n}Q", field(rows, n, *WEIGHT))
    tf = struct.unpack(f"<{n}I", field(rows, n, *THREAD_AND_FLAGS))
    return ts, weights, [x & SERIAL_MASK for x in tf]


def _time_section(profile: ProfileData) -> bytes:
    n = profile.row_count
    if n == 0:
        return bytes([TIME_RESIDUAL])
    ts, weights, serials = _columns(profile)
    last: dict[int, int] = {}
    get = last.get
    start = profile.start_ns
    res: list[int] = []
    append = res.append
    for t, w, s in zip(ts, weights, serials):
        predicted = get(s, start) + w
        r = (t - predicted + 500) // 1000
        append(r << 1 if r >= 0 else (-r << 1) - 1)  # zigzag, inlined: this loop is the cost
        last[s] = predicted + r * 1000
    values: Sequence[int]
    if max(res) < U64 and min(last.values()) >= 0 and max(last.values()) < U64:
        kind, values = TIME_RESIDUAL_US, res
    else:
        kind, values = TIME_RAW, ts
    words = struct.pack(f"<{n}Q", *values)
    return bytes([kind]) + b"".join(planes(words, 8, range(8)))


def _meta(profile: ProfileData) -> dict[str, Any]:
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        i = strings.get(s)
        if i is None:
            i = strings[s] = len(strings)
        return i

    frames = [
        [
            sid(f.function_name),
            sid(f.qualname),
            sid(f.filename),
            f.lineno,
            f.first_lineno,
            1 if f.is_native else 0,
        ]
        for f in profile.frame_table
    ]
    # Stacks share long prefixes with the stack before them (they are interned in order of
    # first appearance): keep [shared prefix length, new frame ids...].
    stacks: list[list[int]] = []
    prev: tuple[int, ...] = ()
    for ids in profile.stacks:
        common = 0
        limit = min(len(prev), len(ids))
        while common < limit and prev[common] == ids[common]:
            common += 1
        stacks.append([common, *ids[common:]])
        prev = tuple(ids)
    folds: dict[str, Any] = {}
    if profile.folds:  # [row, samples, row, samples, ...], by row
        folds = {
            "row_count": profile.row_count,
            "folds": [x for i in sorted(profile.folds) for x in (i, profile.folds[i])],
        }
    # --native: [stack id, address of each of its frames (0: none)] for the stacks with one,
    # and each library's load bias (pprof's locations and mappings). Optional keys, so a file
    # without them is byte for byte what it was, and an older reader skips them.
    native: dict[str, Any] = {}
    addresses = [[sid, *at] for sid, at in _stack_addresses(profile)]
    if addresses:
        native = {"addresses": addresses, "native_libraries": profile.native_libraries}
    return {
        "format": "spprof",
        "version": _version(profile),
        "sample_count": profile.sample_count,
        **folds,
        "interval_ms": profile.interval_ms,
        "mode": profile.mode,
        "duration_ns": profile.duration_ns,
        "start_ns": profile.start_ns,
        "dropped_count": profile.dropped_count,
        "stats": profile.stats,
        "metadata": profile.metadata,
        "threads": [t.as_dict() for t in profile.thread_table],
        "strings": list(strings),
        "frames": frames,
        "stacks": stacks,
        **native,
    }


def _stack_addresses(profile: ProfileData) -> list[tuple[int, tuple[int, ...]]]:
    """(stack id, its frames' addresses) of each stack that has a native frame's address,
    aligned with the stack as it is now (a view may have cut it)."""
    out = []
    for sid in sorted(profile.stack_addresses):
        at = profile.frame_addresses(sid)
        if any(at):
            out.append((sid, at))
    return out


def _version(profile: ProfileData) -> int:
    return VERSION if profile.folds else 1


def render(profile: ProfileData, compresslevel: int = 6) -> bytes:
    if len(profile.rows) % ROW_SIZE:
        raise ValueError(f"profile rows are not a whole number of {ROW_SIZE}-byte samples")
    # default=str: a metadata value JSON cannot hold is kept as its text, never a failed save.
    meta = json.dumps(_meta(profile), separators=(",", ":"), default=str).encode("utf-8")
    body = b"".join(
        [
            MAGIC,
            bytes([_version(profile)]),
            _section(b"META", meta),
            _section(b"TIME", _time_section(profile)),
            _section(b"ROWS", b"".join(planes(profile.rows, ROW_SIZE, ROW_PLANES))),
            _section(b"END!", b""),
        ]
    )
    # mtime=0: the same profile always gives the same bytes.
    return gzip.compress(body, compresslevel=compresslevel, mtime=0)
