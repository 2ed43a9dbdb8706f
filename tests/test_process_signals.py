"""Signals sent to the process reach the program's threads, never spprof's.

The kernel gives a process-directed signal (Ctrl-C's SIGINT, kill's SIGTERM, SIGCHLD, SIGUSR1)
to any thread that does not block it. spprof's threads (the drain, the wall sampler, the
exit-signal watcher, the pprof endpoint's) start with every signal blocked but the ones a
faulting instruction raises. Before, they took the signal's mask of the thread that started
them, so a program that blocks SIGUSR1 everywhere and waits for it in one thread with
sigwait() (a common way to handle signals in one place) was killed by it under spprof: the
kernel picked our drain thread, where SIGUSR1 was not blocked and its action the default one.
That happened in 10 runs of 10 (CPython 3.13). Each case runs in its own interpreter.
"""

from __future__ import annotations

import json
import sys

import pytest

from conftest import run_python

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc/self/task and the kernel's choice: Linux"
)

# Blocks SIGUSR1 in every thread of its own and waits for it in one; then lists, for every
# thread that is not its own, whether SIGINT, SIGTERM, SIGCHLD, SIGUSR1 and SIGSEGV are
# blocked there (SigBlk in /proc/self/task/TID/status).
SIGWAIT_PROGRAM = """
import json, os, signal, sys, threading, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
got = []
def waiter():
    got.append(int(signal.sigwait({signal.SIGUSR1})))
t = threading.Thread(target=waiter)
t.start()
time.sleep(0.1)
os.kill(os.getpid(), signal.SIGUSR1)
t.join(10)
mine = {threading.main_thread().native_id, t.native_id}
others = {}
for tid in os.listdir("/proc/self/task"):
    if int(tid) in mine:
        continue
    try:
        with open(f"/proc/self/task/{tid}/status") as f:
            blk = next(int(x.split()[1], 16) for x in f if x.startswith("SigBlk:"))
    except (OSError, StopIteration):
        continue
    others[tid] = {s.name: bool(blk >> (s - 1) & 1) for s in
                   (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGUSR1, signal.SIGSEGV)}
end = time.process_time() + 0.1
while time.process_time() < end:
    pass
print(json.dumps({"got": got, "others": others}))
"""


@pytest.mark.parametrize(
    "options",
    [[], ["--mode", "wall"], ["--http", "127.0.0.1:0"]],
    ids=["cpu", "wall", "endpoint"],
)
def test_a_signal_the_program_waits_for_reaches_its_waiting_thread(tmp_path, options):
    out = tmp_path / "p.json"
    r = run_python("-m", "spprof", "-q", *options, "-o", str(out), "-c", SIGWAIT_PROGRAM)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen["got"] == [10], seen  # SIGUSR1, taken by sigwait in the program's thread
    # spprof's threads were running (drain, watcher; wall sampler; endpoint), and each
    # blocks what the process is sent, never what a fault raises.
    assert len(seen["others"]) >= 2 + (options != []), seen
    for tid, blocked in seen["others"].items():
        assert blocked == {
            "SIGINT": True, "SIGTERM": True, "SIGCHLD": True, "SIGUSR1": True, "SIGSEGV": False,
        }, (tid, blocked)  # fmt: skip
    assert out.stat().st_size > 0


def test_spprofs_threads_started_by_the_library_block_what_the_process_is_sent():
    # start() from a thread of the program that blocks nothing: the threads it starts still
    # block every asynchronous signal, and the caller's own mask is as it was.
    program = """
import json, os, signal, threading, time
import spprof
before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
spprof.start(interval_ms=5)
after = signal.pthread_sigmask(signal.SIG_BLOCK, set())
mine = {threading.main_thread().native_id}
blocked = {}
for tid in os.listdir("/proc/self/task"):
    if int(tid) in mine:
        continue
    with open(f"/proc/self/task/{tid}/status") as f:
        blk = next(int(x.split()[1], 16) for x in f if x.startswith("SigBlk:"))
    sigs = (signal.SIGINT, signal.SIGALRM, signal.SIGBUS)
    blocked[tid] = [bool(blk >> (s - 1) & 1) for s in sigs]
spprof.stop()
print(json.dumps({"same": before == after, "blocked": blocked}))
"""
    r = run_python("-c", program)
    assert r.returncode == 0, r.stderr[-2000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen["same"], seen
    assert seen["blocked"], seen  # the drain thread at least
    assert all(b == [True, True, False] for b in seen["blocked"].values()), seen
