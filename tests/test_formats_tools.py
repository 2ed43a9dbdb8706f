"""`spprof convert` and `spprof report` on a saved .spprof file, called directly and (once
spprof.cli dispatches them) through `python -m spprof`."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

import spprof.cli
from spprof._load import load
from spprof.cli import convert, report
from test_formats_common import assert_rows_match, small_profile

needs_dispatch = pytest.mark.skipif(
    not hasattr(spprof.cli, "SUBCOMMAND_DISPATCH"),
    reason="spprof.cli does not dispatch subcommands yet",
)


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "prog.spprof"
    small_profile().save(path, "spprof")
    return path


def test_convert_to_every_format_by_flag(saved, tmp_path):
    for fmt in ("speedscope", "collapsed", "pprof", "chrome", "html", "spprof"):
        out = tmp_path / f"out-{fmt}.bin"
        assert convert.main([str(saved), "-f", fmt, "-o", str(out)]) == 0
        data = out.read_bytes()
        if fmt == "speedscope":
            doc = json.loads(data)
            assert {p["name"].split(" (")[0] for p in doc["profiles"]} == {"MainThread", "worker"}
        elif fmt == "collapsed":
            assert "Work.hot (/app/prog.py:12) 5000" in data.decode()
        elif fmt == "pprof":
            assert b"thread_name" in gzip.decompress(data)
        elif fmt == "chrome":
            names = {
                e["args"]["name"]
                for e in json.loads(data)["traceEvents"]
                if e["name"] == "thread_name"
            }
            assert names == {"MainThread", "worker"}
        elif fmt == "html":
            assert data.startswith(b"<!DOCTYPE html>")
        else:
            assert_rows_match(small_profile().rows, load(out).rows)


def test_convert_guesses_format_from_output_name_and_defaults_the_name(saved, tmp_path):
    assert convert.main([str(saved), "-o", str(tmp_path / "x.pb.gz")]) == 0
    assert gzip.decompress((tmp_path / "x.pb.gz").read_bytes())[:1] == b"\x0a"
    assert convert.main([str(saved), "-f", "chrome"]) == 0
    assert json.loads((tmp_path / "prog.trace.json").read_text())["traceEvents"]


def test_convert_to_stdout(saved, capfdbinary):
    assert convert.main([str(saved), "-f", "collapsed", "-o", "-"]) == 0
    out = capfdbinary.readouterr().out.decode()
    assert out.splitlines()[0].startswith("<module> (/app/prog.py:30);main")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{saved}"], "give the output format"),
        (["{saved}", "-f", "xml"], "unknown output format 'xml'"),
        (["{missing}", "-f", "html"], "No such file"),
        (["{bad}", "-f", "html"], "not an spprof profile"),
        (["{saved}", "-f", "spprof"], "is the input file"),
        ([], "required: input"),
    ],
)
def test_convert_errors_are_one_line_exit_2(saved, tmp_path, capsys, argv, message):
    bad = tmp_path / "bad.spprof"
    bad.write_text("{}")
    names = {"saved": saved, "missing": tmp_path / "missing.spprof", "bad": bad}
    code = convert.main([a.format(**names) for a in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("spprof: error: ")
    assert message in err
    if "{bad}" in argv:
        assert str(bad) in err


def test_report_prints_the_summary(saved, capsys):
    assert report.main([str(saved), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "13 samples" in out
    assert "MainThread" in out and "worker" in out
    self_table = out.split("Top functions by self time")[1].split("Top functions by total")[0]
    rows = [line for line in self_table.splitlines() if "%" in line and "FUNCTION" not in line]
    assert len(rows) == 2 and "Work.hot" in rows[0] and "wait" in rows[1]


def test_report_of_a_truncated_file_names_it(saved, capsys):
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) // 2])
    assert report.main([str(saved)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"spprof: error: {saved}: truncated spprof profile (the compressed data ends early)\n"
    )


def _spprof(args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "spprof", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@needs_dispatch
def test_subcommands_through_python_m_spprof(saved, tmp_path):
    r = _spprof(["report", str(saved)], tmp_path)
    assert r.returncode == 0 and "Work.hot" in r.stdout
    r = _spprof(["convert", str(saved), "-f", "html", "-o", "flame.html"], tmp_path)
    assert r.returncode == 0 and (tmp_path / "flame.html").exists()


@needs_dispatch
@pytest.mark.parametrize(
    "argv", [["./report"], ["--", "report"], ["-q", "-o", "p.spprof", "report"]]
)
def test_a_script_named_like_a_subcommand_still_runs(tmp_path, argv):
    (tmp_path / "report").write_text("open('ran.txt', 'w').write('yes')\n")
    r = _spprof(argv if "-o" in argv else ["-q", "-o", "p.spprof", *argv], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ran.txt").read_text() == "yes"
    assert load(tmp_path / "p.spprof").metadata  # and the profile was written as spprof


@needs_dispatch
def test_recording_writes_the_lossless_format_directly(tmp_path):
    (tmp_path / "prog.py").write_text("sum(i * i for i in range(300000))\n")
    r = _spprof(["-q", "-f", "spprof", "-o", "out.bin", "prog.py"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert load(tmp_path / "out.bin").metadata["mode"] == "cpu"
