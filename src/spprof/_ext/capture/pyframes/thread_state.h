// pyframes/thread_state.h: what the thread scan reads from a PyThreadState, per CPython version.
//
// The session's thread registry scans the interpreter's thread states (GIL held) and needs
// two facts whose fields differ by version: the thread's kernel tid, and whether the state
// belongs to its thread yet. These accessors keep those version #ifs here, beside the frame
// layouts, so the registry itself has none. Normal context, GIL held; not for the signal path.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

#include "../../platform/platform.h"

namespace spprof {

// The calling thread's state, or null (finalisation paths, a thread Python never saw),
// without the fatal error PyThreadState_Get raises there.
inline PyThreadState* tstate_current_or_null() {
#if PY_VERSION_HEX >= 0x030D0000
    return PyThreadState_GetUnchecked();
#else
    return _PyThreadState_UncheckedGet();
#endif
}

// The kernel tid of the thread `ts` belongs to, 0 when not known yet (the thread has not
// written it: try again at the next scan). 3.11+ keep it in the state; before, it is looked
// up from the pthread ident.
inline uint64_t tstate_native_tid(PyThreadState* ts) {
#if PY_VERSION_HEX >= 0x030B0000
    return ts->native_thread_id;
#else
    return platform_tid_from_ident(ts->thread_id);
#endif
}

// False while `ts` cannot be told apart from its creator's thread: not bound to a thread at
// all (thread_id 0), or, before 3.12, preallocated by the creator and still carrying the
// creator's ids until the new thread initialises it (gilstate_counter becomes 1).
inline bool tstate_bound(PyThreadState* ts) {
    if (ts->thread_id == 0) return false;
#if PY_VERSION_HEX < 0x030C0000
    if (ts->gilstate_counter == 0) return false;
#endif
    return true;
}

}  // namespace spprof
