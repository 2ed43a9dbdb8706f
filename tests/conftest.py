"""Shared helpers for spprof's behavioural tests.

Tests import the installed `spprof` (make test installs it into one venv per interpreter).
Workload scripts live in tests/scripts/ and run as subprocesses where a test needs a fresh
process (CLI, fork, exit paths).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

import spprof

SCRIPTS = Path(__file__).resolve().parent / "scripts"

# Set by `make test-arm64`: the interpreter runs under qemu-user, which runs code many times
# slower than native and delivers signals only between translated blocks, so a test that holds
# a timing bound cannot hold there (docs/portability.md).
EMULATED = os.environ.get("SPPROF_TEST_EMULATED", "") not in ("", "0")


def skip_when_emulated(reason: str) -> pytest.MarkDecorator:
    """Skip a test under qemu-user emulation, saying why."""
    return pytest.mark.skipif(EMULATED, reason=f"under qemu-user emulation: {reason}")


# Slow tests of pure-Python code that does not depend on the interpreter's version (file
# formats): `make test` runs them on 3.12 only, to keep CI's seven interpreters in budget.
EVERY_VERSION = os.environ.get("SPPROF_TEST_EVERY_VERSION", "") not in ("", "0")


ASAN = bool(os.environ.get("SPPROF_TEST_ASAN"))


def on_one_version(reason: str, asan_too: bool = False) -> pytest.MarkDecorator:
    """Run on CPython 3.12 only (or everywhere with SPPROF_TEST_EVERY_VERSION=1), saying why.
    asan_too: also in the AddressSanitizer suite (whatever its version), for a test whose
    subject is native memory."""
    return pytest.mark.skipif(
        sys.version_info[:2] != (3, 12) and not EVERY_VERSION and not (asan_too and ASAN),
        reason=f"runs on 3.12 only (SPPROF_TEST_EVERY_VERSION=1 for all): {reason}",
    )


def run_python(*args: str, env: dict | None = None, timeout: float = 120, cwd=None, input=None):
    """Run the test interpreter with args; returns CompletedProcess (text mode)."""
    full_env = dict(os.environ)
    full_env.pop("SPPROF_DEBUG", None)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
        input=input,
    )


def build_shared_library(tmp_path: Path, name: str, source: str, *flags: str) -> Path:
    """`source` (C) built as tmp_path/lib<name>.so with $CC or the host's compiler (the test
    is skipped without one)."""
    import shutil

    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("needs a C compiler")
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    lib = tmp_path / f"lib{name}.so"
    subprocess.run([cc, "-shared", "-fPIC", *flags, str(src), "-o", str(lib)], check=True)
    return lib


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_200s(port: int, n: int, host: str = "x", retry_s: float = 0.1, within_s: float = 60) -> int:
    """GET / on 127.0.0.1:port, one connection at a time, until n answered 200 or within_s
    passed (a refused connection: the server is still starting, retried after retry_s);
    how many answered 200."""
    deadline = time.monotonic() + within_s
    answered = 0
    while answered < n and time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                c.sendall(f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
                answered += c.recv(100).split(b" ")[1:2] == [b"200"]
        except OSError:
            time.sleep(retry_s)
    return answered


def self_weight_by_function(samples: Iterable[spprof.Sample]) -> dict[str, int]:
    """Sampled time per leaf function name."""
    out: dict[str, int] = defaultdict(int)
    for s in samples:
        if s.frames:
            out[s.frames[-1].function_name] += s.weight_ns
    return dict(out)


def native_leaf_counts(
    samples: Iterable[spprof.Sample], keep: Callable[[Any], bool]
) -> dict[str, int]:
    """Samples per leaf function name, for native leaves `keep(frame)` accepts."""
    out: dict[str, int] = defaultdict(int)
    for s in samples:
        leaf = s.frames[-1] if s.frames else None
        if leaf is not None and leaf.is_native and keep(leaf):
            out[leaf.function_name] += 1
    return dict(out)


def samples_in(samples: Iterable[spprof.Sample], function_name: str) -> list[spprof.Sample]:
    """Samples with `function_name` anywhere on the stack."""
    return [s for s in samples if any(f.function_name == function_name for f in s.frames)]


@pytest.fixture(autouse=True)
def _no_session_leaks():
    """Every test starts and ends with the profiler stopped."""
    assert not spprof.is_active(), "a previous test left the profiler running"
    yield
    if spprof.is_active():
        spprof.stop()
        pytest.fail("test left the profiler running")
