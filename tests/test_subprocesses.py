"""--subprocesses: every child process that runs Python is in the one profile, each thread
under its process (issue 25). Old code: `--subprocesses` was refused, and the children's work
was only a line of CPU time in the summary.

Each case runs tests/scripts/subprocess_family.py under the CLI in an interpreter of its own,
with TMPDIR in the test's directory, so that a family directory left behind is seen.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import spprof
from conftest import SCRIPTS, free_port, get_200s, run_python
from spprof._model import ProfileData, ThreadRecord
from spprof._process_merge import merge
from spprof._rows import ROW

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

SCRIPT = str(SCRIPTS / "subprocess_family.py")


def _record(
    kind: str, tmp_path: Path, *flags: str, timeout: float = 120
) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "p.spprof"
    r = run_python(
        "-m",
        "spprof",
        "-i",
        "5",
        *flags,
        "-o",
        str(out),
        SCRIPT,
        kind,
        str(tmp_path / "nested.spprof"),
        env={"TMPDIR": str(tmp_path)},
        cwd=str(tmp_path),
        timeout=timeout,
    )
    assert r.returncode == 0, r.stderr
    return r, out


def _truth(stdout: str) -> dict:
    lines = [x for x in stdout.splitlines() if x.startswith("TRUTH ")]
    assert len(lines) == 1, stdout  # printed once: no child ran the parent's ending
    return json.loads(lines[0][len("TRUTH ") :])


def _weight_by_pid(profile: spprof.Profile) -> dict[int, Counter]:
    """Per process, sampled seconds per function on the stack (each function once a sample)."""
    pid_of = {(t.thread_id, t.native_thread_id): t.pid for t in profile.threads}
    out: dict[int, Counter] = defaultdict(Counter)
    for s in profile.samples:
        pid = pid_of[(s.thread_id, s.native_thread_id)]
        for name in {f.function_name for f in s.frames}:
            out[pid][name] += s.weight_ns / 1e9
    return out


def _family_dirs(tmp_path: Path) -> list[Path]:
    return list(tmp_path.glob("spprof-subprocesses-*"))


def _children_line(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if "child processes:" in x]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_forked_child_is_profiled_under_its_own_pid(tmp_path):
    r, out = _record("fork", tmp_path, "--subprocesses")
    truth = _truth(r.stdout)
    root, (child,) = truth["root"], truth["children"]
    profile = spprof.load(out)
    by_pid = _weight_by_pid(profile)
    assert set(by_pid) == {root, child}, dict(by_pid)
    # The child spun 0.3 s of CPU in forked_child_work, the parent 0.1 s in parent_work.
    assert 0.2 <= by_pid[child]["forked_child_work"] <= 0.45, by_pid[child]
    assert "forked_child_work" not in by_pid[root]
    assert 0.05 <= by_pid[root]["parent_work"] <= 0.2, by_pid[root]
    assert "parent_work" not in by_pid[child]
    names = {t.label for t in profile.threads if t.pid == child}
    assert names == {f"MainThread (pid {child})"}, names
    processes = profile.metadata["processes"]
    assert [p["pid"] for p in processes] == [root, child]
    assert processes[1]["ppid"] == root
    assert profile.stats["subprocesses_profiled"] == 1
    assert _children_line(r.stderr).startswith("  child processes: 1 profiled ("), r.stderr
    # The summary's thread table: a PID column, each thread under its process.
    table = r.stderr[r.stderr.index("  THREAD") :].splitlines()
    assert table[0].split()[:3] == ["THREAD", "PID", "TID"], table[0]
    rows = {tuple(line.split()[:3]) for line in table[1:3]}
    assert rows == {("MainThread", str(root), str(root)), ("MainThread", str(child), str(child))}
    assert _family_dirs(tmp_path) == []


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_every_multiprocessing_start_method_puts_the_workers_in_the_profile(tmp_path, method):
    r, out = _record(f"pool-{method}", tmp_path, "--subprocesses")
    truth = _truth(r.stdout)
    profile = spprof.load(out)
    by_pid = _weight_by_pid(profile)
    workers = truth["children"]
    assert workers and set(workers) <= set(by_pid), (workers, dict(by_pid))
    # Six tasks of 0.1 s of CPU each, run by the workers only.
    pooled = sum(by_pid[w]["pool_task"] for w in workers)
    assert 0.4 <= pooled <= 0.9, {w: by_pid[w]["pool_task"] for w in workers}
    assert "pool_task" not in by_pid[truth["root"]]
    # One function, one row, whichever process ran it.
    files = {f.filename for f in profile.frame_table if f.function_name == "pool_task"}
    assert files == {SCRIPT}, files
    # multiprocessing's resource tracker (spawn, forkserver) outlives the program: it is not
    # profiled, so nothing is left running or behind.
    assert profile.stats["subprocesses_running"] == 0, profile.metadata
    # The pool's exit terminates its workers (SIGTERM): each wrote its profile first.
    assert profile.stats["subprocesses_lost"] == 0, profile.metadata
    assert _family_dirs(tmp_path) == []


def test_a_python_subprocess_is_profiled_from_its_start(tmp_path):
    r, out = _record("subprocess", tmp_path, "--subprocesses")
    truth = _truth(r.stdout)
    (child,) = truth["children"]
    by_pid = _weight_by_pid(spprof.load(out))
    assert 0.2 <= by_pid[child]["spawned_work"] <= 0.45, dict(by_pid)
    assert "1 profiled" in _children_line(r.stderr)


def test_without_the_flag_children_are_left_out_and_the_summary_says_so(tmp_path):
    r, out = _record("fork", tmp_path)
    truth = _truth(r.stdout)
    by_pid = _weight_by_pid(spprof.load(out))
    assert set(by_pid) == {0}, dict(by_pid)  # one process: threads carry no pid
    assert "forked_child_work" not in by_pid[0]
    line = _children_line(r.stderr)
    assert "1 forked" in line and "--subprocesses adds them" in line, line
    assert truth["children"]


def test_a_child_killed_by_sigkill_is_counted_and_named(tmp_path):
    r, out = _record("killed", tmp_path, "--subprocesses")
    truth = _truth(r.stdout)
    (child,) = truth["children"]
    profile = spprof.load(out)
    assert profile.stats["subprocesses_lost"] == 1
    assert profile.metadata["subprocesses_lost"] == [child]
    assert f"1 ended without a profile (pid {child}" in _children_line(r.stderr)
    assert 0.05 <= _weight_by_pid(profile)[truth["root"]]["parent_work"] <= 0.2
    assert _family_dirs(tmp_path) == []


@pytest.mark.skipif(
    bool(os.environ.get("SPPROF_TEST_ASAN")),
    reason="GCC 12's AddressSanitizer takes no allocator lock at fork: of 400 children forked "
    "by a pool thread while other threads allocate, one hung in its first malloc in 3 of 6 runs",
)
def test_a_pool_recycling_its_workers_keeps_the_family_directory_small(tmp_path):
    # 400 tasks, each in a new process: the old code kept two entries per child until the
    # root stopped (800 and more, every run); the root now merges finished children in
    # batches of 64 as they come (_family_files.py).
    r, out = _record("recycled", tmp_path, "--subprocesses", timeout=300)
    truth = _truth(r.stdout)
    (most,) = [int(x.split()[1]) for x in r.stdout.splitlines() if x.startswith("MOST_ENTRIES")]
    assert most < 600, most
    profile = spprof.load(out)
    assert profile.stats["subprocesses_merged_early"] >= 256
    assert profile.stats["subprocesses_lost"] == 0
    pids = [e["pid"] for e in profile.metadata["processes"]]
    assert pids[0] == truth["root"] and set(truth["children"]) <= set(pids[1:])
    assert len(pids) == len(set(pids))  # every child once, batches included
    starts = [e["start_ns"] for e in profile.metadata["processes"][1:]]
    assert starts == sorted(starts)
    assert profile.stats["subprocesses_profiled"] == len(pids) - 1
    by_pid = _weight_by_pid(profile)
    assert sum(1 for pid in truth["children"] if by_pid[pid]["pool_task"] > 0) >= 200
    assert f"{len(pids) - 1} profiled" in _children_line(r.stderr)
    assert _family_dirs(tmp_path) == []


def test_a_child_sigtermed_while_its_session_starts_still_writes_and_dies_of_it(tmp_path):
    # The parent sends SIGTERM the moment the child has marked itself, before the child's
    # exit-signal watcher exists: the old code lost the child (killed by the default
    # action, no file) in 5 of 5 runs; the exit signals are now held back on the child's
    # only thread until the watcher is there.
    r, out = _record("term-at-start", tmp_path, "--subprocesses")
    truth = _truth(r.stdout)
    assert f"CHILD_SIGNAL {int(signal.SIGTERM)}" in r.stdout.splitlines()  # as it would
    profile = spprof.load(out)
    assert profile.stats["subprocesses_lost"] == 0, profile.metadata["subprocesses_lost"]
    assert [e["pid"] for e in profile.metadata["processes"]] == [truth["root"], *truth["children"]]
    assert "1 profiled" in _children_line(r.stderr)


def test_a_child_that_outlives_the_program_writes_its_own_file_later(tmp_path):
    r, out = _record("outliving", tmp_path, "--subprocesses")
    truth = _truth(r.stdout)
    (child,) = truth["children"]
    profile = spprof.load(out)
    assert profile.metadata["subprocesses_running"] == [child]
    (family,) = _family_dirs(tmp_path)
    assert profile.metadata["subprocesses_dir"] == str(family)
    line = _children_line(r.stderr)
    assert f"1 still running (pid {child})" in line and str(family) in line, line
    late = family / f"{child}.spprof"
    deadline = time.monotonic() + 30
    while not late.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert 1.2 <= _weight_by_pid(spprof.load(late))[0]["spawned_work"] <= 1.8


def test_a_fork_while_another_thread_is_inside_spprof_does_not_hang_the_child(tmp_path):
    """The child's session takes spprof's lock, which the parent's other thread held at the
    fork. Old code (before the child renewed its locks): the child hung at fork, every run
    (deterministic: the lock is held across the fork); the parent waited for it until the
    test's timeout."""
    r, out = _record("fork-while-locked", tmp_path, "--subprocesses", timeout=30)
    (child,) = _truth(r.stdout)["children"]
    assert 0.2 <= _weight_by_pid(spprof.load(out))[child]["forked_child_work"] <= 0.45


def test_a_childs_own_use_of_spprof_sees_no_session_of_spprofs(tmp_path):
    """In a profiled child, spprof's session is invisible to the program: is_active() is
    False, stop() raises as with no session, a Profiler block is a session of its own (not a
    window, which would print that its settings differ); after the block the child is
    profiled for the family again."""
    r, out = _record("program-api", tmp_path, "--subprocesses")
    (child,) = _truth(r.stdout)["children"]
    seen = json.loads((tmp_path / "nested.spprof").read_text())
    assert seen == {
        "active": False,
        "stop": "spprof is not profiling; call spprof.start() first",
        "block_has_block_work": True,
        "block_has_forked_child_work": False,
    }
    assert "differ" not in r.stderr and "session's" not in r.stderr, r.stderr
    work = _weight_by_pid(spprof.load(out))[child]
    assert 0.12 <= work["forked_child_work"] <= 0.45, work
    assert 0.12 <= work["after_block_work"] <= 0.45, work
    assert "block_work" not in work  # the program's own block has it


def test_a_child_that_runs_spprof_itself_gets_its_own_profile(tmp_path):
    r, out = _record("nested", tmp_path, "--subprocesses")
    assert "NESTED exit 0" in r.stdout, (r.stdout, r.stderr)
    nested = spprof.load(tmp_path / "nested.spprof")
    assert sum(s.weight_ns for s in nested.samples if s.frames[-1].filename == "<string>") > 0.1e9
    assert spprof.load(out).sample_count > 0


def test_api_start_with_subprocesses_merges_them_and_restores_the_environment():
    code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass"
    spprof.start(interval_ms=5, subprocesses=True)
    try:
        p = subprocess.Popen([sys.executable, "-c", code])
        p.wait()
    finally:
        profile = spprof.stop()
    assert "SPPROF_SUBPROCESSES" not in os.environ
    by_pid = _weight_by_pid(profile)
    assert 0.12 <= by_pid[p.pid]["<module>"] <= 0.3, dict(by_pid)


def test_profiler_block_with_subprocesses_merges_them():
    code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass"
    with spprof.Profiler(interval_ms=5, subprocesses=True) as prof:
        p = subprocess.Popen([sys.executable, "-c", code])
        p.wait()
    assert prof.profile is not None
    assert 0.12 <= _weight_by_pid(prof.profile)[p.pid]["<module>"] <= 0.3
    assert "SPPROF_SUBPROCESSES" not in os.environ


def test_subprocesses_must_be_a_bool():
    with pytest.raises(ValueError, match="subprocesses must be True or False"):
        spprof.start(subprocesses="yes")  # type: ignore[arg-type]
    assert not spprof.is_active()


def _profile(
    pid: int, cwd: str, rows: list[tuple[int, int, int]], frames: list[str]
) -> ProfileData:
    from spprof._model import Frame

    return ProfileData(
        interval_ms=10,
        mode="cpu",
        duration_ns=100,
        start_ns=rows[0][0],
        frame_table=[Frame(n, "work.py", 1, False, n, 1) for n in frames],
        stacks=[(i,) for i in range(len(frames))],
        rows=b"".join(ROW.pack(ts, 10, stack, serial) for ts, stack, serial in rows),
        thread_table=[ThreadRecord(0, 1, pid, "MainThread", 10, 0, 0)],
        dropped_count=2,
        metadata={"pid": pid, "cwd": cwd},
    )


def test_merge_interns_frames_orders_rows_in_time_and_names_threads_by_process():
    own = _profile(10, "/a", [(100, 0, 0), (300, 1, 0)], ["main", "work"])
    child = _profile(11, "/a", [(200, 0, 0)], ["work"])
    merged = merge(own, [child])
    assert [f.function_name for f in merged.frame_table] == ["main", "work"]  # "work" once
    assert [f.filename for f in merged.frame_table] == ["/a/work.py"] * 2
    assert [
        (s.timestamp_ns, s.frames[-1].function_name, s.thread_name) for s in merged.samples
    ] == [
        (100, "main", "MainThread (pid 10)"),
        (200, "work", "MainThread (pid 11)"),
        (300, "work", "MainThread (pid 10)"),
    ]
    assert merged.dropped_count == 4
    assert [p["pid"] for p in merged.metadata["processes"]] == [10, 11]


APP = """
import time

def handle_request():
    t = time.process_time()
    while time.process_time() - t < 0.02:
        pass

def app(environ, start_response):
    handle_request()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
"""


def _serve_40_requests_then_sigterm(server_args: list[str], port: int, tmp_path: Path) -> Path:
    """`spprof -q --subprocesses -o OUT -m SERVER...` in tmp_path, 40 requests over
    127.0.0.1:port (each must get a 200), then SIGTERM; the profile's path (exit status 0)."""
    out = tmp_path / "server.spprof"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env.pop("SPPROF_DEBUG", None)
    cmd = [sys.executable, "-m", "spprof", "-q", "--subprocesses", "-o", str(out), "-m"]
    server = subprocess.Popen(
        cmd + server_args, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert get_200s(port, 40) == 40, f"{server_args[0]} did not answer"
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    return out


@pytest.mark.skipif(sys.version_info < (3, 10), reason="gunicorn 27 needs 3.10 (Makefile's pin)")
def test_gunicorn_workers_handlers_are_in_the_profile(tmp_path):
    """A pre-fork server: `spprof --subprocesses -m gunicorn -w 2`. Old code: the master only
    (imports), 8-22 samples; the handler nowhere."""
    pytest.importorskip("gunicorn")
    (tmp_path / "app.py").write_text(APP)
    port = free_port()
    out = _serve_40_requests_then_sigterm(
        ["gunicorn", "-w", "2", "-b", f"127.0.0.1:{port}", "app:app"], port, tmp_path
    )
    profile = spprof.load(out)
    by_pid = _weight_by_pid(profile)
    master = profile.metadata["pid"]
    workers = [p for p in by_pid if p != master and by_pid[p]["handle_request"] > 0]
    # 40 requests of 20 ms of CPU: 0.8 s in the workers' handler, none in the master.
    assert sum(by_pid[w]["handle_request"] for w in workers) >= 0.6, dict(by_pid)
    assert "handle_request" not in by_pid[master]
    assert {p["ppid"] for p in profile.metadata["processes"][1:]} == {master}
    assert _family_dirs(tmp_path) == []


@pytest.mark.skipif(sys.version_info < (3, 10), reason="uvicorn 0.54 needs 3.10 (Makefile's pin)")
def test_uvicorn_workers_spawned_by_multiprocessing_are_in_the_profile(tmp_path):
    """`spprof --subprocesses -m uvicorn --workers 2`: the workers are spawned interpreters
    (multiprocessing's spawn), reached through the .pth hook. Old code: "the program used
    less CPU time than one interval"."""
    pytest.importorskip("uvicorn")
    app = (Path(__file__).parent / "scripts" / "uvicorn_app.py").read_text()
    (tmp_path / "asgi_app.py").write_text(app)
    port = free_port()
    args = ["uvicorn", "--workers", "2", "--port", str(port), "--log-level", "warning"]
    out = _serve_40_requests_then_sigterm(
        [*args, "--lifespan", "off", "asgi_app:app"], port, tmp_path
    )
    profile = spprof.load(out)
    by_pid = _weight_by_pid(profile)
    master = profile.metadata["pid"]
    workers = [p for p in by_pid if p != master and by_pid[p]["busy_work"] > 0]
    # 40 requests of 20 ms of CPU: 0.8 s in the workers' busy_work, none in the master.
    assert sum(by_pid[w]["busy_work"] for w in workers) >= 0.6, dict(by_pid)
    assert "busy_work" not in by_pid[master]
    assert _family_dirs(tmp_path) == []


def test_every_format_shows_each_thread_in_its_process(tmp_path):
    """chrome and gecko: a process per pid, named by its command line; pprof: a `pid` label;
    speedscope, collapsed, flame graphs and the report: the thread names say the process."""
    from spprof.output import render
    from test_formats_pprof import Decoded

    r, out = _record("fork", tmp_path, "--subprocesses")
    truth = _truth(r.stdout)
    root, (child,) = truth["root"], truth["children"]
    profile = spprof.load(out)

    chrome = json.loads(render(profile, "chrome"))["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in chrome if e["name"] == "process_name"}
    assert set(processes) == {root, child}, processes
    assert processes[child] == f"{SCRIPT} fork {tmp_path / 'nested.spprof'} (pid {child})"
    track_pids = {e["tid"]: e["pid"] for e in chrome if e["name"] == "thread_name"}
    assert track_pids == {root: root, child: child}  # each main thread's tid is its pid

    gecko = json.loads(render(profile, "gecko"))
    assert {(t["pid"], t["name"], t["isMainThread"]) for t in gecko["threads"]} == {
        (str(root), f"MainThread (pid {root})", True),
        (str(child), f"MainThread (pid {child})", True),
    }

    d = Decoded(render(profile, "pprof"))
    pids = Counter(labels["pid"] for _, _, labels in d.samples)
    assert set(pids) == {root, child}, pids

    speedscope = json.loads(render(profile, "speedscope"))
    names = {p["name"] for p in speedscope["profiles"]}
    assert names == {f"MainThread (pid {p}) (tid {p})" for p in (root, child)}, names


def _alone(tmp_path: Path, name: str, code: str, *flags: str) -> Path:
    out = tmp_path / name
    r = run_python("-m", "spprof", "-q", "-i", "5", *flags, "-o", str(out), "-c", code)
    assert r.returncode == 0, r.stderr
    return out


SPIN_IN = (
    "import time\ndef {f}():\n    t = time.process_time()\n"
    "    while time.process_time() - t < 0.2: pass\n{f}()"
)


def test_report_and_convert_merge_several_files_by_process(tmp_path):
    """Workers profiled separately (or a child that wrote after its root ended): one view."""
    a = _alone(tmp_path, "a.spprof", SPIN_IN.format(f="worker_a"))
    b = _alone(tmp_path, "b.spprof", SPIN_IN.format(f="worker_b"))
    pa, pb = (int(spprof.load(x).metadata["pid"]) for x in (a, b))
    rep = run_python("-m", "spprof", "report", str(a), str(b))
    assert rep.returncode == 0, rep.stderr
    rows = {tuple(line.split()[:2]) for line in rep.stdout.splitlines() if "MainThread" in line}
    assert rows == {("MainThread", str(pa)), ("MainThread", str(pb))}, rep.stdout
    assert "worker_a" in rep.stdout and "worker_b" in rep.stdout
    conv = run_python("-m", "spprof", "convert", str(a), str(b), "-f", "chrome", "-o", "-")
    assert conv.returncode == 0, conv.stderr
    events = json.loads(conv.stdout)["traceEvents"]
    assert {e["pid"] for e in events if e["name"] == "process_name"} == {pa, pb}


def test_diff_takes_several_files_a_side_merged_by_process(tmp_path):
    a, b, c = (_alone(tmp_path, f"{x}.spprof", SPIN_IN.format(f=f"worker_{x}")) for x in "abc")
    r = run_python(
        "-m", "spprof", "diff", "--base", str(a), str(b), "--new", str(a), str(c),
        "-f", "collapsed", "-o", "-",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    # flamegraph.pl's difffolded lines: "stack base_count new_count" (new's total scale).
    counts = {}
    for line in r.stdout.splitlines():
        stack, before, after = line.rsplit(" ", 2)
        leaf = stack.split(";")[-1].split(" ")[0]
        counts[leaf] = (
            counts.get(leaf, (0, 0))[0] + int(before),
            counts.get(leaf, (0, 0))[1] + int(after),
        )
    assert counts["worker_a"][0] > 0 and counts["worker_a"][1] > 0, counts
    assert counts["worker_b"][0] > 0 and counts["worker_b"][1] == 0, counts
    assert counts["worker_c"][0] == 0 and counts["worker_c"][1] > 0, counts
    mixed = run_python("-m", "spprof", "diff", str(a), "--new", str(c))
    assert mixed.returncode == 2
    assert "give BASE NEW, or both --base FILE... and --new FILE..." in mixed.stderr


def test_files_of_different_modes_are_refused_with_a_message(tmp_path):
    a = _alone(tmp_path, "a.spprof", "pass")
    w = _alone(tmp_path, "w.spprof", "pass", "--mode", "wall")
    r = run_python("-m", "spprof", "report", str(a), str(w))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"report: cannot merge {w} (wall mode, 5 ms) with {a} (cpu mode" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_child_that_execs_python_keeps_both_parts(tmp_path):
    """Before: forked_child_work in the forked child; after its exec: spawned_work, the same
    pid. Each part is written on its own, and both are in the profile."""
    r, out = _record("exec", tmp_path, "--subprocesses")
    (child,) = _truth(r.stdout)["children"]
    profile = spprof.load(out)
    by_pid = _weight_by_pid(profile)
    assert 0.2 <= by_pid[child]["forked_child_work"] <= 0.45, by_pid[child]
    assert 0.2 <= by_pid[child]["spawned_work"] <= 0.45, by_pid[child]
    assert [p["pid"] for p in profile.metadata["processes"]].count(child) == 2
    assert profile.stats["subprocesses_profiled"] == 2
    assert _family_dirs(tmp_path) == []


def test_a_child_whose_exec_fails_is_one_process_with_both_parts_of_its_work(tmp_path):
    """The part before the exec is written as the exec begins; the exec fails, the child
    goes on: its session resumes, and the part after is its, under the same single entry."""
    r, out = _record("exec-fails", tmp_path, "--subprocesses")
    (child,) = _truth(r.stdout)["children"]
    assert "EXEC_FAILED" in r.stdout.splitlines()
    profile = spprof.load(out)
    by_pid = _weight_by_pid(profile)
    assert 0.2 <= by_pid[child]["forked_child_work"] <= 0.45, by_pid[child]
    assert 0.2 <= by_pid[child]["after_failed_exec_work"] <= 0.45, by_pid[child]
    assert [p["pid"] for p in profile.metadata["processes"]].count(child) == 1
    assert profile.stats["subprocesses_profiled"] == 1
    assert profile.stats["subprocesses_lost"] == 0
    assert _family_dirs(tmp_path) == []


@pytest.mark.skipif(sys.version_info < (3, 10), reason="Django 5.2 needs 3.10 (Makefile's pin)")
def test_django_runserver_under_its_reloader_has_the_view_in_the_profile(tmp_path):
    """Django's runserver re-runs itself in a child process (its reloader) that serves the
    requests. Old code: the profile held only the reloader's file watcher."""
    pytest.importorskip("django")
    out = tmp_path / "d.spprof"
    port = free_port()
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env.pop("SPPROF_DEBUG", None)
    site = str(SCRIPTS / "django_site.py")
    cmd = [sys.executable, "-m", "spprof", "-q", "--subprocesses", "-o", str(out)]
    cmd += [site, "runserver", str(port)]
    server = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert get_200s(port, 30, host="localhost", retry_s=0.2) == 30, "Django did not answer"
    finally:
        os.killpg(server.pid, signal.SIGINT)  # Ctrl-C: the terminal's whole process group
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    profile = spprof.load(out)
    by_pid = _weight_by_pid(profile)
    reloader = profile.metadata["pid"]
    family = {k: v for k, v in profile.stats.items() if k.startswith("subprocesses")}
    serving = [p for p in by_pid if by_pid[p]["render_report"] > 0]
    assert len(serving) == 1, (serving, family, profile.metadata.get("processes"), stderr)
    served = serving[0]
    # 30 requests of 20 ms of CPU: 0.6 s, in the reloader's child, which ran the same command.
    assert by_pid[served]["render_report"] >= 0.45, dict(by_pid)
    assert served != reloader
    child = next(p for p in profile.metadata["processes"] if p["pid"] == served)
    assert child["ppid"] == reloader and child["argv"][-2:] == ["runserver", str(port)]
    assert _family_dirs(tmp_path) == []


def test_a_child_marking_itself_while_the_root_stops_is_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The root's stop looks at the family directory twice: once for every child it knows,
    then for the running marks. A child still starting that marks itself between the two was
    counted twice as running (seen once in a CI run on 3.9: `[9264, 9264]`). Here the first
    look sees nothing, as in the race; the child is one of the root's live Python children."""
    from spprof import _subprocesses

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        family = tmp_path / "family"
        family.mkdir()
        (family / f"{child.pid}.running").mkdir()
        monkeypatch.setattr(
            _subprocesses, "_family", _subprocesses.Family(str(family), os.getpid(), {})
        )
        real_iterdir = Path.iterdir
        monkeypatch.setattr(Path, "iterdir", lambda p: iter(()) if p == family else real_iterdir(p))
        own = ProfileData(
            interval_ms=10.0, mode="cpu", duration_ns=10**9, start_ns=0, frame_table=[],
            stacks=[], rows=b"", thread_table=[], dropped_count=0, metadata={},
        )  # fmt: skip
        profile = _subprocesses.end(own)
    finally:
        child.kill()
        child.wait()
    assert profile.metadata["subprocesses_running"] == [child.pid]
    assert profile.stats["subprocesses_running"] == 1
