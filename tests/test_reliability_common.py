"""Helpers shared by the reliability tests (tests/test_reliability_*.py); holds no test.

- STRESS / scale(): every stress test has a bounded CI form and a longer form selected with
  SPPROF_STRESS=1 (`SPPROF_STRESS=1 pytest -m stress -s test_reliability_*.py`).
- figure(): each test reports what it reached (threads, cycles, forks, samples) on stdout as
  one `[reliability] ...` line (visible with -s) and, when SPPROF_RELIABILITY_FIGURES names a
  file, appends it there as a JSON line; docs/reliability.md quotes these figures.
- run_workload(): a tests/scripts/rel_*.py workload in a subprocess, with a timeout; the
  workload prints its findings as one `RESULT {json}` line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import SCRIPTS, run_python

STRESS = os.environ.get("SPPROF_STRESS", "").strip().lower() not in ("", "0", "false", "no")


def scale(ci, stress):
    """The CI figure, or the stress figure under SPPROF_STRESS=1."""
    return stress if STRESS else ci


def figure(test: str, **figures) -> None:
    """Report what a test reached (printed, and appended to $SPPROF_RELIABILITY_FIGURES)."""
    record = {
        "test": test,
        "python": "{}.{}".format(*sys.version_info[:2]),
        "stress": STRESS,
        **figures,
    }
    print("[reliability] " + json.dumps(record, sort_keys=True))
    path = os.environ.get("SPPROF_RELIABILITY_FIGURES")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")


def result_of(stdout: str) -> dict:
    """The workload's `RESULT {json}` line."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise AssertionError(f"the workload printed no RESULT line; stdout was {stdout[-2000:]!r}")


def run_workload(
    script: str, *args: str, env: dict | None = None, timeout: float = 120
) -> tuple[subprocess.CompletedProcess, dict]:
    """Run tests/scripts/<script> and return (process, RESULT dict); fails on a bad exit."""
    proc = run_python(str(SCRIPTS / script), *map(str, args), env=env, timeout=timeout)
    assert proc.returncode == 0, (
        f"{script} exited with {proc.returncode}\nstdout: {proc.stdout[-3000:]}\n"
        f"stderr: {proc.stderr[-3000:]}"
    )
    return proc, result_of(proc.stdout)
