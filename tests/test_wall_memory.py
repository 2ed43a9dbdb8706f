"""Wall mode's memory with many blocked threads: the limit holds; a ring page, a row per wait.

Each case runs tests/scripts/wall_blocked_threads.py in its own interpreter (a crash or a hang
is a failure): N threads blocked in Event.wait() for S seconds, wall mode at 1 ms (the census
comes every 10 ms), and reads stats() while they wait and the profile after.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import on_one_version, run_python

SCRIPT = Path(__file__).parent / "scripts" / "wall_blocked_threads.py"
POLLERS = Path(__file__).parent / "scripts" / "wall_pollers.py"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the wall census is Linux's"
)


def _run(mode: str, threads: int, seconds: float, limit_mb: float) -> dict[str, Any]:
    proc = run_python(
        str(SCRIPT), mode, str(threads), str(seconds), "1", str(limit_mb), timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@on_one_version(
    "3.5 s: the rings' and the store's memory, the same on every version", asan_too=True
)
def test_blocked_threads_rings_stay_at_a_page_each() -> None:
    # 300 threads x 300 censuses x 56 bytes: before the drain rewound emptied rings, each ring's
    # writes walked 16 KiB of it into RSS (and 256 KiB after 55 s); now one page, 4 KiB.
    n = 300
    d = _run("wall", n, 3.0, 256)
    during = d["during"]
    assert during["ring_touched_bytes"] <= n * 8192, during
    assert during["ring_rewinds"] >= n, during
    # Every blocked thread was sampled through the wait: the rewinds lost none of its records.
    assert len(d["rows"]) == n
    assert min(d["rows"].values()) >= 250, sorted(d["rows"].values())[:5]


@on_one_version(
    "3.5 s: the rings' and the store's memory, the same on every version", asan_too=True
)
def test_memory_limit_holds_in_wall_mode_and_waits_keep_their_samples_past_it() -> None:
    # 300 threads wait 3 s under a 3.5 MB limit (their contexts and ring pages take 3 MB); a
    # third in, 100 more threads start and push the session past the limit. Their records,
    # which need rows, are dropped and counted; the 300 waits already recorded keep folding,
    # each census a sample as before the limit (a fold costs no memory). At 3697f84, with 3 MB,
    # memory_bytes reached 6.9 MB and 95 % of the samples were dropped with their time; at
    # ef9d17f the waits past the limit kept their time but lost their samples (a fold counted
    # 24 bytes): one run kept as few as 84 of a thread's ~300 (this test fails there).
    limit = int(3.5 * 1024 * 1024)
    proc = run_python(str(SCRIPT), "wall", "300", "3", "1", "3.5", "extra=100", timeout=180)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout.strip().splitlines()[-1])
    during = d["during"]
    assert during["memory_limit_bytes"] == limit
    assert during["memory_bytes"] > limit, during  # the extra threads' contexts passed it
    # What the limit bounds (samples, stacks) stayed under it; contexts are not samples.
    assert during["memory_bytes"] - during["thread_memory_bytes"] <= limit, during
    assert during["dropped_memory_limit"] > 0, during
    assert during["idle_folded_over_limit"] > 0, during
    assert len(d["rows"]) == 300
    # ~300 censuses each; 200 leaves room for a census slowed by 400 threads on a loaded
    # machine, and is twice what the old build kept.
    assert min(d["rows"].values()) >= 200, sorted(d["rows"].values())[:5]


@on_one_version(
    "3.5 s: the rings' and the store's memory, the same on every version", asan_too=True
)
def test_blocked_thread_costs_one_row_per_wait_and_keeps_its_sample_count() -> None:
    # Each census gives a blocked thread an idle sample; the drain folds those into the
    # thread's row of the wait: stored rows stay a few per thread (start-up, the wait's first
    # walk, its end) while the samples the profile shows are one per census, as before.
    n = 300
    d = _run("wall", n, 3.0, 256)
    during, after = d["during"], d["after"]
    assert during["sample_rows"] <= 5 * n, during
    assert during["idle_samples_folded"] >= 250 * n, during
    assert after["samples_stored"] == after["sample_rows"] + after["idle_samples_folded"], after
    # The profile stop() returns holds the rows as they were, each wait once with the samples
    # it holds (at 815e3fa it held a row per sample: 90,000 here, 9.8 M rows and 789 MB of RSS
    # for 5,000 threads waiting 30 s).
    # After the wait, 300 threads released at once wait for the GIL on the wait's line: walks
    # that find one blocked there again continue its row (at deb381f each was a row: 1,130 to
    # 1,530 rows here under ASan, 650 to 1,242 without; now ~710 and ~620).
    assert d["rows_held"] <= 4 * n, d["rows_held"]
    assert d["samples_held"] == after["samples_stored"] - after.get("samples_in_profiler", 0), after
    # One sample per census (10 ms) of the 3 s wait on the wait's line, for every thread.
    assert len(d["rows"]) == n
    assert min(d["rows"].values()) >= 250, sorted(d["rows"].values())[:5]
    # ... though a long wait is visited (its thread's CPU clock read, a system call) every 2nd
    # census after 4 idle visits, every 4th after 8, every 8th after 12: ~45 records stand for
    # a thread's ~300 censuses (before: a clock read and a record at each).
    assert after["wall_passed_over"] >= 4 * after["wall_idle_records"], after


def test_a_thread_that_polls_keeps_one_row_for_its_poll() -> None:
    # 20 threads each wait 2 ms at a time on one line, in a loop, for 1.5 s: every census finds
    # each one has run since its last visit and walks it, blocked on the same line again. The
    # walk continues the thread's row: at deb381f each walk was a new row, ~148 a poller (100 a
    # second: 432 MB an hour for 50 threads polling a queue), 3 of 3 runs; now 1 to 6.
    n = 20
    proc = run_python(str(POLLERS), str(n), "1.5", "2", timeout=120)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(d["rows"]) == n, d["rows"]
    assert max(d["rows"].values()) <= 10, sorted(d["rows"].values())
    # Still a sample per census and the whole poll's time on its line, off CPU: a census
    # period at each end (longer when the census waits for a CPU on a loaded machine).
    assert min(d["samples"].values()) >= 100, sorted(d["samples"].values())
    bound = max(50_000_000, 2 * d["longest_census_gap_ns"] + 10_000_000)
    off = {k: d["spent"][k] - d["weight"][k] for k in d["spent"]}
    worst = max(off, key=lambda k: abs(off[k]))
    assert abs(off[worst]) <= bound, (worst, off[worst], d["longest_census_gap_ns"])


@on_one_version(
    "3.5 s: the rings' and the store's memory, the same on every version", asan_too=True
)
def test_a_wait_costs_no_memory_however_long_it_lasts() -> None:
    # From a third into the wait to its end, 300 threads take ~200 more censuses each: the
    # samples grow by ~60,000 and memory_bytes by nothing (the rows exist; a fold is a count).
    # At ef9d17f each folded sample counted 24 bytes: +1.46 MB here, and in a long session the
    # limit was reached by waiting alone (100 blocked threads at 100 Hz: 256 MB in ~18 min).
    n = 300
    d = _run("wall", n, 3.0, 256)
    early, during = d["early"], d["during"]
    assert during["samples_stored"] - early["samples_stored"] >= 150 * n, (early, during)
    assert during["memory_bytes"] - early["memory_bytes"] <= 64 * 1024, (early, during)


def test_blocked_threads_weight_is_their_wait() -> None:
    # Rewinds and folds must not cost a blocked thread any time. Each thread waits twice: for
    # the go (while the others start), then the measured wait. Its weight off CPU on the two
    # wait lines together is its time from before the first to after the second (below), within
    # a census period at each end (a census puts its period's time on the stack it finds at the
    # period's end). The periods are 10 ms idle; on a loaded machine the census waits for a
    # CPU and they stretch (a CI lane: 76 ms worst; beside three busy loops on two cores: up
    # to 96 ms worst, gaps of 20-120 ms), so the bound is two of the longest gap the census
    # had, at least 50 ms (150 under ASan, whose censuses of 300 threads are slower: 52 and
    # 89 ms worst in 2 of 6 idle runs). Where the first wait ends, the census visits a long
    # wait only every 2nd to 8th period: up to 80 ms of the go's wait may land on the second
    # line (docs/architecture.md, "Long waits"; +78 ms in CI), so that line alone is held
    # only to losing nothing of its measured wait.
    d = _run("wall", 300, 2.0, 256)
    assert len(d["weight"]) == 300
    gap = d["after"]["wall_longest_census_gap_ns"]
    floor = 150_000_000 if os.environ.get("SPPROF_TEST_ASAN") else 50_000_000
    bound = max(floor, 2 * gap + 10_000_000)
    # Not less than its time from its first line to the end of its second wait, and not more
    # than its time from t.start(): the census's span starts at its registration, and what the
    # thread spent off CPU before its first line (its start-up waits for the GIL while the main
    # thread starts the others: tens of ms on a loaded machine) goes to the wait that follows.
    # Held to its first line both ways, one thread was 54 ms off in a CI run (gap 12 ms; that
    # message did not say which way: these do).
    # The wait's end may go to the lines after it (weight_after): a long wait's visit that
    # finds the thread released and blocked again there (the GIL, 300 threads released at once)
    # puts the time since the last visit, up to 80 ms, on that line. One thread was 53 ms under
    # in a rehearsal (3.10, gap 10.5 ms), where the message did not say where its time went.
    later = d["weight_after"]  # off CPU on the lines after the wait (d["after"]: the stats)

    def where(k: str) -> dict[str, Any]:
        return {f: d[f].get(k) for f in ("wholes", "lives", "spans", "weight", "weight_both")} | {
            "weight_after": later.get(k, 0),
            "stats": {s: v for s, v in d["after"].items() if "dropped" in s or "lost" in s},
        }

    unders = {k: d["wholes"][k] - d["weight_both"][k] - later.get(k, 0) for k in d["wholes"]}
    worst = max(unders, key=unders.__getitem__)
    assert unders[worst] <= bound, (unders[worst], gap, worst, where(worst))
    overs = {k: d["weight_both"][k] - d["lives"][k] for k in d["lives"]}
    worst = max(overs, key=overs.__getitem__)
    assert overs[worst] <= bound, (overs[worst], gap, worst, where(worst))
    shorts = {k: d["spans"][k] - d["weight"][k] - later.get(k, 0) for k in d["spans"]}
    worst = max(shorts, key=shorts.__getitem__)
    assert shorts[worst] <= bound, (shorts[worst], gap, worst, where(worst))


WINDOW_OVER_A_WAIT = """
import json, sys, threading, time
import spprof
release = threading.Event()
t = threading.Thread(target=release.wait, name="waiter")
spprof.start(interval_ms=1, mode="wall")
t.start()
time.sleep(0.5)
with spprof.Profiler() as w:  # a window on the session: 0.5 s in the middle of the wait
    time.sleep(0.5)
release.set()
t.join()
spprof.stop()
p = w.profile
serial = {r.serial for r in p.thread_table if r.name == "waiter"}
rows = [i for i, r in enumerate(p.iter_counted()) if r[3] in serial]
samples = [s for s in p.samples if s.thread_name == "waiter"]
print(json.dumps({"rows": len(rows), "folds": sorted(p.folds.values()),
                  "samples": len(samples), "weight": sum(s.weight_ns for s in samples),
                  "idle": all(s.idle for s in samples), "span": p.duration_ns}))
"""


def test_a_window_holds_a_wait_as_one_row_with_its_samples() -> None:
    # A window over the middle of a wait (the pprof endpoint's, record --pid's) gets the
    # wait's censuses in it as one row holding them, not a row each (at ef9d17f: ~50 rows,
    # and 30 M for a minute of 5,000 blocked threads); the samples it gives back are the same.
    proc = run_python("-c", WINDOW_OVER_A_WAIT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout.strip().splitlines()[-1])
    assert d["rows"] <= 2, d
    assert d["samples"] >= 30 and d["idle"], d  # a census every 10 ms, stretched under load
    assert d["folds"] and max(d["folds"]) >= 30, d
    assert abs(d["weight"] - d["span"]) <= 50_000_000, d  # the window's time, within a census
