"""`pytest --spprof[=DIR]` (spprof.pytest_plugin) on a real pytest session in a subprocess:
one profile with each test as a root frame, the slowest tests explained, and the same outcomes
and exit status as without it."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

import spprof

pytest_plugins = ["pytester"]

TESTS = """
import time

def spin_for(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

def test_slow():
    spin_for(0.5)

def test_quick():
    spin_for(0.05)

def test_failing():
    spin_for(0.1)
    assert 1 == 2
"""


def _entry_point() -> str | None:
    """The module spprof registers under pytest11, or None when spprof is not installed."""
    if sys.version_info >= (3, 10):
        eps = list(metadata.entry_points(group="pytest11"))
    else:
        eps = list(metadata.entry_points().get("pytest11", []))
    for ep in eps:
        if ep.name == "spprof":
            return ep.value
    return None


def _plugin_args() -> list[str]:
    # Installed: the entry point loads the plugin; from a source tree: name it with -p.
    return [] if _entry_point() else ["-p", "spprof.pytest_plugin"]


def test_the_plugin_is_registered_through_the_pytest11_entry_point():
    value = _entry_point()
    if value is None:
        pytest.skip("spprof is not installed (running from a source tree): no entry points")
    assert value == "spprof.pytest_plugin"


def test_a_failing_session_keeps_its_outcomes_and_exit_code_and_gets_a_labelled_profile(
    pytester,
):
    pytester.makepyfile(test_work=TESTS)
    plain = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=2, failed=1)
    assert plain.ret == 1
    # without --spprof the plugin does nothing (pytest's header still lists it among plugins)
    assert "profile of the session" not in plain.stdout.str()
    assert not (pytester.path / ".spprof").exists()

    out = pytester.path / "prof"
    r = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", f"--spprof={out}")
    r.assert_outcomes(passed=2, failed=1)
    assert r.ret == 1
    text = r.stdout.str()
    # The summary: the slowest test first, and the function it spent its time in.
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "slowest 3 tests" in line)
    assert "test_work.py::test_slow" in lines[first + 1]
    source = (pytester.path / "test_work.py").read_text().splitlines()
    loop = 1 + next(i for i, line in enumerate(source) if line.strip().startswith("while"))
    assert f"spin_for (test_work.py:{loop})" in lines[first + 2]

    profile = spprof.load(out / "spprof-pytest.spprof")
    assert (out / "spprof-pytest.html").read_text().count("test: test_work.py::test_slow") >= 1
    # Each sample of a test has `test: nodeid` as its root, then the test function: pytest's
    # and pluggy's frames are gone from above it.
    per_test: dict[str, int] = {}
    for s in profile.samples:
        root = s.frames[0].function_name
        if root.startswith("test: ") and len(s.frames) > 1:
            nodeid = root[len("test: ") :]
            if s.frames[1].function_name == nodeid.split("::")[1]:
                per_test[nodeid] = per_test.get(nodeid, 0) + s.weight_ns
    assert set(per_test) == {
        "test_work.py::test_slow",
        "test_work.py::test_quick",
        "test_work.py::test_failing",
    }
    # test_slow burns 0.5 s of CPU, test_quick 0.05 s: the profile agrees on the order.
    assert per_test["test_work.py::test_slow"] > 3 * per_test["test_work.py::test_quick"]


def test_a_passing_session_exits_0_with_the_default_directory(pytester):
    pytester.makepyfile(test_ok="def test_ok():\n    assert sum(range(10)) == 45\n")
    r = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", "--spprof")
    r.assert_outcomes(passed=1)
    assert r.ret == 0
    assert (pytester.path / ".spprof" / "spprof-pytest.spprof").exists()
    assert "spprof: profile of the session" in r.stdout.str()
