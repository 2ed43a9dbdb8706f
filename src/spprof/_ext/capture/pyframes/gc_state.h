// pyframes/gc_state.h: where the interpreter says "the cyclic GC is running", per CPython version.
//
// Every version 3.9-3.15 keeps one `int collecting` in its per-interpreter GC state
// (PyInterpreterState.gc, struct _gc_runtime_state): set to 1 for the whole collection (the
// "start" gc.callbacks, the collection, finalizers and weakref callbacks, the "stop" callbacks)
// by the thread that collects, which holds the GIL (or, before 3.12, by whichever thread
// allocated past the threshold). The capture reads it as a plain int load: it reads a word the
// interpreter owns, never writes it. The flag is interpreter-wide; signal_handler.cpp decides
// whether it is the sampled thread that collects (it holds the GIL).
//
// kGcCollectingOffset is offsetof(PyInterpreterState, gc) + offsetof(struct _gc_runtime_state,
// collecting) on 64-bit builds with the GIL, taken from the internal headers
// (Include/internal/pycore_interp.h and pycore_gc.h; pycore_interp_structs.h from 3.14; on
// 3.13+ _Py_DebugOffsets publishes the same two numbers as interpreter_state.gc and
// gc.collecting). Mirrored; checked by layout_check.cpp against the real headers. SIGNAL-SAFE.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>

namespace spprof {

#if PY_VERSION_HEX >= 0x030F0000
constexpr size_t kGcCollectingOffset = 7400 + 112;  // gc state lost its trash fields
#elif PY_VERSION_HEX >= 0x030E0000
constexpr size_t kGcCollectingOffset = 7408 + 192;
#elif PY_VERSION_HEX >= 0x030D0000
constexpr size_t kGcCollectingOffset = 7400 + 200;
#elif PY_VERSION_HEX >= 0x030C0000
constexpr size_t kGcCollectingOffset = 112 + 200;
#elif PY_VERSION_HEX >= 0x030B0000
constexpr size_t kGcCollectingOffset = 648 + 200;
#elif PY_VERSION_HEX >= 0x03090000
constexpr size_t kGcCollectingOffset = 616 + 200;  // 3.9 and 3.10 alike
#else
#error "spprof supports CPython 3.9 to 3.15"
#endif

// The address of `interp`'s collecting flag. Normal context; the result stays valid while the
// interpreter lives (the main interpreter: until the process finalizes).
inline const int* gc_collecting_flag(PyInterpreterState* interp) {
    return reinterpret_cast<const int*>(reinterpret_cast<const unsigned char*>(interp) + kGcCollectingOffset);
}

}  // namespace spprof
