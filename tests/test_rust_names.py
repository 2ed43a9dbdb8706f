"""Rust v0 symbols in native frames (issue 28, "readable names"): a library whose functions
are exported under v0 names (`_R...`, the mangling of rustc's -C symbol-mangling-version=v0)
shows them demangled, short in the summary and full in the saved formats."""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import pytest

import spprof
from conftest import build_shared_library, native_leaf_counts
from spprof.output import render
from spprof.output.report import summary

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="native unwinding runs on Linux (macOS: Mach)"
)

# Two C functions under Rust v0 names (the assembler takes any label): the rustc book's
# inherent-impl example and a generic instantiated with a higher-ranked fn type.
IMPL_FN = "_RNvMs_Cs4Cv8Wi1oAIB_7mycrateNtB4_7Example3foo"
GENERIC_FN = "_RINvCs7qp2U7fqm6G_7mycrate7exampleFG0_RL1_hRL0_tEuEB2_"
IMPL_NAME = "<mycrate::Example>::foo"
GENERIC_NAME = "mycrate::example::<for<'a, 'b> fn(&'a u8, &'b u16)>"
# The legacy mangling (stable rustc's default for a crate's own code) of a trait impl's method:
# C++'s demangler kept rustc's escapes ($LT$, $u20$, ..) in the name.
LEGACY_FN = "_ZN46_$LT$mycrate..Sq$u20$as$u20$mycrate..Shape$GT$4area17h2c7518503477359fE"
LEGACY_NAME = "<mycrate::Sq as mycrate::Shape>::area::h2c7518503477359f"
# A path nested 300 deep: past the demangler's depth limit (256), so left mangled and counted.
DEEP_FN = "_R" + "Nv" * 300 + "C1a" + "1b" * 300

SOURCE_TEMPLATE = r"""
#include <time.h>
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}
static volatile unsigned long sink;
void impl_fn(void) __asm__("IMPL_FN");
void generic_fn(void) __asm__("GENERIC_FN");
void deep_fn(void) __asm__("DEEP_FN");
void legacy_fn(void) __asm__("LEGACY_FN");
__attribute__((noinline)) void legacy_fn(void) {
    for (int i = 0; i < 20000; ++i) sink = (sink + (unsigned long)i) * 1442695040888963407ul;
}
__attribute__((noinline)) void impl_fn(void) {
    for (int i = 0; i < 20000; ++i) sink = sink * 6364136223846793005ul + (unsigned long)i;
}
__attribute__((noinline)) void generic_fn(void) {
    for (int i = 0; i < 20000; ++i) sink = (sink ^ (sink >> 7)) * 2862933555777941757ul + 3;
}
__attribute__((noinline)) void deep_fn(void) {
    for (int i = 0; i < 20000; ++i) sink = sink * 3 + (unsigned long)i;
}
void run_deep(double seconds) {
    const double end = cpu() + seconds;
    while (cpu() < end) deep_fn();
}
void run(double seconds) {
    const double end = cpu() + seconds;
    while (cpu() < end) { impl_fn(); generic_fn(); legacy_fn(); }
}
"""
SOURCE = (
    SOURCE_TEMPLATE.replace("IMPL_FN", IMPL_FN)
    .replace("GENERIC_FN", GENERIC_FN)
    .replace("DEEP_FN", DEEP_FN)
    .replace("LEGACY_FN", LEGACY_FN)
)


def _build(tmp_path) -> Path:
    """SOURCE as a shared library (skips without a C compiler)."""
    return build_shared_library(tmp_path, "rusty", SOURCE, "-O2")


def test_rust_v0_symbols_are_demangled_short_in_summary_full_when_saved(tmp_path):
    lib = _build(tmp_path)
    run = ctypes.CDLL(str(lib)).run
    run.argtypes = [ctypes.c_double]
    with spprof.Profiler(interval_ms=1, native=True) as p:
        run(0.5)
    assert p.profile is not None
    leaves = native_leaf_counts(p.profile.samples, lambda f: f.filename == str(lib))
    # Old code: the two mangled names. Both demangled names are there (counts are kept low:
    # a loaded machine delivers a few dozen signals for these 0.5 s, not 500).
    assert set(leaves) <= {IMPL_NAME, GENERIC_NAME, LEGACY_NAME, "run"}, leaves
    assert leaves.get(IMPL_NAME, 0) >= 1 and leaves.get(GENERIC_NAME, 0) >= 1, leaves
    assert leaves.get(LEGACY_NAME, 0) >= 1, leaves  # old code: <mycrate..Sq$u20$as...
    text = summary(p.profile, top=10)
    assert "<mycrate::Example>::foo (" in text, text
    assert "mycrate::example::<…> (" in text, text
    assert "<mycrate::Sq as mycrate::Shape>::area (" in text, text  # the hash dropped
    assert "for<'a" not in text and "_RNv" not in text and "_RINv" not in text
    assert "$LT$" not in text and "$u20$" not in text
    # names left mangled by a limit are counted (none here)
    assert p.profile.stats.get("rust_names_over_limit") == 0, p.profile.stats
    doc = json.loads(render(p.profile, "speedscope"))
    names = {f["name"] for f in doc["shared"]["frames"]}
    assert GENERIC_NAME in names and IMPL_NAME in names and LEGACY_NAME in names, names


def test_names_left_mangled_by_a_limit_are_counted_per_session(tmp_path):
    # The counter runs since the extension was loaded; each session reports its own share, so
    # a session that met no such name says 0 after one that did (the old stats said 1+ again).
    lib = _build(tmp_path)
    dll = ctypes.CDLL(str(lib))
    dll.run_deep.argtypes = dll.run.argtypes = [ctypes.c_double]
    with spprof.Profiler(interval_ms=1, native=True) as deep:
        dll.run_deep(0.3)
    assert deep.profile is not None
    leaves = native_leaf_counts(deep.profile.samples, lambda f: f.filename == str(lib))
    assert leaves.get(DEEP_FN, 0) >= 1, leaves  # left as it was mangled
    assert deep.profile.stats.get("rust_names_over_limit", 0) >= 1, deep.profile.stats
    with spprof.Profiler(interval_ms=1, native=True) as plain:
        dll.run(0.3)
    assert plain.profile is not None
    assert plain.profile.stats.get("rust_names_over_limit") == 0, plain.profile.stats
