"""The lossless .spprof file: exact round trips, size on a long session, clear errors."""

from __future__ import annotations

import gzip
import time
from dataclasses import replace

import pytest

from conftest import on_one_version
from spprof import _rows as rowlayout
from spprof._load import ProfileFormatError, load, loads
from spprof.output import render, spprof_format
from test_formats_common import (
    assert_rows_match,
    real_profile,
    small_profile,
    synthetic_profile,
)


def assert_same(a, b) -> None:
    assert_rows_match(a.rows, b.rows)
    assert b.frame_table == a.frame_table
    assert b.stacks == a.stacks
    assert b.thread_table == a.thread_table
    assert (b.interval_ms, b.mode, b.duration_ns, b.start_ns) == (
        a.interval_ms,
        a.mode,
        a.duration_ns,
        a.start_ns,
    )
    assert b.dropped_count == a.dropped_count
    assert b.stats == a.stats
    assert b.metadata == a.metadata


def test_round_trip_keeps_every_sample_field(tmp_path):
    p = small_profile()
    path = tmp_path / "prog.spprof"
    p.save(path, "spprof")
    q = load(path)
    assert_same(p, q)
    # What a user reads: the worker's idle samples keep their thread, flags and frames.
    worker = [s for s in q.samples if s.thread_name == "worker"]
    assert len(worker) == 3
    assert all(s.idle and s.gil is False and not s.on_cpu for s in worker)
    assert [f.display_name for f in worker[0].frames] == ["Thread.run", "wait"]
    assert [replace(s, timestamp_ns=0) for s in q.samples] == [
        replace(s, timestamp_ns=0) for s in p.samples
    ]
    assert all(abs(a.timestamp_ns - b.timestamp_ns) <= 500 for a, b in zip(p.samples, q.samples))
    assert q.aggregate() == p.aggregate()


def test_round_trip_of_a_real_profile(tmp_path):
    p = real_profile(tmp_path)
    again = loads(render(p, "spprof"))
    assert_same(p, again)
    assert again.sample_count > 50
    top = again.aggregate()[0]
    assert top.function_name == "hot_function"
    names = {t.name for t in again.threads}
    assert {"MainThread", "warm-worker"} <= names


def test_edge_values_survive(tmp_path):
    # Unicode names, empty strings, a sample before start_ns, timestamps near 2**64,
    # huge weights and every flag bit.
    p = small_profile()
    from spprof import Frame

    p.frame_table[0] = Frame("<módulo> ☃", "", 0, is_native=True, qualname="", first_lineno=0)
    rows = [
        (p.start_ns - 5, 1, 0, 0, 0x1F),
        ((1 << 64) - 1, (1 << 63), 1, 1, 0),
        (0, 0, 2, 0, 0xFF),
    ]
    p.rows = b"".join(rowlayout.pack(*r) for r in rows)
    p.metadata["argv"] = ["a b", "ü", ""]
    q = loads(render(p, "spprof"))
    assert_same(p, q)


def test_empty_profile_round_trips():
    p = small_profile()
    p.rows = b""
    q = loads(render(p, "spprof"))
    assert q.sample_count == 0
    assert q.samples == []
    assert q.thread_table == p.thread_table


def test_output_is_deterministic():
    assert render(small_profile(), "spprof") == render(small_profile(), "spprof")


@pytest.mark.slow
@on_one_version("43 s of pure-Python encoding, the same on every version")
def test_ten_minutes_at_1khz_on_8_threads_stays_small(capsys):
    p = synthetic_profile(seconds=600, threads=8, interval_ms=1.0)
    assert p.sample_count > 4_600_000
    t0 = time.perf_counter()
    data = render(p, "spprof")
    t1 = time.perf_counter()
    q = loads(data)
    t2 = time.perf_counter()
    assert_rows_match(p.rows, q.rows)
    per_sample = len(data) / p.sample_count
    with capsys.disabled():
        print(
            f"\n[spprof size] {p.sample_count} samples -> {len(data)} bytes "
            f"({per_sample:.2f} B/sample), save {t1 - t0:.1f}s, load {t2 - t1:.1f}s"
        )
    # Microsecond timestamp residuals carry ~0.7 bytes a sample of jitter; everything else
    # (weights, stacks, threads, flags) must cost almost nothing on top (measured 0.95 B).
    assert per_sample < 1.2
    assert len(data) < 5_500_000


@pytest.mark.parametrize(
    ("damage", "expect"),
    [
        (lambda d: d[: len(d) // 2], "truncated"),
        (lambda d: d[:-3], "corrupt|truncated"),
        (lambda d: d[:30] + bytes(b ^ 0x5A for b in d[30:60]) + d[60:], "corrupt|truncated"),
        (lambda d: b"", "empty"),
        (lambda d: b'{"$schema": "https://www.speedscope.app/..."}', "JSON"),
        (lambda d: b"<!DOCTYPE html>", "HTML"),
        (lambda d: gzip.compress(b"hello world"), "SPPROF header"),
        (lambda d: gzip.compress(gzip.decompress(d)[:-20]), "truncated"),
    ],
)
def test_damaged_file_gives_one_clear_error(tmp_path, damage, expect):
    import re

    good = render(small_profile(), "spprof")
    path = tmp_path / "broken.spprof"
    path.write_bytes(damage(good))
    with pytest.raises(ProfileFormatError) as info:
        load(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert str(path) in str(err)
    assert re.search(expect, str(err)), str(err)
    assert err.__cause__ is None and err.__suppress_context__  # no internals chained


def test_newer_version_is_refused_by_name(tmp_path):
    body = bytearray(gzip.decompress(render(small_profile(), "spprof")))
    body[len(spprof_format.MAGIC)] = spprof_format.VERSION + 1
    path = tmp_path / "future.spprof"
    path.write_bytes(gzip.compress(bytes(body)))
    with pytest.raises(ProfileFormatError, match="newer"):
        load(path)


def test_out_of_range_index_is_a_format_error():
    # A well-formed file whose sample points at a stack that does not exist.
    p = small_profile()
    p.rows = rowlayout.pack(p.start_ns + 1, 1, 99, 0)
    with pytest.raises(ProfileFormatError, match="stack that does not exist"):
        loads(render(p, "spprof"), "x.spprof")


def test_missing_file_is_an_oserror_not_a_format_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.spprof")
