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
    // A whole chain ends at a shim (the first entry into the eval loop pushes the bottom shim): one that ends elsewhere was cut, i.e. torn.
    static constexpr bool kEndsAtShim = true;
    static constexpr char kOwnedByGenerator = 1;
    static constexpr char kMaxOwner = 3;  // CSTACK: the highest owner this version has
    static constexpr char kOwnedByCStack = 3;
    static constexpr bool kCheckCodeType = true;  // f_executable: a code object, or None
    using Frame = MirrorFrame313;
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t code(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, f_executable));
    }
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t instr_ptr(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, instr_ptr));
    }
    static bool is_shim(char owner) { return owner == kOwnedByCStack; }
    static bool is_entry(const unsigned char*) { return false; }
    static bool not_python(char) { return false; }

    template <class R>
    SPPROF_NO_SANITIZE_ADDRESS static bool first_frame(const R& r, uintptr_t tstate, uintptr_t* out) {
        return first_frame_direct(r, tstate, out);
    }
    template <class R>
    SPPROF_NO_SANITIZE_ADDRESS static bool read_frame(const R& r, uintptr_t frame, FrameView* v) {
        return read_interp_frame<PyLayout>(r, frame, v);
    }
    static void finish_frame(const CodeFacts& facts, FrameView* v) { finish_interp_frame(facts, v); }
};

}  // namespace spprof
