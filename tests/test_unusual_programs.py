"""Programs that do unusual things to their own process run under spprof as without it (issue 24,
the Python side): the working directory vanishes or changes, the output cannot be written, stderr
is closed or full, the process drops root. Each case runs in its own interpreter and checks what
a user would: the program's exit status, where the profile landed, what it names, stderr.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from conftest import run_python

NOBODY = 65534

# Burns CPU in a function of its own, so a profile that was written names it.
WORK = textwrap.dedent(
    """
    import time
    def unusual_work():
        end = time.thread_time() + 0.15
        while time.thread_time() < end:
            pass
    """
)


def _functions(path: Path) -> set:
    """The function names of a speedscope profile's frames ("name (file:line)" -> "name")."""
    doc = json.loads(path.read_text())
    return {f["name"].split(" ")[0] for f in doc["shared"]["frames"]}


def _script(tmp_path: Path, body: str) -> str:
    """Write prog.py in tmp_path; return its name relative to tmp_path (frames carry it so)."""
    (tmp_path / "prog.py").write_text(WORK + textwrap.dedent(body))
    return "prog.py"


# ---- the working directory -------------------------------------------------------------------


def test_program_that_ends_in_a_directory_it_deleted_exits_0_with_its_profile(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    out = tmp_path / "p.speedscope.json"
    prog = _script(
        tmp_path,
        f"""
        import os
        os.chdir({str(gone)!r})
        os.rmdir({str(gone)!r})
        unusual_work()
        """,
    )
    r = run_python("-m", "spprof", "-o", str(out), prog, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "FileNotFoundError" not in r.stderr
    assert "unusual_work" in _functions(out)


def test_api_session_in_a_deleted_directory_still_writes_at_exit(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    out = tmp_path / "api.speedscope.json"
    (tmp_path / "work.py").write_text(WORK + "unusual_work()\n")
    # run_path("work.py") gives the code a relative file name, as a launcher's would.
    r = run_python(
        "-c",
        textwrap.dedent(
            f"""
            import os, runpy, spprof
            spprof.start(interval_ms=1, output_path={str(out)!r})
            os.chdir({str(gone)!r})
            runpy.run_path(os.path.join("..", "work.py"))
            os.rmdir({str(gone)!r})
            """
        ),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "could not write" not in r.stderr
    assert "unusual_work" in _functions(out)


@pytest.mark.parametrize("elsewhere", ["other", "/proc"])
def test_relative_output_is_resolved_where_spprof_started(tmp_path, elsewhere):
    other = tmp_path / "other"
    other.mkdir()
    target = str(other) if elsewhere == "other" else elsewhere
    prog = _script(tmp_path, f"import os\nos.chdir({target!r})\nunusual_work()\n")
    r = run_python("-m", "spprof", "-o", "rel.speedscope.json", prog, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "unusual_work" in _functions(tmp_path / "rel.speedscope.json")
    assert not (other / "rel.speedscope.json").exists()
    assert "rel.speedscope.json" in r.stderr  # the summary names the file


def test_api_relative_output_path_is_resolved_at_start(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    prog = _script(
        tmp_path,
        f"""
        import os, spprof
        spprof.start(interval_ms=1, output_path="api.speedscope.json")
        os.chdir({str(other)!r})
        unusual_work()
        spprof.stop()
        """,
    )
    r = run_python(prog, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "unusual_work" in _functions(tmp_path / "api.speedscope.json")
    assert not (other / "api.speedscope.json").exists()


# ---- spprof's failures never change the program's exit status ---------------------------------


def _rescued(stderr: str) -> Path:
    """The file a profile that could not go where asked was written to (and is removed)."""
    m = re.search(r"the profile was written to (\S+) instead", stderr)
    assert m, stderr
    return Path(m.group(1))


@pytest.mark.parametrize("program_status", [0, 3])
def test_deleted_output_directory_is_reported_and_the_exit_status_is_the_programs(
    tmp_path, program_status
):
    outdir = tmp_path / "out"
    outdir.mkdir()
    prog = _script(
        tmp_path,
        f"import shutil, sys\nunusual_work()\nshutil.rmtree({str(outdir)!r})\n"
        f"sys.exit({program_status})\n",
    )
    r = run_python("-m", "spprof", "-o", str(outdir / "p.json"), prog, cwd=tmp_path)
    assert r.returncode == program_status, r.stderr
    assert "could not write the profile" in r.stderr
    assert str(outdir) in r.stderr
    # Not lost: written to a private file in the temporary directory, named on stderr. Old
    # code: only the error, no profile anywhere.
    rescued = _rescued(r.stderr)
    try:
        assert rescued.name.endswith("-p.json"), rescued
        assert stat.S_IMODE(rescued.stat().st_mode) == 0o600
        assert "unusual_work" in _functions(rescued)
    finally:
        rescued.unlink()


def test_api_output_whose_directory_went_is_written_to_the_temporary_directory(tmp_path):
    outdir = tmp_path / "out"
    outdir.mkdir()
    (tmp_path / "work.py").write_text(WORK + "unusual_work()\n")
    r = run_python(
        "-c",
        textwrap.dedent(
            f"""
            import runpy, shutil, spprof
            spprof.start(interval_ms=1, output_path={str(outdir / "api.json")!r})
            runpy.run_path("work.py")
            shutil.rmtree({str(outdir)!r})
            """
        ),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "could not write the profile" in r.stderr
    rescued = _rescued(r.stderr)
    try:
        assert "unusual_work" in _functions(rescued)
    finally:
        rescued.unlink()


def test_output_on_a_full_device_is_reported_and_the_program_exits_0(tmp_path):
    prog = _script(tmp_path, "unusual_work()\n")
    r = run_python("-m", "spprof", "-f", "speedscope", "-o", "/dev/full", prog, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "could not write the profile" in r.stderr
    assert "No space left" in r.stderr


@pytest.mark.parametrize(
    "how",
    [
        "sys.stderr.close()",
        "os.close(2)",
        "os.dup2(os.open('/dev/full', os.O_WRONLY), 2)",
        "sys.stderr = None",
    ],
)
def test_program_that_closes_or_fills_stderr_exits_0_with_its_profile(tmp_path, how):
    out = tmp_path / "p.speedscope.json"
    prog = _script(tmp_path, f"import os, sys\nunusual_work()\n{how}\n")
    r = run_python("-m", "spprof", "-o", str(out), prog, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # the summary is stderr's or nothing, never the program's stdout
    assert "unusual_work" in _functions(out)


# ---- the process's identity --------------------------------------------------------------------

needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="changes user: needs root"
)


@pytest.fixture
def public_dir():
    """A directory every user can reach (pytest's tmp_path is under a 0700 directory)."""
    d = Path(tempfile.mkdtemp(prefix="spprof-public-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@needs_root
def test_world_writable_file_in_a_sticky_directory_is_written_after_dropping_root(
    tmp_path, public_dir
):
    sticky = public_dir / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)  # /tmp's mode: anyone creates, only owners rename or delete
    out = sticky / "p.speedscope.json"
    out.write_text("old")
    os.chmod(out, 0o666)  # root's file, writable by all: open(path, "w") works for nobody
    prog = _script(tmp_path, f"import os\nunusual_work()\nos.setuid({NOBODY})\n")
    r = run_python("-m", "spprof", "-o", str(out), prog, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "unusual_work" in _functions(out)
    st = out.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o666)  # the same file, written into
    assert not [p for p in sticky.iterdir() if p.name != out.name]  # no temporary left


@needs_root
def test_setuid_after_start_keeps_the_programs_exit_status_and_says_why(tmp_path):
    outdir = tmp_path / "rootonly"
    outdir.mkdir(mode=0o755)
    os.chmod(outdir, 0o755)
    prog = _script(tmp_path, f"import os\nunusual_work()\nos.setuid({NOBODY})\n")
    r = run_python("-m", "spprof", "-o", str(outdir / "p.json"), prog, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "could not write the profile" in r.stderr
    assert "Permission denied" in r.stderr or "not writable" in r.stderr
    rescued = _rescued(r.stderr)  # as the program's user now (nobody), in /tmp
    try:
        assert rescued.stat().st_uid == NOBODY
        assert "unusual_work" in _functions(rescued)
    finally:
        rescued.unlink()


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 64 KiB tmpfs filled to its last block (mounting needs root and CAP_SYS_ADMIN)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    m = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if m.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {m.stderr.strip()}")
    try:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:  # ENOSPC: full
            pass
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_full_disk_is_refused_before_the_program_runs(tmp_path, full_tmpfs):
    r = run_python(
        "-m", "spprof", "-o", str(full_tmpfs / "p.json"), "-c", "print('the program ran')"
    )
    assert r.returncode == 2, r.stderr  # spprof's usage errors
    assert "the program ran" not in r.stdout
    assert "no space left" in r.stderr.lower()
    assert str(full_tmpfs / "p.json") in r.stderr
    assert r.stderr.count("\n") == 1  # one line


# ---- pytest under the CLI ------------------------------------------------------------------------


@pytest.mark.parametrize("ini", ["[pytest]\nfilterwarnings = error\n", "[pytest]\n"])
def test_spprof_m_pytest_is_clean_with_warnings_as_errors(tmp_path, ini):
    pytest.importorskip("pytest")
    (tmp_path / "pytest.ini").write_text(ini)
    (tmp_path / "test_tiny.py").write_text(
        "def test_adds():\n    assert sum(range(1000)) == 499500\n"
    )
    out = tmp_path / "p.speedscope.json"
    r = run_python(
        "-m",
        "spprof",
        "-q",
        "-o",
        str(out),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout
    assert "PytestAssertRewriteWarning" not in r.stdout + r.stderr
    assert "warning" not in r.stdout.lower()
    assert out.exists()
