// pyframes/gil_state.h: which thread holds the GIL, read from another thread, per CPython version.
//
// A signal capture runs on the sampled thread and asks PyGILState_Check (signal_handler.cpp).
// The Mach sampler reads a suspended thread from its own thread, where that call answers for
// the sampler: it reads the GIL's own state instead. Every version 3.9-3.15 keeps it in a
// `struct _gil_runtime_state` (Include/internal/pycore_gil.h) whose first fields are
// `unsigned long interval; last_holder; locked;`: `last_holder` (the PyThreadState that holds
// or last held it) at 8 and `locked` (1 while held) at 16, before any pthread type, so the
// same on Linux and macOS. The struct is `_PyRuntime.ceval.gil` on 3.9-3.11 and
// `*PyInterpreterState.ceval.gil` (the interpreter's own GIL) from 3.12.
//
// A thread holds the GIL when `locked` is 1 and `last_holder` is its state. Read while that
// thread is suspended, the answer "holds it" cannot go stale (it cannot let go); "does not"
// can be wrong for the moment between another thread's setting `locked` and `last_holder` in
// take_gil (nanoseconds). Offsets mirrored from the internal headers; checked by
// layout_check.cpp. The read is two plain loads of words the interpreter owns. SIGNAL-SAFE.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstdint>

namespace spprof {

constexpr size_t kGilLastHolderOffset = 8;
constexpr size_t kGilLockedOffset = 16;

#if PY_VERSION_HEX >= 0x030D0000
constexpr size_t kInterpGilPointerOffset = 16;  // ceval moved to the front of PyInterpreterState
#elif PY_VERSION_HEX >= 0x030C0000
constexpr size_t kInterpGilPointerOffset = 384;
#elif PY_VERSION_HEX >= 0x030B0000
constexpr size_t kRuntimeGilOffset = 360;
#elif PY_VERSION_HEX >= 0x03090000
constexpr size_t kRuntimeGilOffset = 352;  // 3.9 and 3.10 alike
#else
#error "spprof supports CPython 3.9 to 3.15"
#endif

// The GIL state of `interp` (the main interpreter: the one GIL before 3.12). Normal context;
// the result stays valid while the interpreter lives. nullptr when it cannot be found.
const unsigned char* gil_state_of(PyInterpreterState* interp);

// SIGNAL-SAFE, NO-HEAP. The state of the thread holding the GIL now, 0 when nobody does.
inline uintptr_t gil_holder(const unsigned char* gil) {
    if (gil == nullptr) return 0;
    const int locked = *reinterpret_cast<const volatile int*>(gil + kGilLockedOffset);
    const uintptr_t holder = *reinterpret_cast<const volatile uintptr_t*>(gil + kGilLastHolderOffset);
    return locked == 1 ? holder : 0;
}

// SIGNAL-SAFE, NO-HEAP. True when `tstate` holds the GIL whose state is `gil`.
inline bool gil_held_by(const unsigned char* gil, uintptr_t tstate) {
    return tstate != 0 && gil_holder(gil) == tstate;
}

}  // namespace spprof
