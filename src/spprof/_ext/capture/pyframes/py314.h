// pyframes/py314.h: frame layout of CPython 3.14 (checked against 3.14.10 from Debian).
//
// tstate->current_frame; the frame is the _PyStackRef one of stackref_frame.h. Owners:
// THREAD=0, GENERATOR=1, FRAME_OBJECT=2, INTERPRETER=3, CSTACK=4. Unlike 3.12/3.13, the frame
// each C entry into the eval loop pushes is owned by INTERPRETER (3), not CSTACK, which no
// 3.14 code assigns: both are C-stack frames here. Taking only CSTACK for the entry shim, as
// the first 3.14 layout did (written from the headers alone), marked no entry frame, so with
// native frames every Python frame went to the innermost eval loop.
#pragma once

#include "stackref_frame.h"

namespace spprof {

struct PyLayout : StackRefFrameLayout</*shim=*/3, /*max owner=*/4> {
    static constexpr const char* kName = "3.14 _PyInterpreterFrame";
    static constexpr char kOwnedByCStack = 4;
};

}  // namespace spprof
