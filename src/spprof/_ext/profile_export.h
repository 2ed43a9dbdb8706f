// profile_export.h: a session's samples as the plain Python data the profile is built from.
//
// One exporter for two callers: stop() hands over the whole session; window_export() hands
// over a window on a running session (docs/usage.md, "Windows inside a running session"):
// the samples whose time falls in [t0, t1], of one thread or of all, with only the stacks,
// frames and threads those samples use, renumbered. The session keeps every sample either way.
// GIL held (the resolver's strings become Python objects).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace spprof {

class Session;

// The part of a session a window takes: samples with t0_ns <= timestamp <= t1_ns (monotonic
// clock, platform_monotonic_ns), of the thread whose OS id is native_tid (0: every thread).
struct ExportWindow {
    uint64_t t0_ns = 0;
    uint64_t t1_ns = 0;
    uint64_t native_tid = 0;
};

// {"frames", "stacks", "samples", "folds", "threads", "stats", "start_ns", "end_ns",
// "interval_ns"}: the RawProfile of _ext.pyi. `window` null: every row, frame, stack and thread
// of the session (stop()), a folded row once with "folds" {row index: samples it holds}; else
// only what the window's samples use, start_ns/end_ns being its bounds, a folded row's samples
// in the window as one row (and its count in "folds").
// `stats` is put in as is (a new reference is taken). New reference, or null with an exception.
PyObject* export_profile(const Session* s, PyObject* stats, const ExportWindow* window);

}  // namespace spprof
