"""The packed sample row: the one description of the bytes in Profile.rows.

A row is what the native core's SampleRow (stack_store.h) holds, exported as-is by
_ext.stop(): timestamp_ns, weight_ns, stack id, and thread serial | flags << 24. The flags are
sample_record.h's SampleFlags. _ext exports the same layout (SAMPLE_ROW_FORMAT,
SAMPLE_SERIAL_BITS, SAMPLE_FLAGS) and tests/test_rows.py fails if the two disagree.
Pure Python: the writers and the loader use it without importing _ext.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

ROW_FORMAT = "<QQII"
ROW = struct.Struct(ROW_FORMAT)
ROW_SIZE = ROW.size

# Byte offset and width of each field in a row.
TIMESTAMP = (0, 8)
WEIGHT = (8, 8)
STACK = (16, 4)
THREAD_AND_FLAGS = (20, 4)

# Profile reads rows as uint32 words at C speed: the stack id and the serial|flags word.
ROW_WORDS = ROW_SIZE // 4
STACK_WORD = STACK[0] // 4
THREAD_AND_FLAGS_WORD = THREAD_AND_FLAGS[0] // 4

SERIAL_BITS = 24
SERIAL_MASK = (1 << SERIAL_BITS) - 1

# SampleFlags, in the high 8 bits of the serial|flags word.
FLAG_TRUNCATED = 1 << 0  # root side lost: too deep, or a torn frame chain
FLAG_ON_CPU = 1 << 1  # the thread used CPU since its previous sample
FLAG_HAS_GIL = 1 << 2  # held the GIL (meaningful with FLAG_GIL_KNOWN)
FLAG_IDLE = 1 << 3  # wall mode: blocked (off CPU, not runnable)
FLAG_GIL_KNOWN = 1 << 4
FLAG_STACK_ONLY = 1 << 5  # native-internal: a stack recorded at registration, never exported
FLAG_RUNNABLE = 1 << 6  # wall mode: waited for a CPU on this stack (preempted)
# CPU-timer expiries a thread's last tick-less stretch owed it, counted as it ended; on its last
# stack (last sample's, else where it started), not on the line it ran
FLAG_THREAD_END = 1 << 7

# By the names _ext.SAMPLE_FLAGS uses.
FLAGS = {
    "truncated": FLAG_TRUNCATED,
    "on_cpu": FLAG_ON_CPU,
    "has_gil": FLAG_HAS_GIL,
    "idle": FLAG_IDLE,
    "gil_known": FLAG_GIL_KNOWN,
    "stack_only": FLAG_STACK_ONLY,
    "runnable": FLAG_RUNNABLE,
    "thread_end": FLAG_THREAD_END,
}


def pieces(timestamp_ns: int, weight_ns: int, n: int) -> Iterator[tuple[int, int]]:
    """(timestamp_ns, weight_ns) of each of the n samples a folded row holds: a blocked
    thread's wait kept as one row (stack_store.h, fold_into) spans [timestamp - weight,
    timestamp]; its samples cut it evenly, the last taking the remainder and the row's time.
    The same cut as StackStore::piece, so a window and the whole profile agree."""
    start = timestamp_ns - weight_ns if timestamp_ns > weight_ns else 0
    each = weight_ns // n
    for k in range(1, n):
        yield start + each * k, each
    yield timestamp_ns, weight_ns - each * (n - 1)


def pack(timestamp_ns: int, weight_ns: int, stack: int, serial: int, flags: int = 0) -> bytes:
    """One row (tests and tools build rows with it)."""
    return ROW.pack(timestamp_ns, weight_ns, stack, serial | flags << SERIAL_BITS)
