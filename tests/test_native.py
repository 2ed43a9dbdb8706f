"""Native frames (native=True): unwound through code without frame pointers, symbolized,
and interleaved with Python frames in true call order."""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import pytest

import spprof
import workloads as w
from conftest import build_shared_library, native_leaf_counts, run_python
from spprof._load import loads
from spprof.output import render
from test_formats_common import find_tool, tool_env
from test_formats_pprof import Decoded

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="native unwinding runs on Linux (macOS: Mach)"
)

EXT_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* nest(f): call f() from C. Compiled without frame pointers: unwinding needs CFI. */
static PyObject* nest(PyObject* self, PyObject* f) {
    (void)self;
    return PyObject_CallObject(f, NULL);
}

static PyMethodDef methods[] = {{"nest", nest, METH_O, "call f from C"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "spprof_cb_ext", NULL, -1, methods};
PyMODINIT_FUNC PyInit_spprof_cb_ext(void) { return PyModule_Create(&mod); }
"""


@pytest.fixture(scope="module")
def cb_ext(tmp_path_factory):
    # CC and CPPFLAGS as setuptools reads them: make test-arm64 names the cross compiler and
    # the arm64 headers there.
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("ext")
    src = d / "spprof_cb_ext.c"
    src.write_text(EXT_SOURCE)
    out = d / ("spprof_cb_ext" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(
        # no sibling calls: nest's call would become a jump and nest would leave no frame
        [
            cc,
            "-shared",
            "-fPIC",
            "-O2",
            "-fomit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-I" + sysconfig.get_paths()["include"],
            # where `make test` builds for an interpreter from a sysroot (CPython 3.14/3.15),
            # the headers the interpreter's own include dir points to
            *shlex.split(os.environ.get("CPPFLAGS", "")),
            str(src),
            "-o",
            str(out),
        ],
        check=True,
    )
    spec = importlib.util.spec_from_file_location("spprof_cb_ext", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _names(sample) -> list[str]:
    return [("native:" if f.is_native else "") + f.function_name for f in sample.frames]


def test_qsort_callback_reads_caller_then_qsort_then_callback():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    cmp_type = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)
    )

    def compare(a, b):
        x = 0
        for i in range(300):
            x += i
        return a[0] - b[0]

    cmp = cmp_type(compare)

    def sort_with_qsort():
        arr = (ctypes.c_int * 2000)(*range(2000, 0, -1))
        libc.qsort(arr, len(arr), ctypes.sizeof(ctypes.c_int), cmp)
        assert list(arr[:3]) == [1, 2, 3]

    with spprof.Profiler(interval_ms=2, native=True) as p:
        end = time.thread_time() + 0.8
        while time.thread_time() < end:
            sort_with_qsort()
    in_compare = [s for s in p.get_samples() if s.frames[-1].function_name == "compare"]
    assert len(in_compare) > 50
    ordered = 0
    for s in in_compare:
        names = _names(s)
        caller = names.index("sort_with_qsort")
        qsort = next(i for i, n in enumerate(names) if n.startswith("native:qsort"))
        assert caller < qsort < len(names) - 1, names
        assert all(n.startswith("native:") for n in names[caller + 1 : -1]), names
        ordered += 1
    assert ordered == len(in_compare)
    qs = next(f for f in in_compare[0].frames if f.function_name.startswith("qsort"))
    assert qs.is_native and "libc" in os.path.basename(qs.filename)
    stats = spprof.stats()
    assert stats["native_unwinds"] > 0
    # Each walk ends at the stack's bottom, or at the 128-frame cap under a deep caller
    # (pytest on 3.9/3.10 costs ~5 C frames per Python call); never on an unwinding failure.
    reasons = stats["native_stop_reasons"]
    complete = reasons.get("bottom", 0) + reasons.get("depth_cap", 0)
    assert complete >= 0.9 * stats["native_unwinds"], reasons
    # The walks' return addresses recur (qsort's, the eval loop's call sites): from the second
    # walk on most steps take a row an earlier walk kept (unwind/step_cache.h), with the
    # order above unchanged.
    assert stats["native_cached_steps"] > 5 * stats["native_unwinds"], stats.as_dict()


def test_c_extension_calling_back_twice_deep_interleaves_in_call_order(cb_ext):
    def inner():
        return w.spin(0.001)

    def middle():
        return cb_ext.nest(inner)

    def outer():
        return cb_ext.nest(middle)

    with spprof.Profiler(interval_ms=1, native=True) as p:
        end = time.thread_time() + 0.6
        while time.thread_time() < end:
            outer()
    deep = [s for s in p.get_samples() if "inner" in [f.function_name for f in s.frames]]
    assert len(deep) > 50
    for s in deep:
        names = [n for n in _names(s) if n in ("outer", "middle", "inner", "native:nest")]
        assert names == ["outer", "native:nest", "middle", "native:nest", "inner"], _names(s)
    nest = next(f for f in deep[0].frames if f.function_name == "nest")
    assert nest.filename.endswith(sysconfig.get_config_var("EXT_SUFFIX"))
    # CPython's own C frames (the eval loop, call machinery) are folded away by default
    assert not any(f.is_native and "PyEval" in f.function_name for s in deep for f in s.frames)


def tiny() -> None:
    pass


def calls_tiny_through_c(nest, n: int) -> None:
    for _ in range(n):
        nest(tiny)


def test_a_sample_inside_an_eval_call_s_entry_or_exit_keeps_c_under_its_caller(cb_ext):
    """A Python function called from C and returning at once: a sample often lands while the
    eval loop has been entered but has not yet made the new frame the thread's current one, or
    has already handed the caller's back. The native stack then has one eval call more than
    the Python chain. Before, every Python frame was then paired with the wrong eval call and
    `nest` was drawn above its own caller (3.9: ~1 sample in 10 of these; 3.12: 1 in 50 read
    an empty chain, whose time is now carried to the next sample)."""
    with spprof.Profiler(interval_ms=1, native=True) as p:
        end = time.thread_time() + 1.0
        while time.thread_time() < end:
            calls_tiny_through_c(cb_ext.nest, 2000)
    with_nest = [s for s in p.get_samples() if "nest" in [f.function_name for f in s.frames]]
    # About half the loop's CPU is inside nest (~125 samples of ~250 on a quiet machine). On a
    # loaded one the kernel delivers fewer signals with heavier weights (overruns): the local
    # CI rehearsal of 2026-12-01, with tests run beside it, had 38. So the time, not the count.
    assert sum(s.weight_ns for s in with_nest) >= 0.25e9 and len(with_nest) >= 20, len(with_nest)
    wrong = []
    for s in with_nest:
        names = [n for n in _names(s) if n in ("calls_tiny_through_c", "native:nest", "tiny")]
        if names not in (
            ["calls_tiny_through_c", "native:nest"],
            ["calls_tiny_through_c", "native:nest", "tiny"],
        ):
            wrong.append(_names(s)[-6:])
    assert not wrong, (len(wrong), len(with_nest), wrong[:3])


def test_interpreter_frames_can_be_kept(cb_ext):
    def leaf():
        return w.spin(0.001)

    with spprof.Profiler(interval_ms=1, native=True, interpreter_frames=True) as p:
        end = time.thread_time() + 0.3
        while time.thread_time() < end:
            cb_ext.nest(leaf)
    natives = {f.function_name for s in p.get_samples() for f in s.frames if f.is_native}
    assert any("_PyEval_EvalFrameDefault" in n for n in natives), sorted(natives)[:20]


def test_no_native_frames_unless_asked():
    with spprof.Profiler(interval_ms=2) as p:
        hashlib.sha256(b"x" * (16 << 20)).digest()
        w.spin(0.2)
    assert p.get_samples()
    assert not any(f.is_native for s in p.get_samples() for f in s.frames)
    assert "native_unwinds" not in spprof.stats()


def test_hashlib_c_frames_sit_under_the_python_line_that_called_them():
    data = b"\x07" * (32 << 20)
    stop = threading.Event()

    def hasher():
        while not stop.is_set():
            hashlib.sha256(data).digest()  # HASH_LINE

    t = threading.Thread(target=hasher, name="hasher")
    with spprof.Profiler(interval_ms=2, native=True) as p:
        t.start()
        time.sleep(0.8)
        stop.set()
        t.join()
    line = w.line_of(hasher, "HASH_LINE")
    mine = [s for s in p.get_samples() if s.thread_name == "hasher"]
    under = 0
    for s in mine:
        idx = [i for i, f in enumerate(s.frames) if f.function_name == "hasher"]
        if not idx:
            continue
        i = idx[-1]
        below = s.frames[i + 1 :]
        if s.frames[i].lineno == line and below and all(f.is_native for f in below):
            under += 1
    assert under >= 0.8 * len(mine), (under, len(mine))
    libs = {os.path.basename(f.filename) for s in mine for f in s.frames if f.is_native}
    assert any("hashlib" in lib or "crypto" in lib for lib in libs), libs


def test_cli_native_flag(tmp_path):
    out = tmp_path / "n.collapsed.txt"
    code = (
        "import hashlib\n"
        "data = b'y' * (8 << 20)\n"
        "for _ in range(30):\n"
        "    hashlib.sha256(data).digest()\n"
    )
    r = run_python("-m", "spprof", "-q", "--native", "-i", "2", "-o", str(out), "-c", code)
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert any(line.startswith("<module> (<string>:4);") and "crypto" in line for line in lines)


STRIPPED_SOURCE = r"""
/* Two static functions (not in .dynsym once stripped) that spin over many instructions, so
   their samples land on many different pcs; `run` is exported and calls them in turn. */
#include <time.h>
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}
static volatile unsigned long sink;
__attribute__((noinline)) static void spin_a(void) {
    for (int i = 0; i < 20000; ++i) sink = sink * 6364136223846793005ul + (unsigned long)i;
}
__attribute__((noinline)) static void spin_b(void) {
    for (int i = 0; i < 20000; ++i) sink = (sink ^ (sink >> 7)) * 2862933555777941757ul + 3;
}
void run(double seconds) {
    const double end = cpu() + seconds;
    while (cpu() < end) { spin_a(); spin_b(); }
}
"""


def _stripped_spin_library(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """STRIPPED_SOURCE built and stripped: the library, and spin_a's and spin_b's starts (nm's
    addresses in the unstripped build)."""
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    strip = shutil.which("strip")
    nm = shutil.which("nm")
    if cc is None or strip is None or nm is None:
        pytest.skip("needs a C compiler, strip and nm")
    if os.environ.get("CC"):
        pytest.skip("a cross compiler (make test-arm64): the host's strip and nm do not apply")
    src = tmp_path / "spin.c"
    src.write_text(STRIPPED_SOURCE)
    full = tmp_path / "libspin_full.so"
    lib = tmp_path / "libspin_stripped.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-fasynchronous-unwind-tables", str(src), "-o", str(full)],
        check=True,
    )
    subprocess.run([strip, "--strip-all", "-o", str(lib), str(full)], check=True)
    syms = subprocess.run([nm, str(full)], capture_output=True, text=True, check=True).stdout
    starts = {}
    for line in syms.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in ("spin_a", "spin_b"):
            starts[parts[2]] = int(parts[0], 16)
    assert set(starts) == {"spin_a", "spin_b"}, syms
    exported = subprocess.run([nm, "-D", str(lib)], capture_output=True, text=True).stdout
    assert "spin_a" not in exported, exported
    return lib, starts


def test_stripped_library_static_functions_are_one_frame_each(tmp_path):
    # Issue 28, "one row per function": a static function of a stripped library has no symbol;
    # it was keyed by each sampled address (58 samples of pandas' hashtable in 23 rows). Now
    # its frame is named by the start of its function in the unwind table, the address nm
    # gives it in the unstripped build.
    lib, starts = _stripped_spin_library(tmp_path)
    run = ctypes.CDLL(str(lib)).run
    run.argtypes = [ctypes.c_double]
    with spprof.Profiler(interval_ms=1, native=True) as p:
        run(0.6)
    assert p.profile is not None
    weights = native_leaf_counts(
        p.profile.samples, lambda f: f.function_name.startswith(lib.name + "+")
    )
    expected = {f"{lib.name}+{hex(starts[n])}" for n in ("spin_a", "spin_b")}
    # Every sample in the two functions is one of two frames (old code: one per address).
    assert set(weights) == expected, (weights, expected)
    # Enough samples in each that the old code (a row per sampled address) would have made
    # several rows; kept low: a loaded machine delivers a few dozen signals for these 0.6 s.
    assert min(weights.values()) >= 3, weights


def _spin_profile(tmp_path: Path) -> tuple[Path, dict[str, int], dict[str, int], spprof.Profile]:
    """The stripped library's two functions run for 0.6 s at 1 ms with native frames: the
    library, the functions' starts and sizes (nm, unstripped build), the profile."""
    lib, starts = _stripped_spin_library(tmp_path)
    sizes = {}
    nm = subprocess.run(
        ["nm", "-S", str(tmp_path / "libspin_full.so")], capture_output=True, text=True, check=True
    ).stdout
    for line in nm.split("\n"):
        parts = line.split()
        if len(parts) == 4 and parts[3] in starts:
            sizes[parts[3]] = int(parts[1], 16)
    run = ctypes.CDLL(str(lib)).run
    run.argtypes = [ctypes.c_double]
    with spprof.Profiler(interval_ms=1, native=True) as p:
        run(0.6)
    assert p.profile is not None
    return lib, starts, sizes, p.profile


def test_pprof_keeps_each_sampled_address_inside_the_function_s_one_row(tmp_path):
    # Issue 28: a native function is one row (test above), and pprof's locations keep the
    # addresses it was sampled at, in a mapping of its library, for `-addresses`, `-disasm`
    # and `list` (old code: one location per function, no address, no mapping).
    lib, starts, sizes, profile = _spin_profile(tmp_path)
    counts = native_leaf_counts(
        profile.samples, lambda f: f.function_name.startswith(lib.name + "+")
    )
    d = Decoded(render(profile, "pprof"))
    by_function: dict[str, dict[int, int]] = {}  # name -> {address in the file: samples}
    for locs, values, _ in d.samples:
        leaf = locs[0]
        ((fn, _line),) = d.locations[leaf]
        name = d.functions[fn][0]
        if not name.startswith(lib.name + "+"):
            continue
        mapping, address = d.addresses[leaf]
        start, limit, offset, filename, has_functions = d.mappings[mapping]
        assert filename == str(lib) and has_functions == 1 and offset == 0, d.mappings[mapping]
        assert start <= address < limit, (hex(start), hex(address), hex(limit))
        at = by_function.setdefault(name, {})
        at[address - start] = at.get(address - start, 0) + values[0]
    for fn in ("spin_a", "spin_b"):
        name = f"{lib.name}+{hex(starts[fn])}"
        # Every address is inside the function (nm's start and size in the unstripped build),
        # and the addresses hold all of the function's samples, which the profile shows as one row.
        inside = by_function[name]
        assert all(starts[fn] <= a < starts[fn] + sizes[fn] for a in inside), (fn, inside)
        assert sum(inside.values()) == counts[name], (fn, inside, counts)
    # The loops' samples land on several of their instructions (5 to 6 of each here).
    assert sum(len(at) for at in by_function.values()) >= 3, by_function
    # One Function per function, however many locations.
    names = [f[0] for f in d.functions.values() if f[0].startswith(lib.name + "+")]
    assert sorted(names) == sorted(by_function), names
    # Every other output merges them: one collapsed line per path, not one per address.
    lines = render(profile, "collapsed").decode().splitlines()
    paths = [line.rsplit(" ", 1)[0] for line in lines]
    assert len(paths) == len(set(paths)), lines


def test_go_tool_pprof_shows_a_native_function_once_and_its_addresses_apart(tmp_path):
    go = find_tool(("go",), "golang-go")
    lib, starts, _, profile = _spin_profile(tmp_path)
    # Through a .spprof file and `spprof convert`, which keep the addresses (they did not).
    profile.save(tmp_path / "native.spprof", "spprof")
    path = tmp_path / "native.pb.gz"
    r = run_python("-m", "spprof", "convert", str(tmp_path / "native.spprof"), "-o", str(path))
    assert r.returncode == 0, r.stderr
    assert path.read_bytes() == render(profile, "pprof")
    env = tool_env(
        HOME=str(tmp_path), GOCACHE=str(tmp_path / "gocache"), PPROF_TMPDIR=str(tmp_path)
    )

    def rows(*extra: str) -> list[list[str]]:
        out = subprocess.run(
            [go, "tool", "pprof", "-top", "-nodecount=1000", *extra, str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=True,
        ).stdout.splitlines()
        start = next(i for i, line in enumerate(out) if line.strip().startswith("flat"))
        return [line.split() for line in out[start + 1 :] if lib.name + "+" in line]

    names = {f"{lib.name}+{hex(starts[fn])}" for fn in ("spin_a", "spin_b")}
    # By function: each of the two once.
    assert sorted(r[5] for r in rows()) == sorted(names), rows()
    # By address (`-addresses`): a row per sampled instruction, each in one of the two.
    by_address = rows("-addresses")
    assert len(by_address) >= 3, by_address
    assert {r[6] for r in by_address} == names, by_address
    assert len({r[5] for r in by_address}) == len(by_address), by_address


OFF_GIL_PROGRAM = r"""
import ctypes, json, sys, time
import spprof
run = ctypes.CDLL(sys.argv[1]).run
run.argtypes = [ctypes.c_double]
with spprof.Profiler(interval_ms=1, native=True) as p:
    run(0.6)
    time.sleep(0.6)  # no CPU, no samples: a pass takes every record before stop()
leaves = {}
for s in p.get_samples():
    leaf = s.frames[-1]
    if leaf.is_native and leaf.function_name.startswith("libspin"):
        leaves[leaf.function_name] = leaves.get(leaf.function_name, 0) + 1
keys = ("symbol_files_read_off_gil", "symbol_files_read_under_gil", "drains_waiting_for_files",
        "samples_captured", "records_drained", "samples_dropped")
st = spprof.stats()
in_profiler = p.profile.stats["samples_in_profiler"]
print(json.dumps({"leaves": leaves, "samples": len(p.get_samples()), "in_profiler": in_profiler,
                  **{k: st[k] for k in keys}}))
"""


def test_module_files_for_names_are_read_by_the_drain_thread_without_the_gil(tmp_path):
    # Issue 28, "the drain does not hold the GIL for symbolization": a module's symbol table
    # (libtorch_cpu.so: 76 MB of names) was read by the drain with the GIL held, stopping the
    # program 60-200 ms. Now a record whose names need a file waits in its ring while the drain
    # thread reads the file without the GIL. The library's dynamic symbols and then its unwind
    # table's starts (its static functions have no symbol) are both read that way, and the
    # profile names and counts exactly what it did before. Old code: no such counters (every
    # read was under the GIL). Own interpreter: nothing else of pytest's runs there.
    lib, starts = _stripped_spin_library(tmp_path)
    r = run_python("-c", OFF_GIL_PROGRAM, str(lib))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    expected = {f"{lib.name}+{hex(starts[n])}" for n in ("spin_a", "spin_b")}
    assert set(out["leaves"]) == expected, out
    assert min(out["leaves"].values()) >= 3, out
    # The library's symbols and its starts at least, read off the GIL. With the GIL, at most
    # one: stop()'s own last pass names what was sampled after the drain's last pass (a
    # sample as the thread enters or leaves its sleep, in libc: seen 1 run in 5).
    assert out["symbol_files_read_off_gil"] >= 2, out
    assert out["symbol_files_read_under_gil"] <= 1, out
    assert out["drains_waiting_for_files"] >= 1, out
    # Nothing lost: every capture is a sample (one more: the thread's CPU after its last
    # sample, at stop), or one of spprof's own in its stop() (dropped from the profile and
    # counted: under load a tick lands in Profiler.__exit__, and the CPU after it goes there
    # too; CI saw 2). Nothing counted twice: a record that waited is read once more but
    # counted once, so the records are the rows plus at most one without a row.
    rows = out["samples"] + out["in_profiler"]
    assert rows >= out["samples_captured"], out
    assert rows <= out["records_drained"] <= rows + 1, out
    assert out["samples_dropped"] == 0, out


# 30,000 local function symbols of 1,000-character names: a 30 MB string table (libtorch_cpu.so
# has 76 MB of names), beside a function that spins.
def _library_with_big_names(tmp_path: Path) -> Path:
    lines = [".text"]
    for i in range(30_000):
        name = f"f{i}_" + "x" * 990
        lines += [f".type {name}, %function", f"{name}:", "ret", f".size {name}, 1"]
    lines.append('.section .note.GNU-stack,"",%progbits')
    asm = tmp_path / "names.s"
    asm.write_text("\n".join(lines) + "\n")
    return build_shared_library(tmp_path, "bignames", STRIPPED_SOURCE, "-O2", str(asm))


BIG_NAMES_PROGRAM = r"""
import ctypes, json, sys, time
import spprof

def rss_anon_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])

run = ctypes.CDLL(sys.argv[1]).run
run.argtypes = [ctypes.c_double]
spprof.start(interval_ms=1, native=True)
time.sleep(0.3)  # the session's own memory settles (libc's and the interpreter's names too)
before = rss_anon_kb()
run(0.3)
time.sleep(0.4)  # the drain reads the library's table and names the samples
after = rss_anon_kb()
p = spprof.stop()
leaves = {}
for s in p.samples:
    leaf = s.frames[-1]
    if leaf.is_native:
        leaves[leaf.function_name] = leaves.get(leaf.function_name, 0) + 1
print(json.dumps({"grew_kb": after - before, "leaves": leaves}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RssAnon, ELF string tables")
def test_a_librarys_symbol_names_are_not_copied_into_the_process(tmp_path):
    # Issue 28, "76 MB of names kept in memory": a module's string table was read into memory
    # of spprof's (libtorch_cpu.so: 76 MB). Now it is mapped from the file: the page cache's
    # pages, of which the process pays for those a lookup touched. At 7ac57e3 this program's
    # anonymous memory grew by 30.3 MB while the library's samples were named; now by ~1 MB.
    lib = _library_with_big_names(tmp_path)
    r = run_python("-c", BIG_NAMES_PROGRAM, str(lib))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # The library's functions are still named from that table (spin_a, spin_b are static).
    assert {"spin_a", "spin_b"} <= set(out["leaves"]), out
    assert out["grew_kb"] < 10_000, out


# The kernel itself: tests/native/realigned_kernel.inc (the live C++ test's too). Its caller
# keeps a frame pointer (CFA = rbp + 16). Nothing but kernel calls runs at the kernel's depth
# (no clock reads), as in OpenBLAS's drivers, whose copy routines and kernels make no calls.
REALIGNED_CALLERS = r"""
void realigned_kernel(long n);
volatile long calls;
__attribute__((noinline)) void kernel_caller(long n) {
    realigned_kernel(n);
    calls = calls + 1; /* not a tail call */
}
void run(long times, long n) {
    for (long i = 0; i < times; ++i) kernel_caller(n);
}
"""


def test_a_kernel_that_realigned_the_stack_is_walked_through_to_python(tmp_path):
    # Issue 28, "complete": OpenBLAS's Haswell dgemm kernel has no CFI, and its return address
    # lies 3.6 KiB above rsp after it realigns the stack; 21 % of numpy's SVD walks stopped
    # there (no_cfi), losing the Python code that called it. The walk now searches from the
    # stack pointer the kernel kept in a register, and takes the caller's rbp from where the
    # kernel saved it.
    import platform

    if platform.machine() not in ("x86_64", "AMD64") or os.environ.get("CC"):
        pytest.skip("x86_64 assembly, built with the host's compiler")
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("needs a C compiler")
    src = tmp_path / "realigned.c"
    kernel = Path(__file__).resolve().parent / "native" / "realigned_kernel.inc"
    src.write_text(kernel.read_text() + REALIGNED_CALLERS)
    lib = tmp_path / "librealigned.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-fno-omit-frame-pointer", str(src), "-o", str(lib)],
        check=True,
    )
    run = ctypes.CDLL(str(lib)).run
    run.argtypes = [ctypes.c_long, ctypes.c_long]

    def calls_the_kernel() -> None:
        t0 = time.process_time()
        while time.process_time() - t0 < 0.6:
            run(10, 200_000)

    with spprof.Profiler(interval_ms=1, native=True) as p:
        calls_the_kernel()
    assert p.profile is not None
    in_kernel = [s for s in p.profile.samples if s.frames[-1].function_name == "realigned_kernel"]
    # A loaded machine still delivers dozens of the ~600 signals; the old walk stopped at the
    # kernel in every one of them (no_cfi).
    assert len(in_kernel) >= 10, len(in_kernel)
    whole = [
        s
        for s in in_kernel
        if [f.function_name for f in s.frames[-3:]] == ["run", "kernel_caller", "realigned_kernel"]
        and any(f.function_name == "calls_the_kernel" for f in s.frames)
    ]
    assert len(whole) >= 0.9 * len(in_kernel), (
        [[f.function_name for f in s.frames[-5:]] for s in in_kernel if s not in whole][:5],
        p.profile.stats["native_stop_reasons"],
    )
    # Each found by the counted heuristic (a sample may stand for two captures: not exact).
    assert p.profile.stats["native_leaf_steps"] >= 0.9 * len(whole)


LATIN1_SOURCE = r"""
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
double latin1_spin(double seconds) {
    double end = now() + seconds, x = 0;
    while (now() < end)
        for (int i = 0; i < 20000; i++) x += i * 0.5;
    return x;
}
"""


def test_a_library_at_a_path_that_is_not_utf8_keeps_the_profile(tmp_path):
    # /proc/self/maps gives a library's path as bytes: one in a Latin-1 directory ("caf\xe9")
    # made stop() raise UnicodeDecodeError, and the profile was lost. The path is kept as
    # text with \xe9 written out, as Python's backslashreplace writes it.
    where = tmp_path / os.fsdecode(b"caf\xe9")
    where.mkdir()
    lib = build_shared_library(where, "latin1", LATIN1_SOURCE, "-O1")
    spin = ctypes.CDLL(str(lib)).latin1_spin
    spin.argtypes = [ctypes.c_double]
    spin.restype = ctypes.c_double
    with spprof.Profiler(interval_ms=1, native=True) as p:
        spin(0.4)
    assert p.profile is not None
    shown = str(tmp_path / "caf\\xe9" / "liblatin1.so")
    hits = [
        s
        for s in p.profile.samples
        if any(f.is_native and f.function_name == "latin1_spin" for f in s.frames)
    ]
    assert len(hits) >= 0.5 * len(p.profile.samples) > 0, len(p.profile.samples)
    assert {f.filename for s in hits for f in s.frames if f.function_name == "latin1_spin"} == {
        shown
    }
    # Every output takes the text, pprof's mapping too.
    d = Decoded(render(p.profile, "pprof"))
    assert shown in {m[3] for m in d.mappings.values()}, d.mappings
    for fmt in ("speedscope", "collapsed", "html", "spprof"):
        assert render(p.profile, fmt)
    collapsed = render(p.profile, "collapsed").decode()
    assert f";latin1_spin ({shown}:0) " in collapsed, collapsed
    back = loads(render(p.profile, "spprof"))
    assert {f.filename for f in back.frame_table if f.function_name == "latin1_spin"} == {shown}
