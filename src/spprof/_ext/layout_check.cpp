// layout_check.cpp: compile-time proof that the mirrored frame layouts in pyframes/ match the
// interpreter we build against. This file defines nothing at run time. Where the internal
// headers are not installed the checks are skipped (the mirrors were written from them).
#define Py_BUILD_CORE 1
#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && \
    __has_include("internal/pycore_frame.h")
#include "internal/pycore_frame.h"
#define SPPROF_CHECK_FRAME 1
#elif PY_VERSION_HEX >= 0x030E0000 && __has_include("internal/pycore_interpframe_structs.h")
#include "internal/pycore_interpframe_structs.h"
#define SPPROF_CHECK_FRAME 1
#endif

// The GC state (capture/pyframes/gc_state.h): PyInterpreterState and its struct _gc_runtime_state.
#if PY_VERSION_HEX >= 0x030E0000 && __has_include("internal/pycore_interp_structs.h")
#include "internal/pycore_interp_structs.h"
#define SPPROF_CHECK_GC 1
#elif PY_VERSION_HEX < 0x030E0000 && __has_include("internal/pycore_interp.h")
#if PY_VERSION_HEX < 0x030D0000
// Before 3.13 pycore_atomic.h spells its atomics with C11 <stdatomic.h>, which C++ cannot
// compile; its builtin-atomics branch declares the same plain-sized fields, so the layout holds.
#undef HAVE_STD_ATOMIC
#endif
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX < 0x030C0000
#include "internal/pycore_runtime.h"  // _PyRuntimeState: the one GIL lives there before 3.12
#endif
#define SPPROF_CHECK_GC 1
#endif

#include "capture/pyframes/gc_state.h"
#include "capture/pyframes/gil_state.h"
#include "framewalker.h"

#if defined(SPPROF_CHECK_FRAME)
#define SPPROF_SAME_OFFSET(mirror, field) \
    static_assert(offsetof(mirror, field) == offsetof(_PyInterpreterFrame, field), \
                  "mirrored _PyInterpreterFrame." #field " is at the wrong offset")
#if PY_VERSION_HEX >= 0x030E0000
using Mirror = spprof::MirrorFrame314;
SPPROF_SAME_OFFSET(Mirror, f_executable);
SPPROF_SAME_OFFSET(Mirror, f_funcobj);
SPPROF_SAME_OFFSET(Mirror, instr_ptr);
SPPROF_SAME_OFFSET(Mirror, stackpointer);
SPPROF_SAME_OFFSET(Mirror, return_offset);
static_assert(sizeof(Mirror) == offsetof(_PyInterpreterFrame, localsplus), "a field was added or removed");
static_assert(FRAME_OWNED_BY_GENERATOR == spprof::PyLayout::kOwnedByGenerator, "owner enum");
static_assert(FRAME_OWNED_BY_INTERPRETER == spprof::PyLayout::kOwnedByInterpreter, "owner enum");
#if PY_VERSION_HEX >= 0x030F0000
// 3.15: no CSTACK owner any more; INTERPRETER is the highest.
static_assert(FRAME_OWNED_BY_INTERPRETER == spprof::PyLayout::kMaxOwner, "owner enum");
#else
static_assert(FRAME_OWNED_BY_CSTACK == spprof::PyLayout::kOwnedByCStack, "owner enum");
static_assert(FRAME_OWNED_BY_CSTACK == spprof::PyLayout::kMaxOwner, "owner enum");
#endif
#elif PY_VERSION_HEX >= 0x030D0000
using Mirror = spprof::MirrorFrame313;
SPPROF_SAME_OFFSET(Mirror, f_executable);
SPPROF_SAME_OFFSET(Mirror, instr_ptr);
SPPROF_SAME_OFFSET(Mirror, stacktop);
static_assert(FRAME_OWNED_BY_CSTACK == spprof::PyLayout::kOwnedByCStack, "owner enum");
static_assert(FRAME_OWNED_BY_GENERATOR == spprof::PyLayout::kOwnedByGenerator, "owner enum");
#elif PY_VERSION_HEX >= 0x030C0000
using Mirror = spprof::MirrorFrame312;
SPPROF_SAME_OFFSET(Mirror, f_code);
SPPROF_SAME_OFFSET(Mirror, prev_instr);
SPPROF_SAME_OFFSET(Mirror, stacktop);
static_assert(FRAME_OWNED_BY_CSTACK == spprof::PyLayout::kOwnedByCStack, "owner enum");
static_assert(FRAME_OWNED_BY_GENERATOR == spprof::PyLayout::kOwnedByGenerator, "owner enum");
#else
using Mirror = spprof::MirrorFrame311;
SPPROF_SAME_OFFSET(Mirror, f_code);
SPPROF_SAME_OFFSET(Mirror, prev_instr);
SPPROF_SAME_OFFSET(Mirror, is_entry);
static_assert(FRAME_OWNED_BY_GENERATOR == spprof::PyLayout::kOwnedByGenerator, "owner enum");
#endif
SPPROF_SAME_OFFSET(Mirror, previous);
SPPROF_SAME_OFFSET(Mirror, owner);
#endif

#if defined(SPPROF_CHECK_GC) && !defined(Py_GIL_DISABLED)
static_assert(spprof::kGcCollectingOffset ==
                  offsetof(PyInterpreterState, gc) + offsetof(struct _gc_runtime_state, collecting),
              "mirrored PyInterpreterState.gc.collecting is at the wrong offset");
static_assert(sizeof(((struct _gc_runtime_state*)nullptr)->collecting) == sizeof(int), "collecting is an int");
#endif

// The GIL's state (capture/pyframes/gil_state.h), where the headers that hold the GC state hold it too.
#if defined(SPPROF_CHECK_GC) && !defined(Py_GIL_DISABLED)
static_assert(spprof::kGilLastHolderOffset == offsetof(struct _gil_runtime_state, last_holder), "GIL last_holder");
static_assert(spprof::kGilLockedOffset == offsetof(struct _gil_runtime_state, locked), "GIL locked");
static_assert(sizeof(((struct _gil_runtime_state*)nullptr)->last_holder) == sizeof(uintptr_t), "last_holder is a word");
static_assert(sizeof(((struct _gil_runtime_state*)nullptr)->locked) == sizeof(int), "locked is an int");
#if PY_VERSION_HEX >= 0x030C0000
static_assert(spprof::kInterpGilPointerOffset == offsetof(PyInterpreterState, ceval) + offsetof(struct _ceval_state, gil),
              "mirrored PyInterpreterState.ceval.gil is at the wrong offset");
static_assert(sizeof(((struct _ceval_state*)nullptr)->gil) == sizeof(void*), "ceval.gil is a pointer");
#else
static_assert(spprof::kRuntimeGilOffset == offsetof(_PyRuntimeState, ceval) + offsetof(struct _ceval_runtime_state, gil),
              "mirrored _PyRuntime.ceval.gil is at the wrong offset");
#endif
#endif
