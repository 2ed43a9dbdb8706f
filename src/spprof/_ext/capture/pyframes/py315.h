// pyframes/py315.h: frame layout of CPython 3.15 (checked against 3.15.2 from Debian).
//
// The frame is laid out as in 3.14 (stackref_frame.h); what differs is its owners: CSTACK is
// gone, so INTERPRETER=3, the owner of each eval-loop entry frame, is the highest. 3.15 also
// puts a sentinel frame at the bottom of every thread's chain (tstate->base_frame, owned by
// INTERPRETER too), so a whole chain still ends at a shim. Everything else the walk reads
// (tstate->current_frame, co_code_adaptive, _co_firsttraceable, co_firstlineno, co_name) is
// where 3.14 has it.
#pragma once

#include "stackref_frame.h"

namespace spprof {

struct PyLayout : StackRefFrameLayout</*shim=*/3, /*max owner=*/3> {
    static constexpr const char* kName = "3.15 _PyInterpreterFrame";
};

}  // namespace spprof
