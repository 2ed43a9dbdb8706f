"""Bad input: each gets a clear message, a non-zero exit or the named exception, and leaves
nothing half-written (no output file, no thread hook, no SIGPROF handler, no timer).
Complements tests/test_api.py and tests/test_cli.py, which cover the common cases."""

from __future__ import annotations

import gzip
import json
import random
import signal
import sys
import threading
from pathlib import Path

import pytest

import spprof
from conftest import SCRIPTS, run_python
from spprof import _ext
from spprof._load import ProfileFormatError, loads
from test_reliability_common import figure, scale

TARGET = str(SCRIPTS / "cli_target.py")


def _untouched(before_handler) -> None:
    assert not spprof.is_active()
    assert getattr(threading, "_profile_hook", None) is None
    assert _ext.thread_start_hook_original(threading.Thread.__dict__["_bootstrap_inner"]) is None
    assert signal.getsignal(signal.SIGPROF) == before_handler
    if sys.platform.startswith("linux"):
        assert Path("/proc/self/timers").read_text().strip() == ""


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"interval_ms": 0}, ValueError, "interval"),
        ({"interval_ms": -1}, ValueError, "interval"),
        ({"interval_ms": 0.5}, ValueError, "interval"),
        ({"interval_ms": 1001}, ValueError, "interval"),
        ({"interval_ms": "ten"}, ValueError, "interval"),
        ({"interval_ms": float("inf")}, ValueError, "interval"),
        ({"mode": "gpu"}, ValueError, "mode"),
        ({"mode": None}, ValueError, "mode"),
        ({"timer": None}, ValueError, "timer"),
        ({"output_path": "x.json", "format": ""}, ValueError, "format"),
        ({"memory_limit_mb": -5}, ValueError, "memory_limit_mb"),
        ({"memory_limit_mb": float("nan")}, ValueError, "memory_limit_mb"),
        ({"output_path": "/proc/self/p.json"}, FileNotFoundError, "does not take new files"),
    ],
)
def test_bad_arguments_raise_the_named_exception_and_leave_nothing_behind(kwargs, exc, match):
    before = signal.getsignal(signal.SIGPROF)
    with pytest.raises(exc, match=match):
        spprof.start(**kwargs)
    _untouched(before)
    with pytest.raises(exc, match=match):
        spprof.Profiler(**kwargs)  # checked where the Profiler is made
    _untouched(before)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: _ext._python_tick("no", 1.0), TypeError, "_python_tick: handler must be callable"),
        (lambda: _ext._python_tick(None, 0), ValueError, r"_python_tick: period_s must be in \(0,"),
        (lambda: _ext._python_tick(None, "1"), TypeError, "real number|float"),
        (lambda: _ext._drain_timer(print, -1), ValueError, r"_drain_timer: first_s must be in \["),
        (lambda: _ext._drain_timer(None, 3600), ValueError, "_drain_timer: first_s"),
        (lambda: _ext._drain_timer(None), TypeError, "_drain_timer expected 2 arguments"),
    ],
)
def test_the_timed_handler_bindings_name_themselves_and_what_is_wrong(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_infinite_memory_limit_is_a_value_error():
    with pytest.raises(ValueError, match="memory_limit_mb"):
        spprof.start(memory_limit_mb=float("inf"))
    assert not spprof.is_active()


def test_output_path_whose_parent_is_a_file_fails_before_profiling(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(OSError):
        spprof.start(output_path=f / "p.json")
    assert not spprof.is_active()
    assert f.read_text() == "x"


def test_second_start_leaves_the_running_session_intact():
    spprof.start(interval_ms=5)
    try:
        for _ in range(3):
            with pytest.raises(RuntimeError, match="already"):
                spprof.start(interval_ms=1)
        assert spprof.is_active()
        sum(i * i for i in range(300_000))
    finally:
        p = spprof.stop()
    assert p.interval_ms == 5.0  # the first session's settings, untouched
    for _ in range(3):
        with pytest.raises(RuntimeError, match="not profiling"):
            spprof.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-i", "0.5"], "interval"),
        (["-i", "1001"], "interval"),
        (["-i", "-1"], "interval"),
        (["-i", "nan"], "interval"),
        (["--timer", "hpet"], "timer"),
        (["-o", "{file}/p.json"], "not a directory"),
        (["-o", "/proc/self/p.json"], "does not take new files"),
    ],
)
def test_more_bad_command_lines_exit_2_before_the_program_runs(tmp_path, args, message):
    (tmp_path / "file").write_text("")
    args = [a.format(file=tmp_path / "file") for a in args]
    r = run_python("-m", "spprof", *args, TARGET, cwd=tmp_path, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("spprof: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert message in r.stderr
    assert "TARGET" not in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing written


def test_module_that_is_a_package_without_main_is_a_one_line_error(tmp_path):
    pkg = tmp_path / "nomain"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    r = run_python("-m", "spprof", "-m", "nomain", cwd=tmp_path, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.startswith("spprof: error: ")
    assert list(tmp_path.iterdir()) == [pkg]  # no profile of a program that never ran


def test_os_exit_writes_the_profile_whole_and_keeps_its_code(tmp_path):
    out = tmp_path / "exit.json"
    code = "import os\nsum(i * i for i in range(10**6))\nos._exit(5)\n"
    r = run_python("-m", "spprof", "-q", "-o", str(out), "-c", code, timeout=60)
    assert r.returncode == 5
    # The profile is written before os._exit (tests/test_exit_paths.py), and only it.
    json.loads(out.read_text())
    assert list(tmp_path.iterdir()) == [out]


GARBAGE = ["2", "maybe", "\u00ff", "1; rm -rf /", "x" * 10_000]


def _short_id(value: str) -> str:
    return repr(value) if len(value) < 20 else f"{len(value)}-chars"


@pytest.mark.parametrize("value", GARBAGE, ids=_short_id)
def test_garbage_in_spprof_debug_warns_once_and_profiles_normally(tmp_path, value):
    out = tmp_path / "d.json"
    r = run_python("-m", "spprof", "-q", "-o", str(out), TARGET, env={"SPPROF_DEBUG": value})
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.count("[spprof warning] SPPROF_DEBUG=") == 1
    doc = json.loads(out.read_text())
    assert "hot_function" in {f["name"] for f in doc["shared"]["frames"]}


@pytest.mark.parametrize("value", ["false", "off", "no", " ", *GARBAGE], ids=_short_id)
def test_spprof_debug_off_values_and_garbage_leave_the_whole_log_off(tmp_path, value):
    r = run_python(
        "-m", "spprof", "-q", "-o", str(tmp_path / "d.json"), TARGET, env={"SPPROF_DEBUG": value}
    )
    assert r.returncode == 0, r.stderr
    assert "[spprof debug]" not in r.stderr


def _saved(tmp_path) -> Path:
    path = tmp_path / "real.spprof"
    with spprof.Profiler(interval_ms=1) as p:
        sum(i * i for i in range(2_000_000))
    p.profile.save(path, "spprof")
    return path


def test_fuzzed_spprof_files_give_a_format_error_never_an_internal_exception(tmp_path):
    rng = random.Random(20260101)
    good = _saved(tmp_path).read_bytes()
    payload = gzip.decompress(good)
    cases = scale(600, 10_000)
    outcomes = {"format_error": 0, "loaded": 0}
    for i in range(cases):
        kind = i % 4
        if kind == 0:  # truncated file
            data = good[: rng.randrange(len(good))]
        elif kind == 1:  # bytes flipped in the compressed file
            b = bytearray(good)
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            data = bytes(b)
        elif kind == 2:  # a valid gzip of a damaged payload: the decoder itself is tested
            b = bytearray(payload)
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            data = gzip.compress(bytes(b))
        else:  # a valid gzip of a truncated payload
            data = gzip.compress(payload[: rng.randrange(len(payload))])
        try:
            profile = loads(data, f"case-{i}.spprof")
        except ProfileFormatError as exc:
            assert str(exc).startswith(f"case-{i}.spprof: "), exc
            outcomes["format_error"] += 1
        else:
            # a change the format cannot notice (e.g. a digit in a name): still a usable
            # Profile end to end
            profile.aggregate()
            _ = [s.frames for s in profile.samples]
            outcomes["loaded"] += 1
    figure("fuzzed_spprof_files", cases=cases, **outcomes)
    assert outcomes["format_error"] > cases / 2


@pytest.mark.parametrize("sub", ["report", "convert"])
@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "json"])
def test_damaged_file_through_the_cli_is_one_line_naming_the_file(tmp_path, sub, damage):
    path = _saved(tmp_path)
    data = path.read_bytes()
    if damage == "truncate":
        data = data[: len(data) // 3]
    elif damage == "flip":
        data = data[:20] + bytes(b ^ 0x55 for b in data[20:60]) + data[60:]
    elif damage == "empty":
        data = b""
    else:
        data = b'{"profiles": []}'
    path.write_bytes(data)
    args = [sub, str(path)] + (
        ["-f", "html", "-o", str(tmp_path / "o.html")] if sub == "convert" else []
    )
    r = run_python("-m", "spprof", *args, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"spprof: error: {path}: "), r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "o.html").exists()  # nothing half-written
