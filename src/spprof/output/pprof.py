"""pprof's profile.proto, gzipped: read by `go tool pprof`, Pyroscope, Grafana and others.

Encoded by hand (a protobuf message here is a handful of varint and length-delimited fields),
so spprof keeps zero runtime dependencies. The field numbers are those of
github.com/google/pprof/proto/profile.proto.

What goes in:
- two sample types: `samples/count` and `cpu/nanoseconds` (`wall/nanoseconds` for a wall
  clock session); the time is the default, and the period is the sampling interval;
- one Function per (qualified name, file, first line) with its start line, and one Location
  per (function, line): the line a frame was executing; with --native, a native frame's
  Location is per sampled address (its `address`, the pc of a running frame, a caller's
  return address minus one), in a Mapping per library (start: its load bias, so an address
  minus the start is the address in the file; `has_functions` set: pprof does not look the
  names up again), so `-addresses`, `-disasm` and `list` work inside a function;
- one Sample per (thread, stack), leaf first as pprof wants, labelled `thread_name` (string)
  and `thread_id` (the OS thread id, number), and with --async `task` (the innermost task's
  coroutine, when the stack is a task's), and with --greenlets `greenlet` (a waiting
  greenlet's function, on its thread's greenlet track);
- comments with the spprof and Python versions and the command line, and (the endpoint's
  window over a --subprocesses family) each process that could not answer, with why.
"""

from __future__ import annotations

import gzip
from typing import TYPE_CHECKING

from .._async_view import innermost_task
from .._greenlet_census import GREENLET_PREFIX

if TYPE_CHECKING:
    from .._model import ProfileData

# profile.proto field numbers
P_SAMPLE_TYPE, P_SAMPLE, P_MAPPING, P_LOCATION, P_FUNCTION, P_STRING_TABLE = 1, 2, 3, 4, 5, 6
P_DURATION, P_PERIOD_TYPE, P_PERIOD, P_COMMENT, P_DEFAULT_SAMPLE_TYPE = 10, 11, 12, 13, 14
VT_TYPE, VT_UNIT = 1, 2
S_LOCATION_ID, S_VALUE, S_LABEL = 1, 2, 3
LABEL_KEY, LABEL_STR, LABEL_NUM = 1, 2, 3
LOC_ID, LOC_MAPPING_ID, LOC_ADDRESS, LOC_LINE = 1, 2, 3, 4
MAP_ID, MAP_START, MAP_LIMIT, MAP_FILE_OFFSET, MAP_FILENAME, MAP_HAS_FUNCTIONS = 1, 2, 3, 4, 5, 7
LINE_FUNCTION_ID, LINE_LINE = 1, 2
FN_ID, FN_NAME, FN_SYSTEM_NAME, FN_FILENAME, FN_START_LINE = 1, 2, 3, 4, 5

WIRE_VARINT, WIRE_LEN = 0, 2


def varint(v: int) -> bytes:
    """Base-128 varint; negative int64 values take ten bytes, as protobuf encodes them."""
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field_varint(num: int, v: int) -> bytes:
    # proto3 scalars equal to zero are left out, like every protobuf encoder does.
    return varint(num << 3 | WIRE_VARINT) + varint(v) if v else b""


def field_bytes(num: int, payload: bytes) -> bytes:
    return varint(num << 3 | WIRE_LEN) + varint(len(payload)) + payload


def field_packed(num: int, values: list[int]) -> bytes:
    return field_bytes(num, b"".join(varint(v) for v in values)) if values else b""


class _Strings:
    """The string table: index 0 is the empty string, as profile.proto requires."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}

    def __call__(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.index)
        return i

    def encode(self) -> bytes:
        return b"".join(field_bytes(P_STRING_TABLE, s.encode("utf-8")) for s in self.index)


def _value_type(strings: _Strings, type_: str, unit: str) -> bytes:
    return field_varint(VT_TYPE, strings(type_)) + field_varint(VT_UNIT, strings(unit))


def render(profile: ProfileData) -> bytes:
    strings = _Strings()
    time_type = "wall" if profile.mode == "wall" else "cpu"
    out: list[bytes] = [
        field_bytes(P_SAMPLE_TYPE, _value_type(strings, "samples", "count")),
        field_bytes(P_SAMPLE_TYPE, _value_type(strings, time_type, "nanoseconds")),
    ]

    functions: dict[tuple[str, str, int], int] = {}  # key -> function id (1-based)
    function_msgs: list[bytes] = []
    locations: dict[tuple[int, int], int] = {}  # (frame index, address) -> location id (1-based)
    location_msgs: list[bytes] = []
    # (function id, line, address) -> location id; address 0: a Python frame, or no address kept
    by_line: dict[tuple[int, int, int], int] = {}
    libraries = profile.native_libraries
    mappings: dict[str, list[int]] = {}  # library -> [mapping id, highest address in it]

    def location(fid: int, address: int = 0) -> int:
        loc = locations.get((fid, address))
        if loc is not None:
            return loc
        f = profile.frame_table[fid]
        key = (f.display_name, f.filename, f.first_lineno)
        fn = functions.get(key)
        if fn is None:
            fn = functions[key] = len(functions) + 1
            # system_name only where it differs: pprof "demangles" a function whose name
            # equals its system name and strips <...> as C++ template arguments, which
            # turned "<module>" into an empty name.
            system = f.function_name if f.function_name != f.display_name else ""
            function_msgs.append(
                field_bytes(
                    P_FUNCTION,
                    field_varint(FN_ID, fn)
                    + field_varint(FN_NAME, strings(f.display_name))
                    + field_varint(FN_SYSTEM_NAME, strings(system) if system else 0)
                    + field_varint(FN_FILENAME, strings(f.filename))
                    + field_varint(FN_START_LINE, max(0, f.first_lineno)),
                )
            )
        line = max(0, f.lineno)
        loc = by_line.get((fn, line, address))
        if loc is None:
            loc = by_line[(fn, line, address)] = len(by_line) + 1
            line_msg = field_varint(LINE_FUNCTION_ID, fn) + field_varint(LINE_LINE, line)
            mapping = 0
            if address and f.filename in libraries:
                m = mappings.setdefault(f.filename, [len(mappings) + 1, address])
                m[1] = max(m[1], address)
                mapping = m[0]
            location_msgs.append(
                field_bytes(
                    P_LOCATION,
                    field_varint(LOC_ID, loc)
                    + field_varint(LOC_MAPPING_ID, mapping)
                    + field_varint(LOC_ADDRESS, address)
                    + field_bytes(LOC_LINE, line_msg),
                )
            )
        locations[(fid, address)] = loc
        return loc

    threads = profile.thread_table
    key_name, key_id = strings("thread_name"), strings("thread_id")
    labels: dict[int, bytes] = {}
    # A window's labels (Profiler(labels=...)): on every sample, after the thread's.
    window_labels = b"".join(
        field_bytes(
            S_LABEL,
            field_varint(LABEL_KEY, strings(str(k))) + field_varint(LABEL_STR, strings(str(v))),
        )
        for k, v in dict(profile.metadata.get("labels") or {}).items()
    )
    stack_locs: dict[int, list[int]] = {}
    # --async: the innermost task of a stack (its `<task> COROUTINE` frame), as a `task`
    # label, so that pprof's tagfocus/tagshow and Pyroscope's label filters select a task.
    table = profile.frame_table
    task_of: dict[int, bytes] = {}
    key_task = strings("task")
    for (serial, stack), (count, weight) in profile.stack_weights().items():
        locs = stack_locs.get(stack)
        if locs is None:
            # pprof lists a sample's locations leaf first; spprof's stacks are root first.
            ids = profile.stacks[stack]
            at = profile.frame_addresses(stack)
            locs = stack_locs[stack] = [
                location(fid, a) for fid, a in zip(reversed(ids), reversed(at))
            ]
            found = innermost_task(table, profile.stacks[stack])
            task = found[1] if found is not None else None
            if task is not None:
                named = field_varint(LABEL_KEY, key_task) + field_varint(LABEL_STR, strings(task))
                task_of[stack] = field_bytes(S_LABEL, named)
            elif profile.stacks[stack]:
                # --greenlets: a waiting greenlet's stack starts at `<greenlet> FUNCTION`.
                head = table[profile.stacks[stack][0]]
                if not head.filename and head.function_name.startswith(GREENLET_PREFIX):
                    function = head.function_name[len(GREENLET_PREFIX) :]
                    named = field_varint(LABEL_KEY, strings("greenlet"))
                    named += field_varint(LABEL_STR, strings(function))
                    task_of[stack] = field_bytes(S_LABEL, named)
        label = labels.get(serial)
        if label is None:
            t = threads[serial]
            name = field_varint(LABEL_KEY, key_name) + field_varint(LABEL_STR, strings(t.label))
            tid = field_varint(LABEL_KEY, key_id) + field_varint(LABEL_NUM, t.native_id)
            label = field_bytes(S_LABEL, name) + field_bytes(S_LABEL, tid)
            if t.pid:  # --subprocesses: which process
                pid = field_varint(LABEL_KEY, strings("pid")) + field_varint(LABEL_NUM, t.pid)
                label += field_bytes(S_LABEL, pid)
            label = labels[serial] = label + window_labels
        out.append(
            field_bytes(
                P_SAMPLE,
                field_packed(S_LOCATION_ID, locs)
                + field_packed(S_VALUE, [count, weight])
                + label
                + task_of.get(stack, b""),
            )
        )

    for path, (mid, highest) in mappings.items():
        start = libraries[path]
        out.append(
            field_bytes(
                P_MAPPING,
                field_varint(MAP_ID, mid)
                + field_varint(MAP_START, start)
                + field_varint(MAP_LIMIT, max(highest + 1, start + 1))
                + field_varint(MAP_FILE_OFFSET, 0)
                + field_varint(MAP_FILENAME, strings(path))
                + field_varint(MAP_HAS_FUNCTIONS, 1),
            )
        )
    out.extend(location_msgs)
    out.extend(function_msgs)
    meta = profile.metadata
    where = f"{meta.get('platform', '')} {meta.get('machine', '')}".strip()
    comments = [
        f"spprof {meta.get('spprof_version', '')}".strip(),
        f"python {meta.get('python', '')} on {where}".strip(),
        f"mode {profile.mode}, interval {profile.interval_ms:g} ms, "
        f"{profile.dropped_count} samples dropped",
    ]
    if meta.get("argv"):
        comments.append("argv " + " ".join(str(a) for a in meta["argv"]))
    # --subprocesses, the endpoint's window: a process of the family that could not answer.
    for pid, why in dict(meta.get("window_missing") or {}).items():
        comments.append(f"process {pid} is not in this window: {why}")
    tail = [
        field_varint(P_DURATION, profile.duration_ns),
        field_bytes(P_PERIOD_TYPE, _value_type(strings, time_type, "nanoseconds")),
        field_varint(P_PERIOD, round(profile.interval_ms * 1_000_000)),
        *(field_varint(P_COMMENT, strings(c)) for c in comments),
        field_varint(P_DEFAULT_SAMPLE_TYPE, strings(time_type)),
    ]
    # The string table goes last so that every string above is already interned.
    body = b"".join(out) + b"".join(tail) + strings.encode()
    return gzip.compress(body, mtime=0)
