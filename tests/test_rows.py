"""The sample row layout Python reads (spprof/_rows.py) is the one the extension writes."""

from __future__ import annotations

import struct

import spprof
from spprof import _ext, _rows
from workloads import spin


def test_row_format_matches_the_extension():
    assert _ext.SAMPLE_ROW_FORMAT == _rows.ROW_FORMAT
    assert struct.calcsize(_ext.SAMPLE_ROW_FORMAT) == _rows.ROW_SIZE


def test_serial_bits_match_the_extension():
    assert _ext.SAMPLE_SERIAL_BITS == _rows.SERIAL_BITS


def test_flag_bits_match_the_extension():
    assert _ext.SAMPLE_FLAGS == _rows.FLAGS
    assert all(bit < 1 << (32 - _rows.SERIAL_BITS) for bit in _rows.FLAGS.values())


def test_field_offsets_follow_the_format():
    fields = (_rows.TIMESTAMP, _rows.WEIGHT, _rows.STACK, _rows.THREAD_AND_FLAGS)
    codes = _rows.ROW_FORMAT[1:]
    offset = 0
    for (at, width), code in zip(fields, codes):
        assert (at, width) == (offset, struct.calcsize("<" + code))
        offset += width
    assert offset == _rows.ROW_SIZE


def test_a_stopped_profile_decodes_with_the_layout():
    with spprof.Profiler(interval_ms=1) as p:
        spin(0.2)
    profile = p.profile
    assert profile is not None and profile.sample_count > 0
    assert len(profile.rows) == profile.row_count * _rows.ROW_SIZE
    known = sum(_rows.FLAGS.values()) & ~_rows.FLAG_STACK_ONLY  # stack-only records never export
    for _, _, stack, serial, flags in profile.iter_rows():
        assert stack < len(profile.stacks)
        assert serial < len(profile.thread_table)
        assert flags & ~known == 0
