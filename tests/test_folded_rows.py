"""A blocked thread's wait kept as one row holding many samples (wall mode's folded rows).

stop() exports the rows as the store holds them plus `folds` (row index -> samples held), so
a wait of thousands of censuses is one row in the profile too. Every figure and every writer
must give what the same samples one row each gave: these tests build both forms of one
profile and compare them. The end-to-end memory case is tests/test_wall_memory.py.
"""

from __future__ import annotations

import gzip
import json

import pytest

from spprof import _rows as rowlayout
from spprof._exit_calls import join
from spprof._load import ProfileFormatError, loads
from spprof._process_merge import merge
from spprof.output import FORMATS, render, spprof_format
from test_formats_common import MS, assert_rows_match, small_profile

# small_profile()'s worker: three idle samples of 1 ms, back to back, rows 4-6.
WORKER_ROWS = (4, 5, 6)


def folded_profile():
    """small_profile() with the worker's wait as one row holding its three samples."""
    p = small_profile()
    rows = list(rowlayout.ROW.iter_unpack(p.rows))
    first, last = rows[WORKER_ROWS[0]], rows[WORKER_ROWS[-1]]
    # The whole wait: its last sample's time, the three samples' weight.
    wait = (last[0], first[1] + rows[5][1] + last[1], first[2], first[3])
    kept = [*rows[: WORKER_ROWS[0]], wait, *rows[WORKER_ROWS[-1] + 1 :]]
    p.rows = b"".join(rowlayout.ROW.pack(*r) for r in kept)
    p.folds = {WORKER_ROWS[0]: 3}
    return p


def test_pieces_cut_the_span_evenly_and_keep_every_nanosecond() -> None:
    got = list(rowlayout.pieces(1_000_010, 10, 3))
    assert got == [(1_000_003, 3), (1_000_006, 3), (1_000_010, 4)]
    assert list(rowlayout.pieces(50, 7, 1)) == [(50, 7)]


def test_a_folded_row_reads_as_the_samples_it_holds() -> None:
    expanded, folded = small_profile(), folded_profile()
    assert folded.row_count == expanded.row_count - 2
    assert folded.sample_count == expanded.sample_count == 13
    assert list(folded.iter_rows()) == list(expanded.iter_rows())
    assert folded.samples == expanded.samples
    worker = [s for s in folded.samples if s.thread_name == "worker"]
    assert [s.weight_ns for s in worker] == [MS, MS, MS]
    assert all(s.idle for s in worker)


def test_every_figure_counts_a_folded_row_as_its_samples() -> None:
    expanded, folded = small_profile(), folded_profile()
    assert folded.threads == expanded.threads
    assert [t.samples for t in folded.threads] == [10, 3]
    assert folded.aggregate() == expanded.aggregate()
    assert folded.stack_weights() == expanded.stack_weights()
    assert folded.total_weight_ns == expanded.total_weight_ns
    busy_f, busy_e = folded.filter(idle=False), expanded.filter(idle=False)
    assert busy_f.sample_count == busy_e.sample_count == 10
    assert busy_f.folds == {}
    assert busy_f.metadata["filtered_out"] == busy_e.metadata["filtered_out"] == 3
    assert busy_f.left_out_count == busy_e.left_out_count == 3
    assert busy_f.threads == busy_e.threads


# Writers whose bytes are the same either way; speedscope and gecko list samples, and write a
# folded wait as one sample of its weight (below).
SAME_BYTES = sorted(f for f in FORMATS if f not in ("spprof", "speedscope", "gecko"))


@pytest.mark.parametrize("fmt", SAME_BYTES)
def test_every_writer_writes_what_the_separate_rows_gave(fmt: str) -> None:
    assert render(folded_profile(), fmt) == render(small_profile(), fmt)


def _runs(samples: list, weights: list) -> list:
    """Consecutive samples on one stack as one (stack, weight): what speedscope draws."""
    out: list = []
    for s, w in zip(samples, weights):
        if out and out[-1][0] == s:
            out[-1][1] += w
        else:
            out.append([s, w])
    return out


def test_speedscope_draws_a_folded_wait_as_one_sample_of_its_weight() -> None:
    folded = json.loads(render(folded_profile(), "speedscope"))
    expanded = json.loads(render(small_profile(), "speedscope"))
    assert folded["shared"] == expanded["shared"]
    assert len(folded["profiles"]) == len(expanded["profiles"])
    for f, e in zip(folded["profiles"], expanded["profiles"]):
        assert _runs(f["samples"], f["weights"]) == _runs(e["samples"], e["weights"])
        assert (f["startValue"], f["endValue"]) == (e["startValue"], e["endValue"])
    worker = folded["profiles"][1]
    assert worker["name"].startswith("worker")
    assert worker["weights"] == [3 * MS]


def test_gecko_gives_a_folded_wait_one_sample_from_its_first_samples_time() -> None:
    folded = json.loads(render(folded_profile(), "gecko"))
    expanded = json.loads(render(small_profile(), "gecko"))
    assert len(folded["threads"]) == len(expanded["threads"])
    for f, e in zip(folded["threads"], expanded["threads"]):
        assert f["markers"] == e["markers"]  # the idle run, its span and sample count
        fs, es = f["samples"], e["samples"]
        totals_f: dict = {}
        totals_e: dict = {}
        for table, totals in ((fs, totals_f), (es, totals_e)):
            for stack, w in zip(table["stack"], table["weight"]):
                totals[stack] = totals.get(stack, 0) + w
        assert totals_f == pytest.approx(totals_e)
        if f["name"].startswith("worker"):
            assert fs["weight"] == [pytest.approx(3.0)]
            assert fs["time"] == [es["time"][0]]  # drawn from its first sample on


def test_dropping_rows_renumbers_the_folds() -> None:
    p = folded_profile()
    assert p.drop_rows([0, 1]) == 2  # two rows before the fold
    assert p.folds == {2: 3}
    assert p.drop_rows([2]) == 3  # the fold itself: the samples it held
    assert p.folds == {}
    assert p.sample_count == 13 - 2 - 3


def test_the_spprof_file_keeps_folds_and_old_files_stay_version_1() -> None:
    folded = folded_profile()
    data = render(folded, "spprof")
    assert gzip.decompress(data)[len(spprof_format.MAGIC)] == 2
    back = loads(data)
    assert back.folds == folded.folds
    assert_rows_match(back.rows, folded.rows)  # timestamps to +-500 ns, as every file
    assert back.sample_count == 13
    assert back.threads == small_profile().threads
    # Nothing folded: the version every earlier spprof reads.
    assert gzip.decompress(render(small_profile(), "spprof"))[len(spprof_format.MAGIC)] == 1


def test_a_fold_past_the_rows_is_a_format_error() -> None:
    folded = folded_profile()
    folded.folds = {folded.row_count: 3}
    with pytest.raises(ProfileFormatError, match="past the"):
        loads(render(folded, "spprof"), "x.spprof")


def test_merging_processes_and_joining_parts_keep_the_folds() -> None:
    a, b = folded_profile(), folded_profile()
    b.metadata = {**b.metadata, "pid": 4243}
    merged = merge(a, [b])
    assert merged.sample_count == 26
    assert sorted(merged.folds.values()) == [3, 3]
    assert sum(t.samples for t in merged.threads if t.name == "worker") == 6
    joined = join(folded_profile(), folded_profile())
    assert joined.folds == {4: 3, 4 + a.row_count: 3}
    assert joined.sample_count == 26
