"""Short threads: every thread's CPU is in the profile, however short the thread.

Each case runs tests/scripts/short_threads.py in its own interpreter: sequential threads that
each use less than a sampling interval or two of CPU (300 x ~7 ms hashing with the GIL
released; 1 s of main-thread spin, then 1,000 x 2 ms spin). The workload measures the truth
with thread and process CPU clocks. Before the random timer phase and the thread-end samples,
a thread shorter than one interval was never sampled and every thread lost its last partial
interval: the threads' function got a few percent of the profile (truth 58-92 %).

The per-thread timers run at 2 ms here: at 10 ms a 2 ms thread is sampled with probability
0.2, and 1,000 of them leave the threads' share with a standard deviation of ~4 points, too
close to the 5-point tolerance for a test (benchmarks/ measures 10 ms). 2 ms is below this
kernel's tick (4 ms at CONFIG_HZ=250), so the owed-expiry count is exercised well past one.
"""

from __future__ import annotations

import json
import os

import pytest

from conftest import SCRIPTS, run_python, skip_when_emulated

pytestmark = skip_when_emulated("CPU-time accuracy under emulation says nothing")

# The itimer fallback: ITIMER_PROF merges expiries and its SIGPROF lands on whichever thread
# runs, so its samples are weighted by their thread's CPU since the previous one and each
# thread's CPU after its last sample is its thread-end sample (8-27 % was missing before).
CASES = [
    pytest.param("cpu", "auto", "2", id="cpu"),
    pytest.param("wall", "auto", "2", id="wall"),
    pytest.param("cpu", "itimer", "2", id="itimer"),
]


def _run(tmp_path, workload: str, mode: str, timer: str, interval: str) -> dict:
    out = tmp_path / "result.json"
    r = run_python(
        str(SCRIPTS / "short_threads.py"), workload, mode, timer, interval, str(out), timeout=300
    )
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("workload", ["hash300", "spin1000"])
@pytest.mark.parametrize("mode,timer,interval", CASES)
def test_short_threads_get_their_true_share_and_the_profile_all_the_cpu(
    tmp_path, workload, mode, timer, interval
):
    d = _run(tmp_path, workload, mode, timer, interval)
    truth, prof = d["truth"], d["profile"]
    # The share among the CPU of the program's threads, read from their CPU clocks (the thread
    # table). The process's CPU also holds CPU no such clock shows: spprof's threads and each
    # thread's teardown after its clock was read. Under ASan that was 0.13-0.15 s of 3.7 s
    # (1,000 threads), and CI's run then missed the process-CPU share by 6.1 points; the check
    # after this one accounts for the process's CPU as a whole.
    true_share = truth["thread_work"] / prof["thread_table_cpu"]
    share = prof["thread_work"] / prof["cpu"]
    # Wall mode infers on-CPU time from what its census sees at each tick, and the census runs
    # only when it has a core: on a loaded machine (ASan beside three CI stages on 2 cores) that
    # is more often when the spinning main thread has just lost its core, which gave the short
    # threads 5.2-5.3 points too many. CPU mode's timers count CPU time itself.
    tolerance = 0.08 if mode == "wall" else 0.05
    assert abs(share - true_share) < tolerance, (share, true_share, d)
    # Every CPU second of the process over the session is in the samples' weights, but for
    # spprof's own threads (the drain, wall mode's census), which the CPU balance names: under
    # AddressSanitizer they were 0.2 s of 3.7 s in wall mode.
    # Under ASan the threads' teardown after their clocks are read is heavy: 2-3.5 % of the
    # process's CPU in most runs, 6.5 % and 12 % in two of ten (nothing dropped in the counters
    # of the runs looked at; the cause of the outliers is not known, see the closing note).
    accounted = prof["cpu"] + prof["spprof_threads_cpu"]
    slack = 0.15 if os.environ.get("SPPROF_TEST_ASAN") else 0.05
    assert abs(accounted / truth["process_cpu"] - 1) < slack, d


def test_expiries_owed_at_thread_ends_are_flagged_counted_and_agree_with_the_thread_table(tmp_path):
    d = _run(tmp_path, "spin1000", "cpu", "auto", "2")
    prof, stats = d["profile"], d["stats"]
    # 1,000 threads of ~2.3 ms at 2 ms: most owe an expiry (the 4 ms tick rarely finds them)
    assert prof["thread_end_samples"] > 500, d
    # Once in a pre-stop check (3.14, 830 counted, 829 in the profile) one thread-end record
    # was counted but is not in the profile; not reproduced since (14 runs on 3.14, 8 of them
    # two at a time). The ways a counted record can miss the profile are in `d` (unknown
    # thread, memory limit, dropped as spprof's own, folded) to name it when it comes back: at
    # most one is let through here, never one the profile has and stats lacks.
    missing = stats["thread_end_samples"] - prof["thread_end_samples"]
    assert 0 <= missing <= 1, d
    if missing == 0:
        assert stats["thread_end_ns"] == pytest.approx(prof["thread_end_weight"] * 1e9, rel=1e-9), d
    assert stats["thread_end_expiries"] * 2_000_000 == stats["thread_end_ns"], d
    # the thread table's CPU (clocks) and the samples' weights (timers) tell one story
    assert abs(prof["cpu"] / prof["thread_table_cpu"] - 1) < 0.03, d
    assert stats["threads_unsampled"] == 0, d


def test_threads_that_drew_no_expiry_stand_in_the_profile_not_in_the_balance_as_missing(tmp_path):
    # 300 x 7 ms at 10 ms: each thread's random phase gives it no expiry with probability 0.3,
    # one with 0.7 (weight 10 ms), so about 90 threads end without a sample while the profile's
    # total stays their CPU in expectation. The balance once also named their CPU as "threads
    # ended unsampled" (0.52 s of 2.16 s), counting it twice: "not accounted" was -30 %.
    d = _run(tmp_path, "hash300", "cpu", "auto", "10")
    stats, balance = d["stats"], d["balance"]
    assert stats["timer"] == "per-thread", d
    assert stats["threads_unsampled"] >= 20, d  # binomial(300, 0.3): 90 +- 8
    assert stats["threads_unsampled_cpu_ns"] > 0, d
    # every one ended through its exit watch, its schedule settled: none is missing CPU
    assert balance["cpu_unsampled_threads_ns"] == 0, d
    # 300 independent draws of up to one interval: sd ~80 ms of ~2.1 s (3.8 %)
    assert abs(balance["cpu_unaccounted_ns"]) < 0.15 * balance["cpu_process_ns"], d


_SHORT_THREADS_PROGRAM = """
import threading, time
def spin(s):
    t0 = time.thread_time()
    while time.thread_time() - t0 < s:
        pass
for _ in range(300):
    t = threading.Thread(target=spin, args=(0.003,))
    t.start()
    t.join()
"""


def test_summary_blames_short_threads_not_the_tick_and_shows_their_end_samples(tmp_path):
    # 300 threads x 3 ms at 10 ms: most expiries fall due after a thread's last tick, so few
    # signals arrive per CPU second; the old note blamed CONFIG_HZ for it.
    r = run_python("-m", "spprof", "-o", str(tmp_path / "p.spprof"), "-c", _SHORT_THREADS_PROGRAM)
    assert r.returncode == 0, r.stderr
    note = [line for line in r.stderr.splitlines() if "samples/s per CPU second" in line]
    assert len(note) == 1, r.stderr
    assert "short threads:" in note[0] and "CONFIG_HZ" not in note[0], r.stderr
    assert "thread-end samples," in r.stderr, r.stderr
    # ~70 % of 3 ms threads draw no expiry at 10 ms: not listed, and not called missing
    ended = [line for line in r.stderr.splitlines() if "threads ended without a sample" in line]
    assert len(ended) == 1, r.stderr
    assert "of it in other threads' weights (random timer phase)" in ended[0], r.stderr
