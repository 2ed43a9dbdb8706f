"""The control channel: `spprof dump PID` and `spprof record --pid PID` against a process that
runs spprof (spprof/_control.py, cli/dump.py, cli/record_pid.py).

Each case starts tests/scripts/control_target.py in its own interpreter (under the CLI or
with spprof.start()) and a private SPPROF_RUNTIME_DIR, and talks to it with the CLI the way
a user would. The target spins in spin() on its main thread and has a thread "waiter"
blocked on an Event at a known line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from conftest import SCRIPTS, run_python

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork"), reason="Unix sockets and the POSIX CLI paths"
)

TARGET = SCRIPTS / "control_target.py"
SOURCE = TARGET.read_text().splitlines()


def line_of(marker: str) -> int:
    return next(i for i, text in enumerate(SOURCE, 1) if marker in text)


WAITER_LINE = line_of("# the waiter's line")
# spin()'s loop, every line of it: the stacks are taken between two bytecodes.
SPIN_LINES = set(range(line_of("    while True:"), line_of("# the spinner's line") + 2))
LOOK_LINE = line_of("if os.path.exists(STOP):")


class Target:
    """control_target.py running under spprof; stop() ends it and returns its output."""

    def __init__(
        self,
        tmp: Path,
        how: str = "cli",
        env: Optional[dict[str, str]] = None,
        cli_args: tuple[str, ...] = (),
    ):
        self.dir = tmp / "shared"
        self.dir.mkdir()
        self.env = dict(os.environ, **(env or {}))
        self.env.setdefault("SPPROF_RUNTIME_DIR", str(tmp / "run"))
        self.env.pop("SPPROF_DEBUG", None)
        if how == "cli":
            out = str(self.dir / "cli.spprof")
            args = ["-m", "spprof", "-q", *cli_args, "-o", out, str(TARGET), str(self.dir)]
        else:
            args = [str(TARGET), str(self.dir), how]
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready = self.dir / "ready"
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the target never got ready"
            time.sleep(0.02)
        self.pid = int(ready.read_text())

    def spprof(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return run_python("-m", "spprof", *args, env=self.env, timeout=timeout)

    def stop(self) -> tuple[str, str]:
        (self.dir / "stop").touch()
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def target(tmp_path: Path):
    t = Target(tmp_path)
    yield t
    t.kill()


def dump_json(t: Target) -> dict[str, Any]:
    r = t.spprof("dump", str(t.pid), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_dump_names_each_thread_its_line_and_whether_it_was_on_a_cpu(target: Target):
    answer = dump_json(target)
    assert answer["pid"] == target.pid
    by_name = {t["name"]: t for t in answer["threads"]}
    # The program's two threads, and nothing of spprof's (the drain thread that answers).
    assert sorted(by_name) == ["MainThread", "waiter"], answer
    main, waiter = by_name["MainThread"], by_name["waiter"]
    assert main["native_id"] == target.pid and main["main"] is True
    # The stacks are taken with the GIL ours: the spinner is where it let the GIL go (the
    # flag's stat, inside os.path.exists) or between two bytecodes of its loop.
    mine = [(f["function"], f["line"]) for f in main["frames"] if f["file"] == str(TARGET)]
    assert mine[0][0] == "spin" and mine[0][1] in SPIN_LINES | {LOOK_LINE}, main["frames"]
    assert [f for f, _ in mine] == ["spin", "<module>"], main["frames"]
    # The CLI's runner under the program (runpy, spprof's own files) is not shown.
    assert main["frames"][-1]["function"] == "<module>", main["frames"]
    assert main["state"] == "running" and main["cpu_pct"] >= 10, main  # less under load
    assert [f["function"].rsplit(".", 1)[-1] for f in waiter["frames"][:1]] == ["wait"]
    mine = [f for f in waiter["frames"] if f["file"] == str(TARGET)]
    assert [(f["function"], f["line"]) for f in mine] == [("waiting", WAITER_LINE)]
    assert waiter["state"] == "idle" and waiter["cpu_pct"] <= 2, waiter
    out, _ = target.stop()
    assert out == ""  # the program printed nothing of ours


def test_dump_as_text_reads_like_py_spy_dump(target: Target):
    r = target.spprof("dump", str(target.pid))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Process {target.pid}: {TARGET} {target.dir}"
    heads = [ln for ln in lines if ln.startswith("Thread ")]
    assert heads[0].startswith(f'Thread {target.pid} "MainThread" (running, ')
    assert heads[1].startswith("Thread ") and '"waiter" (idle, ' in heads[1]
    assert f"    waiting ({TARGET}:{WAITER_LINE})" in lines


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="native frames: Linux here")
def test_dump_of_a_native_session_gives_the_last_sample_with_c_frames_and_the_gil(
    tmp_path: Path,
):
    # Issue 25: "on-CPU / idle / holding the GIL, ... native frames when the session has
    # them". The main thread hashes 1 MiB buffers (OpenSSL's SHA-256, GIL let go); the dump
    # adds each sampled thread's last sample of its span: C frames under `hash_spin`, and
    # whether it held the GIL. Old code: neither (sys._current_frames has no C frames).
    t = Target(tmp_path, env={"CONTROL_TARGET_SPIN": "hash"}, cli_args=("--native", "-i", "2"))
    try:
        for _ in range(3):  # the flag's look every 50 ms of CPU may be the last sample: rare
            answer = dump_json(t)
            main = next(th for th in answer["threads"] if th["main"])
            last = main["last_sample"]
            if any(f["function"] == "hash_spin" for f in last["frames"]):
                break
        assert 0 <= last["age_ms"] < 5000, last
        assert last["gil"] in (True, False), last
        names = [(f["function"], f["native"]) for f in last["frames"]]
        at = names.index(("hash_spin", False))
        # Leaf first: the hash's C frames above hash_spin, then spin and the module below it.
        assert at > 0 and all(native for _, native in names[:at]), names
        assert [n for n, native in names[at:] if not native][:3] == [
            "hash_spin",
            "spin",
            "<module>",
        ]
        # The waiter, blocked since start, drew no sample in a CPU session: no last sample.
        waiter = next(th for th in answer["threads"] if th["name"] == "waiter")
        assert "last_sample" not in waiter, waiter
        # The text: the same, when the last sample has C frames (one taken in hash_spin's own
        # bytecode has none, and the Python stack above says it all; ASan slows that loop).
        for _ in range(3):
            text = t.spprof("dump", str(t.pid))
            assert text.returncode == 0, text.stderr
            lines = text.stdout.splitlines()
            if any(ln.startswith("  last sample, ") for ln in lines):
                break
        head = next(ln for ln in lines if ln.startswith(f"Thread {t.pid} "))
        assert "holding the GIL" in head, lines
        at = lines.index(head)
        native = lines.index(next(ln for ln in lines if ln.startswith("  last sample, ")))
        assert at < native, lines  # the main thread's, listed first
        assert any(ln.startswith("    hash_spin (") for ln in lines[native:]), lines
        t.stop()
    finally:
        t.kill()


def test_record_pid_writes_a_window_of_the_next_seconds_in_the_format_asked(target: Target):
    out = target.dir / "window.collapsed"
    t0 = time.monotonic()
    r = target.spprof("record", "--pid", str(target.pid), "--duration", "1", "-o", str(out))
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert 1.0 <= took < 20, took
    stacks = {}
    for row in out.read_text().splitlines():
        stack, count = row.rsplit(" ", 1)
        stacks[stack] = int(count)
    total_s = sum(stacks.values()) / 1e6  # collapsed weights: microseconds of CPU
    # Up to one second of the spinning main thread's CPU (less on a loaded machine: CI runs
    # two suites on two cores), all of it inside spin().
    assert 0.2 <= total_s <= 1.3, stacks
    assert all(";spin (" in s for s in stacks), stacks
    assert "samples over" in r.stderr and str(out) in r.stderr  # the summary
    # The window's .spprof hand-over file is gone from the runtime directory.
    assert sorted(p.name for p in Path(target.env["SPPROF_RUNTIME_DIR"]).iterdir()) == [
        f"{target.pid}.sock"
    ]
    target.stop()
    # The session's own profile is whole: the window took nothing from it.
    assert (target.dir / "cli.spprof").stat().st_size > 0


def test_record_pid_without_duration_ends_at_ctrl_c_and_still_writes(target: Target):
    out = target.dir / "window.collapsed"
    client = subprocess.Popen(
        [sys.executable, "-m", "spprof", "record", "-p", str(target.pid), "-o", str(out)],
        env=target.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    client.send_signal(signal.SIGINT)
    _, err = client.communicate(timeout=30)
    assert client.returncode == 0, err
    assert err.startswith(f"spprof: recording process {target.pid}; Ctrl-C to stop"), err
    total_s = sum(int(row.rsplit(" ", 1)[1]) for row in out.read_text().splitlines()) / 1e6
    # Up to ~1.3 s of CPU after connecting (less under load); the window did end.
    assert 0.1 <= total_s <= 2.5, total_s


def test_a_session_started_with_spprof_start_answers_and_counts_its_requests(tmp_path: Path):
    t = Target(tmp_path, how="api")
    try:
        assert dump_json(t)["pid"] == t.pid
        r = t.spprof("record", "--pid", str(t.pid), "-d", "0.5", "-o", str(t.dir / "w.json"))
        assert r.returncode == 0, r.stderr
        sock = Path(t.env["SPPROF_RUNTIME_DIR"]) / f"{t.pid}.sock"
        assert sock.exists()
        out, _ = t.stop()
    finally:
        t.kill()
    stats = eval(out)
    assert stats["control_requests"] == 2 and stats["control_errors"] == 0, stats
    assert not sock.exists()  # stop() removed it
    r = t.spprof("dump", str(t.pid))
    assert r.returncode == 2
    assert r.stderr.strip() == f"spprof: error: no process with id {t.pid}"


@pytest.mark.parametrize(
    "args, message",
    [
        (["dump", "x1"], "a process id is a positive whole number, got 'x1'"),
        (["record", "--pid", "{pid}", "--mode", "wall"], "--mode cannot change them"),
        (["record", "--pid", "{pid}", "-i", "5"], "-i cannot change them"),
        (["record", "--pid", "{pid}", "x.py"], "give no program to run"),
        (["record", "--duration", "2", "-c", "pass"], "--duration goes with --pid"),
        (["record", "--pid", "{pid}", "-d", "0"], "duration must be 0-3600 seconds"),
        (["top", "{pid}", "-d", "0.1"], "--delay must be 0.2-60 seconds"),
    ],
)
def test_bad_requests_get_one_line_and_exit_2(target: Target, args: list[str], message: str):
    r = target.spprof(*[a.format(pid=target.pid) for a in args])
    assert r.returncode == 2, r.stdout
    assert r.stderr.count("spprof: error:") == 1 and message in r.stderr, r.stderr


def test_a_process_not_running_spprof_or_gone_is_named_as_such(tmp_path: Path):
    env = {"SPPROF_RUNTIME_DIR": str(tmp_path / "run")}
    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        r = run_python("-m", "spprof", "dump", str(plain.pid), env=env)
    finally:
        plain.kill()
        plain.wait()
    assert r.returncode == 2
    assert f"process {plain.pid} is not running spprof" in r.stderr, r.stderr
    assert f"SPPROF_RUNTIME_DIR={tmp_path / 'run'}" not in r.stderr  # the dir does not exist
    r = run_python("-m", "spprof", "dump", str(plain.pid), env=env)
    assert r.stderr.strip() == f"spprof: error: no process with id {plain.pid}"


def test_a_runtime_directory_others_may_enter_is_refused_and_the_program_runs(tmp_path: Path):
    shared = tmp_path / "run"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    t = Target(tmp_path, env={"SPPROF_RUNTIME_DIR": str(shared)})
    try:
        assert list(shared.iterdir()) == []  # no socket where others could reach it
        r = t.spprof("dump", str(t.pid))
        t.stop()
    finally:
        t.kill()
    assert r.returncode == 2
    assert f"{shared} is not a private directory of uid {os.getuid()}" in r.stderr, r.stderr
    assert (t.dir / "cli.spprof").stat().st_size > 0  # profiled all the same


PEER_OF_ANOTHER_UID = """
import json, os, socket, sys, time
import spprof
import spprof._control as control
spprof.start()
real = os.getuid()
class OtherUid:  # the channel's own uid, as another user's peer would see it
    def __getattr__(self, name):
        return (lambda: real + 4242) if name == "getuid" else getattr(os, name)
path = control.socket_path(control.runtime_dir(create=False), os.getpid())
control.os = OtherUid()
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.sendall(b'{"cmd": "dump"}\\n')
s.settimeout(10)
try:
    got = s.recv(100)
except ConnectionResetError:  # closed with our request unread
    got = b""
control.os = os
p = spprof.stop()
print(json.dumps({"got": got.decode(), "refused": p.stats["control_refused_peers"],
                  "requests": p.stats["control_requests"]}))
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="SO_PEERCRED; macOS reads LOCAL_PEERCRED"
)
def test_a_peer_of_another_uid_is_refused_before_it_is_read(tmp_path: Path):
    r = run_python("-c", PEER_OF_ANOTHER_UID, env={"SPPROF_RUNTIME_DIR": str(tmp_path / "r")})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"got": "", "refused": 1, "requests": 0}


class _FakeConn:
    """A connected socket as getsockopt sees it: the credentials the kernel would give."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.asked: list[tuple[int, int, int]] = []

    def getsockopt(self, level: int, option: int, size: int) -> bytes:
        self.asked.append((level, option, size))
        return self.raw


def test_the_macos_peer_uid_is_read_from_xucred(monkeypatch):
    # macOS cannot be run here; its branch is run on Linux with the layout of its SDK
    # (MacOSX 12.0 sys/un.h: SOL_LOCAL 0, LOCAL_PEERCRED 0x001; sys/ucred.h: struct xucred
    # {u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16];}).
    import struct

    from spprof import _control

    xucred = struct.pack("IIh16I", 0, 501, 1, 20, *([0] * 15))
    assert len(xucred) == 76  # the C struct's size, padding after cr_ngroups included
    monkeypatch.setattr(_control.sys, "platform", "darwin")
    assert _control._peercred("darwin") == (0, 0x001, 76)
    monkeypatch.setattr(_control, "_PEERCRED", _control._peercred("darwin"))
    conn = _FakeConn(xucred)
    assert _control.peer_uid(conn) == 501  # type: ignore[arg-type]
    assert conn.asked == [(0, 0x001, 76)]


DAEMON_CLOSES_FDS = """
import json, os, socket, sys, time
import spprof
import spprof._control as control
spprof.start()
path = control.socket_path(control.runtime_dir(create=False), os.getpid())
os.closerange(3, 65536)  # a daemon that closes what it did not open
r, w = os.pipe()  # and takes the low numbers again
time.sleep(0.3)  # drain wake-ups: the channel finds its socket gone
try:
    socket.socket(socket.AF_UNIX).connect(path)
    connected = True
except OSError:
    connected = False
p = spprof.stop()
print(json.dumps({"lost": p.stats["control_fd_lost"], "connected": connected,
                  "pipe_still_open": os.fstat(r) is not None}))
"""


def test_a_daemon_that_closes_every_fd_loses_the_channel_and_nothing_else(tmp_path: Path):
    r = run_python("-c", DAEMON_CLOSES_FDS, env={"SPPROF_RUNTIME_DIR": str(tmp_path / "r")})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out == {"lost": 1, "connected": False, "pipe_still_open": True}, out
    assert r.stderr == ""


FORKED = """
import json, os, socket, sys
import spprof
import spprof._control as control
spprof.start()
def sockets():
    return sorted(fd for fd in os.listdir("/proc/self/fd")
                  if os.path.exists("/proc/self/fd/" + fd)
                  and os.readlink("/proc/self/fd/" + fd).startswith("socket:"))
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, json.dumps(sockets()).encode())
    os._exit(0)
os.close(w)
child = json.loads(os.read(r, 1000))
os.waitpid(pid, 0)
directory = control.runtime_dir(create=False)
print(json.dumps({"child_sockets": child, "files": sorted(os.listdir(directory)),
                  "parent_sockets": len(sockets()), "me": os.getpid(), "child": pid}))
sys.stdout.flush()
import subprocess
r = subprocess.run([sys.executable, "-m", "spprof", "dump", str(os.getpid()), "--json"],
                   capture_output=True, text=True)
print(r.returncode, file=sys.stderr)
spprof.stop()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
def test_a_forked_child_has_no_copy_of_the_socket_and_the_parent_still_answers(tmp_path: Path):
    r = run_python("-c", FORKED, env={"SPPROF_RUNTIME_DIR": str(tmp_path / "r")})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["child_sockets"] == [] and out["parent_sockets"] == 1, out
    assert out["files"] == [f"{out['me']}.sock"], out
    assert r.stderr.strip() == "0"  # the parent answered its dump after the fork


def test_top_draws_a_screen_on_a_terminal_and_q_leaves_the_target_untouched(target: Target):
    import fcntl
    import select
    import struct
    import termios

    main_fd, tty_fd = os.openpty()
    fcntl.ioctl(tty_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    client = subprocess.Popen(
        [sys.executable, "-m", "spprof", "top", str(target.pid)],
        env=target.env,
        stdin=tty_fd,
        stdout=tty_fd,
        stderr=tty_fd,
        start_new_session=True,
    )
    os.close(tty_fd)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        # The first screen: drawn in place (cleared first), ended by the total-time list.
        while b"<module> (" not in seen.split(b"%TOTAL")[-1] or b"%TOTAL" not in seen:
            assert time.monotonic() < deadline, seen
            if select.select([main_fd], [], [], 1.0)[0]:
                seen += os.read(main_fd, 65536)
        os.write(main_fd, b"q")
        client.wait(timeout=15)
    finally:
        if client.poll() is None:
            client.kill()
        os.close(main_fd)
    assert client.returncode == 0
    text = seen.decode()
    assert text.startswith("\x1b[H\x1b[2J"), text[:40]
    assert f"spprof top - process {target.pid}: {TARGET}" in text
    main = next(ln for ln in text.splitlines() if ln.strip().startswith("MainThread"))
    assert float(main.split()[-1].rstrip("%")) >= 10, main
    self_list = text.split("%SELF")[1].split("%TOTAL")[0]
    assert self_list.splitlines()[1].split()[-2] == "spin", self_list
    # The target went on as before and ends as it would.
    assert target.proc.poll() is None
    out, _ = target.stop()
    assert out == ""


def test_top_into_a_pipe_prints_n_screens_one_after_another(target: Target):
    r = target.spprof("top", str(target.pid), "-n", "2", "-d", "0.5")
    assert r.returncode == 0, r.stderr
    assert "\x1b[" not in r.stdout  # no terminal: no redraw
    heads = [ln for ln in r.stdout.splitlines() if ln.startswith("spprof top - process")]
    assert len(heads) == 2, r.stdout
    assert r.stdout.count("  spin (") == 4, r.stdout  # by self and by total, twice


FAMILY = """
import os, signal, sys, time
shared = sys.argv[1]
ended = []
signal.signal(signal.SIGCHLD, lambda *_: ended.append(1))
def child_work():
    end = time.monotonic() + 60
    look = 0.0  # the flag every 50 ms of CPU: see control_target.py's spin()
    while time.monotonic() < end:
        if time.thread_time() >= look:
            if os.path.exists(os.path.join(shared, "stop")):
                return
            look = time.thread_time() + 0.05
        sum(i * i for i in range(20000))  # the worker's line
pid = os.fork()
if pid == 0:
    open(os.path.join(shared, "child.tmp"), "w").write(str(os.getpid()))
    os.rename(os.path.join(shared, "child.tmp"), os.path.join(shared, "child"))
    child_work()
    os._exit(0)
# A loop, as a pre-fork server's master has: on 3.13+ spprof's threads (the drain, which
# answers) come back at the parent's next bytecode after os.fork (docs/usage.md). Its only
# call that lets the GIL go is the sleep (a waitpid in the loop's test let it go too, and a
# dump once found the master there, on 3.9 under load).
while not ended:
    time.sleep(0.05)  # the master's line
os.waitpid(pid, 0)
"""


def test_with_subprocesses_a_forked_worker_answers_for_itself(tmp_path: Path):
    shared = tmp_path / "shared"
    shared.mkdir()
    script = tmp_path / "family.py"
    script.write_text(FAMILY)
    env = dict(os.environ, SPPROF_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("SPPROF_DEBUG", None)
    out = tmp_path / "all.spprof"
    root = subprocess.Popen(
        [sys.executable, "-m", "spprof", "-q", "--subprocesses", "-o", str(out), str(script),
         str(shared)],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (shared / "child").exists():
            assert root.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        worker = int((shared / "child").read_text())
        r = run_python("-m", "spprof", "dump", str(worker), "--json", env=env)
        root_dump = run_python("-m", "spprof", "dump", str(root.pid), "--json", env=env)
    finally:
        (shared / "stop").touch()
        _, err = root.communicate(timeout=60)
    assert root.returncode == 0, err
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["pid"] == worker
    frames = answer["threads"][0]["frames"]
    assert "child_work" in [f["function"] for f in frames], frames
    assert root_dump.returncode == 0, root_dump.stderr
    (root_main,) = json.loads(root_dump.stdout)["threads"]
    wait_line = next(i for i, ln in enumerate(FAMILY.splitlines(), 1) if "master's line" in ln)
    top = root_main["frames"][0]
    assert (top["function"], top["line"], root_main["state"]) == ("<module>", wait_line, "idle")


attach_needs_314 = pytest.mark.skipif(
    sys.version_info < (3, 14), reason="sys.remote_exec (PEP 768) is CPython 3.14+"
)


@attach_needs_314
def test_attach_profiles_a_process_started_without_spprof_then_leaves_it_as_it_was(
    tmp_path: Path,
):
    t = Target(tmp_path, how="plain")
    try:
        out = t.dir / "attached.spprof"
        r = t.spprof("attach", str(t.pid), "-d", "1", "--mode", "wall", "-i", "5", "-o", str(out))
        assert r.returncode == 0, r.stderr
        after = t.spprof("dump", str(t.pid))
        printed, err = t.stop()
    finally:
        t.kill()
    import spprof

    profile = spprof.load(str(out))
    assert (profile.mode, profile.interval_ms) == ("wall", 5)
    leaves = {s.frames[-1].function_name for s in profile.samples if s.thread_name == "MainThread"}
    assert leaves <= {"spin", "exists", "thread_time"} and "spin" in leaves, leaves
    assert 0.6 <= profile.duration_ns / 1e9 <= 2.0, profile.duration_ns
    # Detached: the session attach started is gone, and the program ends as it would have,
    # printing what it prints (spprof stays imported: a module cannot be unloaded).
    assert after.returncode == 2 and "is not running spprof" in after.stderr, after.stderr
    assert (printed, err) == ("ended True\n", "")
    assert sorted(p.name for p in Path(t.env["SPPROF_RUNTIME_DIR"]).iterdir()) == []


@attach_needs_314
def test_attach_to_a_process_that_runs_spprof_already_says_use_record_pid(target: Target):
    r = target.spprof("attach", str(target.pid), "-d", "1")
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"spprof: error: process {target.pid} runs spprof already: "
        f"use `spprof record --pid {target.pid}`"
    )


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="3.14+ has sys.remote_exec")
def test_attach_before_3_14_says_what_to_do_instead(target: Target):
    r = target.spprof("attach", str(target.pid), "-d", "1")
    assert r.returncode == 2
    v = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert r.stderr.strip() == (
        "spprof: error: attach needs CPython 3.14 or later (sys.remote_exec, PEP 768); this is "
        f"CPython {v}: run the program under `python -m spprof`, or call spprof.start() in it"
    )


def test_a_window_that_may_be_ended_early_still_ends_at_its_time(target: Target):
    # record --pid without -d asks for a window the client may end; one it does not end
    # ends at its seconds all the same, the client having said nothing meanwhile.
    import socket as sk

    path = Path(target.env["SPPROF_RUNTIME_DIR"]) / f"{target.pid}.sock"
    with sk.socket(sk.AF_UNIX, sk.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(b'{"cmd": "window", "seconds": 0.5, "until_end": true}\n')
        t0 = time.monotonic()
        answer = json.loads(s.makefile("rb").readline())
    assert answer["ok"] is True and answer["samples"] > 0, answer
    assert 0.5 <= time.monotonic() - t0 < 5
    os.unlink(answer["path"])
