"""The sampling signal handler provably does not allocate, lock, or call the Python API.

An LD_PRELOAD shim (tests/native_shim/sigshim.c, compiled here with gcc) wraps sigaction() so
that every SIGPROF handler runs behind a trampoline raising a per-thread flag, and interposes
malloc & co., pthread_mutex_lock, rwlocks, dl_iterate_phdr, dladdr and (x86-64, shared
libpython) every CPython API function the extension imports. Anything entered while the
flag is up is a violation, counted per function, reported at exit. Negative controls make
the trampoline itself allocate, lock or call the Python API, proving each check can fail.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import spprof
import spprof._ext
from conftest import SCRIPTS, run_python
from test_reliability_common import figure, result_of, scale

SHIM_SOURCE = Path(__file__).resolve().parent / "native_shim" / "sigshim.c"
# The CPython functions the handler may call, each a lock-free read (checked in CPython's
# pystate.c for 3.9-3.13): this thread's own state from TSS, and "does this thread hold the
# GIL" (the GIL holder's atomic on 3.9-3.11, libpython's initial-exec thread-local on 3.12+).
# Adding a name here needs the same check.
# Each a plain load: the thread's TSS entry, the GIL holder (3.9-3.11) or libpython's
# thread-local attached state (3.12+), the GIL holder (3.9-3.11), the main interpreter, an
# interpreter's id field.
ALLOWED_PYAPI = {
    "PyGILState_GetThisThreadState",
    "PyGILState_Check",
    "_PyThreadState_UncheckedGet",
    "PyInterpreterState_Main",
    "PyInterpreterState_GetID",
}

# The compiler for this interpreter's machine (make test-arm64 sets the cross compiler).
CC = os.environ.get("CC", "gcc")

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD shim: Linux"),
    pytest.mark.skipif(shutil.which(CC) is None, reason="needs gcc (or $CC) to build the shim"),
    pytest.mark.skipif(
        "asan" in str(sys.argv) or bool(os.environ.get("SPPROF_TEST_ASAN")),
        reason="the sanitizer runtime already interposes malloc",
    ),
]


def _nm(path: str, *flags: str) -> list[tuple[str, str]]:
    out = subprocess.run(
        ["nm", "-D", *flags, path], capture_output=True, text=True, check=True
    ).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            rows.append((parts[-2], parts[-1].split("@")[0]))
    return rows


def _libpython() -> str | None:
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None  # API functions live in the executable: LD_PRELOAD cannot interpose them
    name = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
    path = Path(sysconfig.get_config_var("LIBDIR") or "") / name
    return str(path) if path.exists() else None


def pyapi_functions() -> list[str]:
    """CPython functions the extension imports (data symbols excluded), plus the control's."""
    lib = _libpython()
    if lib is None or platform.machine() != "x86_64" or shutil.which("nm") is None:
        return []
    wanted = {name for kind, name in _nm(spprof._ext.__file__, "--undefined-only")}
    functions = {name for kind, name in _nm(lib, "--defined-only") if kind in ("T", "t", "W")}
    return sorted((wanted & functions) | {"Py_IsInitialized"})


def stubs_asm(names: list[str]) -> str:
    """x86-64 stubs: count the call when inside a handler, then jump to the real function.

    Only %r11 and the flags are touched (never %rax: variadic calls pass a count in %al).
    """
    out = [".text"]
    for i, name in enumerate(names):
        out += [
            f".globl {name}",
            f".type {name}, @function",
            f"{name}:",
            "  movq shim_in_handler@gottpoff(%rip), %r11",
            "  movl %fs:(%r11), %r11d",
            "  testl %r11d, %r11d",
            "  jz 1f",
            f"  lock incq shim_pyapi_hits+{8 * i}(%rip)",
            "1:",
            f"  jmp *shim_pyapi_real+{8 * i}(%rip)",
            f".size {name}, .-{name}",
        ]
    out += [
        '.section .data.rel.ro,"aw"',
        ".p2align 3",
        ".globl shim_pyapi_names",
        ".hidden shim_pyapi_names",
        "shim_pyapi_names:",
    ]
    out += [f"  .quad .Lname{i}" for i in range(len(names))] or ["  .quad 0"]
    out += [
        ".section .rodata",
        ".p2align 2",
        ".globl shim_pyapi_count",
        ".hidden shim_pyapi_count",
        f"shim_pyapi_count: .long {len(names)}",
    ]
    out += [f'.Lname{i}: .asciz "{name}"' for i, name in enumerate(names)]
    out += ['.section .note.GNU-stack,"",@progbits', ""]
    return "\n".join(out)


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> tuple[Path, list[str]]:
    d = tmp_path_factory.mktemp("shim")
    names = pyapi_functions()
    sources = [str(SHIM_SOURCE)]
    if platform.machine() == "x86_64":
        (d / "pyapi_stubs.S").write_text(stubs_asm(names))
        sources.append(str(d / "pyapi_stubs.S"))
    else:  # no stubs: an empty table
        (d / "pyapi_empty.c").write_text(
            '__attribute__((visibility("hidden"))) const char* const shim_pyapi_names[1];\n'
            '__attribute__((visibility("hidden"))) const int shim_pyapi_count = 0;\n'
        )
        sources.append(str(d / "pyapi_empty.c"))
    so = d / "sigshim.so"
    subprocess.run(
        [CC, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(so), *sources, "-ldl"],
        check=True,
        capture_output=True,
        text=True,
    )
    return so, names


def run_under_shim(shim, tmp_path, script_args, selftest="", timeout=180):
    so, _ = shim
    report = tmp_path / "shim-report.json"
    env = {"LD_PRELOAD": str(so), "SIGSHIM_REPORT": str(report), "SIGSHIM_SELFTEST": selftest}
    proc = run_python(*script_args, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report.exists(), "the shim wrote no report (not preloaded?)"
    return proc, json.loads(report.read_text())


def _supported(**kwargs) -> bool:
    try:
        spprof.start(**kwargs)
    except NotImplementedError:
        return False
    spprof.stop()
    return True


@pytest.mark.parametrize(
    ("timer", "mode", "native"),
    [
        ("thread", "cpu", ""),
        ("itimer", "cpu", ""),
        ("auto", "wall", ""),
        ("thread", "cpu", "native"),
    ],
)
def test_handler_never_allocates_locks_or_calls_the_python_api(shim, tmp_path, timer, mode, native):
    if not _supported(mode=mode, native=bool(native)):
        pytest.skip(f"mode={mode} native={bool(native)} not implemented in this build")
    # Thousands of samples in the main variant; the others are shorter to bound CI time.
    main_variant = (timer, mode, native) == ("thread", "cpu", "")
    seconds = scale(5.0 if main_variant else 2.5, 40.0)  # of process CPU time
    proc, rep = run_under_shim(
        shim,
        tmp_path,
        [str(SCRIPTS / "rel_shim_workload.py"), str(seconds), timer, mode, native or "python"],
    )
    res = result_of(proc.stdout)
    figure(
        f"signal_safety[{timer},{mode}{',native' if native else ''}]",
        seconds=seconds,
        handler_entries=rep["entries"],
        handler_threads=rep["threads"],
        samples=res["samples"],
        threads_seen=res["threads_seen"],
        pyapi_stubbed=rep["pyapi_stubbed"],
        pyapi_in_handler=rep["pyapi"],
    )
    # the shim saw the handler run, often and on several threads
    assert rep["entries"] >= scale(1000 if main_variant else 400, 8000), rep
    assert rep["entries"] >= res["signals"] > 0
    assert rep["threads"] >= 4, rep
    # ... and it never allocated, locked, or called into the loader or Python
    assert all(v == 0 for v in rep["violations"].values()), rep
    assert set(rep["pyapi"]) <= ALLOWED_PYAPI, rep
    if rep["pyapi_stubbed"]:
        # the one allowed call proves the stubs intercept the extension's calls
        assert rep["pyapi"].get("PyGILState_GetThisThreadState", 0) > 0, rep
    # the profile is still right
    if mode == "cpu":
        assert res["timer"] == ("itimer" if timer == "itimer" else "per-thread")
    for fn in ("allocate_heavily", "lock_heavily", "main_burn", "short_lived"):
        assert fn in res["functions"], (fn, res["functions"])
    assert {"allocator", "locker", "hasher", "MainThread"} <= set(res["thread_names"])
    # most signals became samples (itimer signals may land on threads starting or ending)
    kept = 0.5 if timer == "itimer" else 0.9
    assert res["samples"] >= kept * rep["entries"] - res["dropped"] - 50, (res, rep)


CONTROL_CODE = """
import time, spprof
spprof.start(interval_ms=1)
end = time.thread_time() + 0.5
while time.thread_time() < end:
    sum(i * i for i in range(1000))
spprof.stop()
"""


@pytest.mark.parametrize(
    ("selftest", "kind"),
    [("malloc", "malloc"), ("lock", "pthread_mutex_lock"), ("pyapi", "Py_IsInitialized")],
)
def test_negative_control_each_kind_of_violation_is_detected(shim, tmp_path, selftest, kind):
    _, names = shim
    if selftest == "pyapi" and not names:
        pytest.skip("Python API stubs need x86-64 and a shared libpython")
    _, rep = run_under_shim(shim, tmp_path, ["-c", CONTROL_CODE], selftest=selftest)
    assert rep["entries"] > 20, rep
    if selftest == "pyapi":
        assert rep["pyapi"].get(kind, 0) >= rep["entries"], rep
        assert not set(rep["pyapi"]) <= ALLOWED_PYAPI
    else:
        assert rep["violations"][kind] >= rep["entries"], rep
        assert "sigshim.so" in rep["first_caller"][kind], rep


def test_shim_is_transparent_to_signal_handler_bookkeeping(shim, tmp_path):
    # spprof compares handler pointers when it restores SIGPROF; through the shim, a Python
    # handler installed before start() must still be the one in place after stop().
    code = (
        "import os, signal, spprof\n"
        "calls = []\n"
        "h = lambda s, f: calls.append(s)\n"
        "signal.signal(signal.SIGPROF, h)\n"
        "spprof.start(interval_ms=1)\n"
        "os.kill(os.getpid(), signal.SIGPROF)\n"
        "sum(range(10**6))\n"
        "spprof.stop()\n"
        "assert signal.getsignal(signal.SIGPROF) is h\n"
        "os.kill(os.getpid(), signal.SIGPROF)\n"
        "sum(range(10**6))\n"
        "assert calls == [signal.SIGPROF] * 2, calls\n"
        "print('OK')\n"
    )
    proc, rep = run_under_shim(shim, tmp_path, ["-c", code])
    assert proc.stdout.strip() == "OK"
    assert rep["entries"] >= 2


FAULT_CODE = """
import json, runpy, sys
import spprof
sys.argv = ["corrupt_frame.py", "2", "unmapped"]
spprof.start(interval_ms=1)
try:
    runpy.run_path({script!r}, run_name="__main__")
finally:
    p = spprof.stop()
st = spprof.stats()
leaf = sum(1 for s in p.samples if s.frames and s.frames[-1].function_name == "spin_with_wild_link")
print("RESULT " + json.dumps({{"walk_faults": st["walk_faults"], "leaf": leaf}}))
"""


def test_fault_recovery_never_allocates_locks_or_calls_the_python_api(shim, tmp_path):
    # The twin of the test above for the fault path: a thread's frame link points at unmapped
    # memory, so captures fault; the fault guard's SIGSEGV handler (watched too) claims the
    # fault and jumps back into the capture. Nothing on that path may allocate or lock either.
    script = SCRIPTS / "torture" / "corrupt_frame.py"
    code = FAULT_CODE.format(script=str(script))
    so, _ = shim
    report = tmp_path / "shim-report.json"
    env = {
        "LD_PRELOAD": str(so),
        "SIGSHIM_REPORT": str(report),
        "SIGSHIM_SIGNALS": ",".join(
            str(int(s))
            for s in [
                signal.SIGPROF,
                signal.SIGSEGV,
                signal.SIGBUS,
                *range(signal.SIGRTMIN, signal.SIGRTMAX + 1),
            ]
        ),
    }
    proc = run_python("-c", code, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads(report.read_text())
    res = result_of(proc.stdout)
    figure(
        "signal_safety[fault path]", walk_faults=res["walk_faults"], handler_entries=rep["entries"]
    )
    # The faults happened and were recovered inside the handler ...
    assert res["walk_faults"] >= 20, res
    assert res["leaf"] >= 20, res  # ... keeping the frames read before the wild link
    # ... and neither the SIGPROF handler nor the SIGSEGV handler nested in it allocated,
    # locked, or called into the loader or Python.
    assert all(v == 0 for v in rep["violations"].values()), rep
    assert set(rep["pyapi"]) <= ALLOWED_PYAPI, rep
