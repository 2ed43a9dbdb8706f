"""Child processes are not profiled, and the summary says how much CPU they used (issue 25:
without child-process profiling, nothing is left out silently).

A fork pool of two workers and a `subprocess.run` of Python do 1.2 s of CPU between them; the
parent 0.1 s. Old code: the summary showed the parent's 0.1 s and nothing else.
"""

from __future__ import annotations

import json
import sys

import pytest

import spprof
from conftest import SCRIPTS, run_python

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX fork")

SCRIPT = str(SCRIPTS / "children_work.py")


def _truth(stdout: str) -> dict:
    line = next(x for x in stdout.splitlines() if x.startswith("TRUTH "))
    return json.loads(line[len("TRUTH ") :])


def test_children_cpu_and_forks_named_in_summary_stats_and_report(tmp_path):
    out = tmp_path / "p.spprof"
    r = run_python("-m", "spprof", "-o", str(out), SCRIPT)
    assert r.returncode == 0, r.stderr
    truth = _truth(r.stdout)["children_cpu"]
    stats = spprof.load(str(out)).stats
    assert stats["children_forked"] == 2, stats
    # Each child's own measure of its work, plus its start-up and exit (a fork is cheap; the
    # subprocess starts an interpreter, ~20-60 ms).
    assert truth <= stats["children_cpu_ns"] / 1e9 <= truth + 0.5, (stats["children_cpu_ns"], truth)
    lines = [x for x in r.stderr.splitlines() if "child processes:" in x]
    assert len(lines) == 1 and "2 forked" in lines[0] and "not in this profile" in lines[0], (
        r.stderr
    )
    # The saved file says the same.
    rep = run_python("-m", "spprof", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    assert lines[0] in rep.stdout.splitlines(), rep.stdout


def test_no_children_no_line():
    r = run_python("-m", "spprof", "-o", "/dev/null", "-f", "collapsed", "-c", "sum(range(10**6))")
    assert r.returncode == 0, r.stderr
    assert "child processes" not in r.stderr


def test_api_profile_stats_count_the_children():
    import subprocess

    with spprof.Profiler(interval_ms=10) as p:
        subprocess.run([sys.executable, "-c", "sum(range(3 * 10**7))"], check=True)
    assert p.profile is not None
    assert p.profile.stats["children_forked"] == 0  # subprocess does not go through os.fork
    assert p.profile.stats["children_cpu_ns"] > 0.1e9, p.profile.stats
