"""Nothing lost at exit: os._exit, os.exec*, a signal.signal round trip, SIGTERM in C code.

Each case runs tests/scripts/exit_paths.py in its own interpreter, under the CLI and with
spprof.start(output_path=...), and checks what a user would: the exit status (or the signal)
is the one the program asked for, the profile file exists and names the work function.
"""

from __future__ import annotations

import gzip
import inspect
import os
import posix
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import spprof

SCRIPT = Path(__file__).parent / "scripts" / "exit_paths.py"
HOLD_C = r"""
#include <time.h>
/* Busy in C for `seconds` without ever releasing the GIL (called through ctypes.PyDLL). */
void hold_gil(double seconds) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= seconds) return;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, 0);
    }
}
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SPPROF_DEBUG"}
    env.update(extra)
    return env


def _default_signals() -> None:
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)


def _command(how: str, out: Path, *args: str) -> list[str]:
    """The script under the CLI (`cli`), or profiling itself with start(output_path=...)."""
    if how == "cli":
        return [sys.executable, "-m", "spprof", "-i", "5", "-o", str(out), str(SCRIPT), *args]
    return [sys.executable, str(SCRIPT), *args, "--api", str(out)]


def _run(how: str, out: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        _command(how, out, *args),
        capture_output=True,
        text=True,
        timeout=120,
        env=env or _env(),
        preexec_fn=_default_signals,
    )


def _seconds(out: Path) -> dict[str, float]:
    """Sampled seconds per function anywhere on the stack, from the file the run wrote. Weights,
    not counts: on a loaded machine the kernel tick delivers fewer signals, each carrying more
    timer expiries, so the count falls while the weight stays the thread's CPU time."""
    seconds: dict[str, float] = {}
    for s in spprof.load(out).samples:
        for name in {f.function_name for f in s.frames}:
            seconds[name] = seconds.get(name, 0.0) + s.weight_ns / 1e9
    return seconds


HOWS = ["cli", "api"]


@pytest.mark.parametrize("how", HOWS)
def test_os_exit_writes_the_profile_then_exits_with_its_status(tmp_path, how):
    out = tmp_path / "p.spprof"
    r = _run(how, out, "exit", "3")
    assert r.returncode == 3, r.stderr
    assert out.exists(), r.stderr  # before: no file, no message
    assert _seconds(out).get("busy_work", 0) >= 0.2, r.stderr  # 0.3 s of CPU
    if how == "cli":
        assert r.stderr.count("Profile written to") == 1, r.stderr


@pytest.mark.parametrize("how", HOWS)
def test_execv_into_a_shell_writes_the_part_before_and_the_shell_decides_the_status(tmp_path, how):
    out = tmp_path / "p.spprof"
    r = _run(how, out, "execv-sh")
    assert r.returncode == 5, r.stderr
    assert _seconds(out).get("busy_work", 0) >= 0.2, r.stderr


@pytest.mark.parametrize("how", HOWS)
def test_execv_into_another_python_runs_it_after_the_profile(tmp_path, how):
    out = tmp_path / "p.spprof"
    r = _run(how, out, "execv-py")
    assert r.returncode == 6, r.stderr
    assert r.stdout.strip() == "EXECED", r.stdout
    assert _seconds(out).get("busy_work", 0) >= 0.2, r.stderr


@pytest.mark.parametrize("how", HOWS)
def test_a_failed_exec_keeps_profiling_and_the_profile_holds_both_parts(tmp_path, how):
    out = tmp_path / "p.spprof"
    r = _run(how, out, "exec-fails")
    assert r.returncode == 4, r.stderr  # the execvp that worked
    assert r.stdout.split("\n")[:2] == ["ENOENT", "FAILED 8"], r.stdout  # ENOEXEC
    counts = _seconds(out)
    assert counts.get("busy_work", 0) >= 0.4, (counts, r.stderr)  # both parts: 2 x 0.3 s
    assert counts.get("after_failed_exec", 0) >= 0.2, (counts, r.stderr)
    profile = spprof.load(out)
    assert {t.name for t in profile.threads} == {"MainThread"}


@pytest.mark.parametrize("how", HOWS)
def test_a_forked_child_calling_os_exit_writes_nothing(tmp_path, how):
    out = tmp_path / "p.spprof"
    r = _run(how, out, "fork-exit")
    assert r.returncode == 0, r.stderr
    assert "CHILD 9" in r.stdout
    profile = spprof.load(out)
    assert profile.metadata["pid"] != 0
    counts = _seconds(out)
    assert counts.get("parent_after_fork", 0) >= 0.13, (counts, r.stderr)  # the parent's 0.2 s
    assert "child_work" not in counts, counts
    if how == "cli":
        assert r.stderr.count("Profile written to") == 1, r.stderr


@pytest.mark.parametrize("how", HOWS)
def test_a_restored_sigterm_handler_still_writes_the_profile_and_dies_by_sigterm(tmp_path, how):
    # uvicorn's shutdown: save the handler, handle one SIGTERM, restore, re-raise.
    plain = subprocess.run(
        [sys.executable, str(SCRIPT), "round-trip"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        preexec_fn=_default_signals,
    )
    assert plain.returncode == -signal.SIGTERM
    out = tmp_path / "p.spprof"
    r = _run(how, out, "round-trip")
    assert r.returncode == -signal.SIGTERM, r.stderr  # as without spprof
    assert r.stdout == plain.stdout  # what signal.signal / getsignal answered, the same
    assert "STILL ALIVE" not in r.stdout
    assert _seconds(out).get("busy_work", 0) >= 0.2, r.stderr  # before: no file


@pytest.fixture(scope="module")
def hold_lib(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hold")
    (d / "hold.c").write_text(HOLD_C)
    lib = d / "libhold.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(d / "hold.c")], check=True)
    return lib


def _sigterm_while_holding(cmd: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run the script's `hold` mode, SIGTERM it 0.5 s after READY (C code holds the GIL):
    (returncode, stdout, stderr)."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_default_signals,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        stdout, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, stdout, err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the wall census is Linux's")
def test_the_dump_written_without_the_gil_keeps_a_wait_as_one_row(tmp_path, hold_lib):
    # Wall mode: a thread blocked from the start, then SIGTERM while C code holds the GIL. The
    # watcher's dump writes the store's rows as held and their counts (format version 2), as
    # stop() exports them; at ef9d17f it wrote a row per census (and with folds no longer
    # bounded by the memory limit, a long wait would have been an allocation per census).
    out = tmp_path / "p.spprof"
    cmd = [sys.executable, "-m", "spprof", "--mode", "wall", "-i", "5", "-o", str(out), str(SCRIPT)]
    returncode, _, err = _sigterm_while_holding(
        [*cmd, "hold"], _env(HOLD_LIB=str(hold_lib), EXIT_PATHS_WAITER="1")
    )
    assert returncode == -signal.SIGTERM, err
    assert gzip.decompress(out.read_bytes())[7] == 2  # the version with folds
    profile = spprof.load(out)
    assert profile.stats.get("written_without_gil") == 1
    waiter = {t.serial for t in profile.thread_table if t.name == "waiter"}
    rows = [r for r in profile.iter_counted() if r[3] in waiter]
    samples = [s for s in profile.samples if s.thread_name == "waiter"]
    # ~0.6 s drained before the GIL was held: a census each 10 ms, in a row or two.
    assert len(rows) <= 3, rows
    # Its start-up runs on a CPU for a ms or so before it waits: a CPU timer's first expiry is at
    # a random phase, so now and then (1 of 8 runs here) that is an on-CPU sample (in _bootstrap).
    busy = [s for s in samples if not s.idle]
    assert len(samples) - len(busy) >= 25, len(samples)
    assert len(busy) <= 2 and all(s.on_cpu for s in busy), busy
    assert sum(r[5] for r in rows) == len(samples)


@pytest.mark.parametrize("how,name", [("cli", "p.spprof"), ("api", "p.collapsed")])
def test_sigterm_while_c_code_holds_the_gil_writes_the_drained_samples(
    tmp_path, hold_lib, how, name
):
    out = tmp_path / name
    returncode, stdout, err = _sigterm_while_holding(
        _command(how, out, "hold"), _env(HOLD_LIB=str(hold_lib))
    )
    assert returncode == -signal.SIGTERM, err
    assert "RETURNED" not in stdout
    # The .spprof file: the output itself, or next to it when its format needs Python.
    written = out if name.endswith(".spprof") else Path(str(out) + ".spprof")
    lines = [line for line in err.splitlines() if line.startswith("spprof: SIGTERM")]
    assert len(lines) == 1, err
    assert "held the GIL" in lines[0] and str(written) in lines[0], lines
    assert not (out.exists() and written != out)  # the collapsed file needs the GIL: not written
    profile = spprof.load(written)
    assert profile.stats.get("written_without_gil") == 1
    counts = _seconds(written)
    assert counts.get("busy_work", 0) >= 0.2, counts  # the 0.3 s before the call, drained
    # `spprof report` reads it.
    rep = subprocess.run(
        [sys.executable, "-m", "spprof", "report", str(written)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert rep.returncode == 0, rep.stderr
    assert "busy_work" in rep.stdout + rep.stderr
    # `spprof convert` too: the format that was asked for, made afterwards.
    folded = tmp_path / "converted.collapsed"
    conv = subprocess.run(
        [sys.executable, "-m", "spprof", "convert", str(written), "-o", str(folded)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert conv.returncode == 0, conv.stderr
    assert "busy_work" in folded.read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_then_sigterm(command: list[str], port: int) -> tuple[int, str]:
    """Start uvicorn, make 25 requests, SIGTERM it; (returncode, stderr)."""
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        preexec_fn=_default_signals,
    )
    try:
        deadline = time.monotonic() + 30
        done = 0
        while done < 25:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
                    assert resp.read() == b"ok"
                done += 1
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        return proc.returncode, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("how", HOWS)
def test_uvicorn_sigtermed_writes_the_profile_and_exits_as_without_spprof(tmp_path, how):
    pytest.importorskip("uvicorn")  # pinned for 3.10+ in the Makefile's DEV_DEPS
    script = str(Path(__file__).parent / "scripts" / "uvicorn_app.py")
    port = _free_port()
    plain_rc, plain_err = _serve_then_sigterm([sys.executable, script, str(port)], port)
    assert plain_rc == -signal.SIGTERM, plain_err
    out = tmp_path / "p.spprof"
    port = _free_port()
    if how == "cli":
        command = [
            sys.executable,
            "-m",
            "spprof",
            "-q",
            "-i",
            "5",
            "-o",
            str(out),
            script,
            str(port),
        ]
    else:
        command = [sys.executable, script, str(port), "--api", str(out)]
    rc, err = _serve_then_sigterm(command, port)
    assert rc == plain_rc, err
    assert _seconds(out).get("busy_work", 0) >= 0.3, err  # 25 x 20 ms of CPU (before: no file)


# ---- in this interpreter: what the program sees of the stand-ins ------------------------------


def test_os_exit_and_exec_read_as_the_builtins_while_profiling(tmp_path):
    names = ("_exit", "execv", "execve")
    before = {n: getattr(os, n) for n in names}
    supports_fd_size = len(os.supports_fd)
    spprof.start(output_path=tmp_path / "p.spprof")
    try:
        for n in names:
            fn, orig = getattr(os, n), before[n]
            assert getattr(posix, n) is fn
            assert type(fn) is type(orig)
            assert fn.__name__ == orig.__name__ and fn.__qualname__ == orig.__qualname__
            assert fn.__module__ == orig.__module__ and fn.__self__ is orig.__self__
            assert fn.__doc__ == orig.__doc__
            assert inspect.signature(fn) == inspect.signature(orig)
        # os.supports_fd & co. are sets of os functions: `os.execve in os.supports_fd` (can it
        # take a descriptor, fexecve) reads as without spprof. Old code: False, and 3.15's
        # test_posix.test_fexecve skipped itself under spprof.
        for attr in ("supports_fd", "supports_dir_fd", "supports_follow_symlinks"):
            group = getattr(os, attr)
            assert all((getattr(os, n) in group) == (before[n] in group) for n in names), attr
        assert (os.execve in os.supports_fd) == sys.platform.startswith("linux")
        # Bad arguments raise what they raise without spprof, and the session goes on.
        with pytest.raises(TypeError) as caught:
            os._exit("3")
        with pytest.raises(TypeError) as plain:
            before["_exit"]("3")
        assert str(caught.value) == str(plain.value)
        with pytest.raises(ValueError):
            os.execv(sys.executable, [])
        with pytest.raises(FileNotFoundError):
            os.execv(str(tmp_path / "missing"), ["missing"])
        assert spprof.is_active()
    finally:
        spprof.stop()
    assert all(getattr(os, n) is before[n] for n in names)  # no cost without a session
    assert len(os.supports_fd) == supports_fd_size  # the stand-ins left the sets
