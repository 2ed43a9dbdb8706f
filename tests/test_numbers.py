"""One set of numbers (issue 23, section 6): the summary of a recording, `spprof report` of the
file it saved and the formats converted from that file agree on samples, CPU, GIL and idle.

Seen at 8b4dbaf, wall mode: the header counted the samples left after idle ones were left
out (170) while the thread table counted all (256), and the saved file's report showed
IDLE% 0.0 where the recording said 35.2 %: the thread figures were computed from whichever
rows a profile still held. Now ProfileData.thread_tallies computes them once, filter()
keeps what it leaves out in them, and the file carries it.
"""

from __future__ import annotations

import json
import re

import pytest

import spprof
from conftest import SCRIPTS, run_python
from spprof import output
from spprof.output import html as html_output

ROW = re.compile(r"^  (\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)s\s+([\d.]+)%\s+(\S+)\s+([\d.]+)%$")


def _table(text: str) -> dict[str, tuple[str, ...]]:
    """Thread rows of a summary: name -> (tid, samples, cpu, cpu%, gil%, idle%)."""
    return {m.group(1): m.groups()[1:] for m in map(ROW.match, text.splitlines()) if m}


@pytest.mark.parametrize(
    "mode,flags",
    [("cpu", []), ("wall", []), ("wall", ["--idle"]), ("wall", ["--gil"])],
    ids=["cpu", "wall", "wall-idle", "wall-gil"],
)
def test_recording_report_and_formats_agree(tmp_path, mode: str, flags: list[str]) -> None:
    saved = tmp_path / "run.spprof"
    rec = run_python(
        "-m",
        "spprof",
        "record",
        "--mode",
        mode,
        *flags,
        "-f",
        "spprof",
        "-o",
        str(saved),
        str(SCRIPTS / "numbers_workload.py"),
        cwd=str(tmp_path),
    )
    assert rec.returncode == 0, rec.stderr
    recorded = rec.stderr.split("\n\n  Profile written to")[0].rstrip("\n")
    rep = run_python("-m", "spprof", "report", str(saved), cwd=str(tmp_path))
    assert rep.returncode == 0, rep.stderr
    # The same summary, word for word: header, thread table (samples, CPU, GIL%, IDLE%), tables.
    assert rep.stdout.rstrip("\n") == recorded, (recorded, rep.stdout)

    table = _table(recorded)
    # (CPU mode: the sleeper uses too little CPU for a sample)
    assert {"MainThread", "spinner"} | ({"sleeper"} if mode == "wall" else set()) <= set(table), (
        recorded
    )
    header = re.match(r"spprof: (\d+) samples over", recorded)
    assert header, recorded
    run_samples = int(header.group(1))
    assert run_samples == sum(int(row[1]) for row in table.values()), recorded

    profile = spprof.load(saved)
    kept = profile.sample_count
    assert kept + profile.left_out_count == run_samples
    if mode == "wall" and not flags:
        # Idle samples are left out of the profile, and said so; the sleeper's IDLE% is the
        # run's, not 0.
        assert f"  {kept} in the profile, {run_samples - kept} left out" in recorded, recorded
        assert float(table["sleeper"][5]) > 90.0, recorded
        assert profile.left_out_count > 0
    elif mode == "cpu" or "--idle" in flags:
        assert kept == run_samples and "left out" not in recorded, recorded

    # Every format converted from the file holds the profile's samples and sampled time.
    total_ns = profile.total_weight_ns
    conv = run_python(
        "-m", "spprof", "convert", str(saved), "-f", "collapsed", "-o", "-", cwd=str(tmp_path)
    )
    assert conv.returncode == 0, conv.stderr
    collapsed_us = sum(int(line.rsplit(" ", 1)[1]) for line in conv.stdout.splitlines() if line)
    assert abs(collapsed_us * 1000 - total_ns) <= 1000 * len(conv.stdout.splitlines()), (
        collapsed_us,
        total_ns,
    )
    # speedscope and gecko list an entry per row: a blocked thread's wait (wall mode) is one
    # row holding a sample per census, drawn as one span of its whole weight.
    speedscope = json.loads(output.render(profile, "speedscope"))
    assert sum(len(p["samples"]) for p in speedscope["profiles"]) == profile.row_count
    assert sum(sum(p["weights"]) for p in speedscope["profiles"]) == total_ns
    gecko = json.loads(output.render(profile, "gecko"))
    assert sum(len(t["samples"]["stack"]) for t in gecko["threads"]) == profile.row_count
    assert sum(n for _, _, _, _, _, n in profile.iter_counted()) == kept
    page = html_output.page_data(profile)
    assert sum(t["samples"] for t in page["threads"]) == kept
    assert page["summary"].startswith(f"{kept} samples")
    for row in table.values():
        # The thread table's CPU is the threads' own, in every copy of the profile.
        assert row[2] in {f"{t.cpu_ns / 1e9:.2f}" for t in profile.threads}
