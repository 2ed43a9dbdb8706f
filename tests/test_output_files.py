"""Output files: what -o and save() do to the path they are given (issue #12).

Regular files are replaced atomically with the mode a new file gets; symlinks, FIFOs and
devices are written through; an output that cannot be written is refused before the program
runs, naming the user's path. Tests may run as root, so refusals use paths that fail for root
too, and device tests try a private node before /dev/null.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import threading

import pytest

import spprof
import workloads as w
from conftest import run_python

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file semantics")

# Writes a marker file: its absence proves the program never ran.
MARKER_CODE = "import sys; open(sys.argv[1], 'w').write('ran')"


@pytest.fixture(scope="module")
def profile() -> spprof.Profile:
    with spprof.Profiler(interval_ms=2) as p:
        w.spin(0.05)
    return p.profile


def _is_speedscope(data: bytes) -> bool:
    return "profiles" in json.loads(data)


def _spprof(out, *cmd: str, cwd=None):
    return run_python("-m", "spprof", "-q", "-o", str(out), *cmd, cwd=cwd)


# ---- regular files: atomic replacement, the umask's mode ---------------------------------------


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_profile_gets_the_umasks_mode(profile, tmp_path, umask, mode):
    out = tmp_path / "p.json"
    old = os.umask(umask)
    try:
        profile.save(out)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert _is_speedscope(out.read_bytes())
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]  # no temporary file left


def test_cli_profile_gets_the_umasks_mode(tmp_path):
    out = tmp_path / "p.json"
    code = "import os, sys, spprof.cli; os.umask(0o022); sys.exit(spprof.cli.main(sys.argv[1:]))"
    r = run_python("-c", code, "-q", "-o", str(out), "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_existing_profile_keeps_its_mode(profile, tmp_path):
    out = tmp_path / "p.json"
    out.write_text("old")
    out.chmod(0o640)
    profile.save(out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert _is_speedscope(out.read_bytes())


# ---- symlinks: written through ---------------------------------------------------------------


def test_symlink_to_a_file_is_written_through(profile, tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "p.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(os.path.join("real", "p.json"))  # relative, as users make them
    profile.save(link)
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "p.json")
    assert _is_speedscope(target.read_bytes())
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["p.json"]


def test_dangling_symlink_creates_its_target(tmp_path):
    target = tmp_path / "made.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    r = _spprof(link, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink()
    assert _is_speedscope(target.read_bytes())


# ---- special files: written through, never replaced --------------------------------------------


def test_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "p.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    # Daemon: if spprof replaced the FIFO, nothing ever opens it for writing.
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    r = _spprof(fifo, "-f", "speedscope", "-c", "pass")
    assert r.returncode == 0, r.stderr
    reader.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and _is_speedscope(got[0])


def _private_null(tmp_path):
    """A character device node like /dev/null in tmp_path, or skip (needs root, a dev mount)."""
    rdev = os.stat("/dev/null").st_rdev
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, rdev)
        os.close(os.open(node, os.O_WRONLY))
    except (OSError, AttributeError) as exc:
        pytest.skip(f"cannot make a working device node here: {exc}")
    return node


def test_character_device_is_written_through(tmp_path):
    node = _private_null(tmp_path)
    r = _spprof(node, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]


def test_dev_null_stays_a_character_device(tmp_path):
    if not stat.S_ISCHR(os.lstat("/dev/null").st_mode):
        pytest.skip("/dev/null is not a character device on this machine already")
    # Guard: a regression must replace this private node, not the system's /dev/null.
    node = _private_null(tmp_path)
    assert _spprof(node, "-c", "pass").returncode == 0
    assert stat.S_ISCHR(os.lstat(node).st_mode), "the private node was replaced"
    r = _spprof("/dev/null", "-c", "print('ran')")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ran\n"
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


# ---- refused before the program runs, naming the user's path -----------------------------------


@pytest.mark.parametrize(
    "make_out",
    [
        pytest.param(lambda d: d / "missing" / "p.json", id="missing-directory"),
        pytest.param(lambda d: d / "file.txt" / "p.json", id="under-a-file"),
        pytest.param(lambda d: d, id="a-directory"),
        pytest.param(lambda d: "/proc/x.json", id="proc"),
    ],
)
def test_unwritable_output_is_refused_before_the_program_runs(tmp_path, make_out):
    if not os.path.isdir("/proc"):
        pytest.skip("no /proc")
    (tmp_path / "file.txt").write_text("")
    out = make_out(tmp_path)
    marker = tmp_path / "ran"
    r = _spprof(out, "-c", MARKER_CODE, str(marker))
    assert r.returncode == 2, r.stderr
    assert f"output path {out}:" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]  # no probe left behind


def test_library_refuses_proc_output_at_start(tmp_path):
    if not os.path.isdir("/proc"):
        pytest.skip("no /proc")
    with pytest.raises(OSError, match=re.escape("output path /proc/x.json:")):
        spprof.start(output_path="/proc/x.json")
    assert not spprof.is_active()
