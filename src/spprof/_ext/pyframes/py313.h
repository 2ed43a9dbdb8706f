// pyframes/py313.h: frame layout of CPython 3.13.
//
// tstate->current_frame; f_executable is a PyObject* (a code object, or None for shims);
// instr_ptr is the instruction executing or about to begin. Owners: THREAD=0, GENERATOR=1,
// FRAME_OBJECT=2, CSTACK=3 (the shim of each entry into the eval loop). Mirrored; checked by
// layout_check.cpp.
#pragma once

#include "interp_frame.h"

namespace spprof {

struct MirrorFrame313 {
    PyObject* f_executable;
    MirrorFrame313* previous;
    PyObject* f_funcobj;
    PyObject* f_globals;
    PyObject* f_builtins;
    PyObject* f_locals;
    PyObject* frame_obj;
    uint16_t* instr_ptr;
    int stacktop;
    uint16_t return_offset;
    char owner;
};

struct PyLayout {
    static constexpr const char* kName = "3.13 _PyInterpreterFrame";
    static constexpr char kOwnedByGenerator = 1;
    static constexpr char kOwnedByCStack = 3;

    template <class R>
    static bool first_frame(const R& r, uintptr_t tstate, uintptr_t* out) {
        return r.read(tstate + offsetof(PyThreadState, current_frame), out, sizeof *out);
    }

    template <class R>
    static bool read_frame(const R& r, uintptr_t frame, FrameView* v) {
        MirrorFrame313 f;
        if (!r.read(frame, &f, sizeof f)) return false;
        v->previous = reinterpret_cast<uintptr_t>(f.previous);
        if (f.owner == kOwnedByCStack) {
            v->is_shim = true;
            v->skip = true;
            return true;
        }
        const uintptr_t exe = reinterpret_cast<uintptr_t>(f.f_executable);
        if (!is_code_object(r, exe)) {  // None or a non-code executable: nothing to report
            v->skip = true;
            return true;
        }
        v->code = exe;
        bool incomplete = false;
        if (!read_instr_offset(r, v->code, reinterpret_cast<uintptr_t>(f.instr_ptr),
                               f.owner != kOwnedByGenerator, &v->instr, &incomplete))
            return false;
        v->skip = incomplete;
        return true;
    }
};

}  // namespace spprof
