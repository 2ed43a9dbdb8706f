// pyframes/py312.h: frame layout of CPython 3.12.
//
// Still tstate->cframe->current_frame; is_entry is gone: each C entry into the eval loop
// pushes a shim frame owned by the C stack (owner 3), so the Python frame just above a shim is
// an entry frame. prev_instr is the last instruction started. Owners: THREAD=0, GENERATOR=1,
// FRAME_OBJECT=2, CSTACK=3. Mirrored; checked by layout_check.cpp.
#pragma once

#include "interp_frame.h"

namespace spprof {

struct MirrorFrame312 {
    PyCodeObject* f_code;
    MirrorFrame312* previous;
    PyObject* f_funcobj;
    PyObject* f_globals;
    PyObject* f_builtins;
    PyObject* f_locals;
    PyObject* frame_obj;
    uint16_t* prev_instr;
    int stacktop;
    uint16_t return_offset;
    char owner;
};

struct PyLayout {
    static constexpr const char* kName = "3.12 _PyInterpreterFrame";
    // A whole chain ends at a shim (the first entry into the eval loop pushes the bottom shim): one that ends elsewhere was cut, i.e. torn.
    static constexpr bool kEndsAtShim = true;
    static constexpr char kOwnedByGenerator = 1;
    static constexpr char kMaxOwner = 3;  // CSTACK: the highest owner this version has
    static constexpr char kOwnedByCStack = 3;
    static constexpr bool kCheckCodeType = false;
    using Frame = MirrorFrame312;
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t code(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, f_code));
    }
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t instr_ptr(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, prev_instr));
    }
    static bool is_shim(char owner) { return owner == kOwnedByCStack; }
    static bool is_entry(const unsigned char*) { return false; }  // marked from the shim by the walk
    static bool not_python(char) { return false; }

    template <class R>
    SPPROF_NO_SANITIZE_ADDRESS static bool first_frame(const R& r, uintptr_t tstate, uintptr_t* out) {
        return first_frame_via_cframe(r, tstate, out);
    }
    template <class R>
    SPPROF_NO_SANITIZE_ADDRESS static bool read_frame(const R& r, uintptr_t frame, FrameView* v) {
        return read_interp_frame<PyLayout>(r, frame, v);
    }
    static void finish_frame(const CodeFacts& facts, FrameView* v) { finish_interp_frame(facts, v); }
};

}  // namespace spprof
