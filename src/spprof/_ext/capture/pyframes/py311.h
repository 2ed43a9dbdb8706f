// pyframes/py311.h: frame layout of CPython 3.11.
//
// tstate->cframe->current_frame is a _PyInterpreterFrame; `previous` links towards the root;
// prev_instr is the last instruction started; is_entry marks the first frame of each eval
// call. Owners: THREAD=0, GENERATOR=1, FRAME_OBJECT=2. Mirrored here because the struct is
// internal; layout_check.cpp asserts it against the real header where that is installed.
#pragma once

#include "interp_frame.h"

namespace spprof {

struct MirrorFrame311 {
    PyObject* f_func;
    PyObject* f_globals;
    PyObject* f_builtins;
    PyObject* f_locals;
    PyCodeObject* f_code;
    PyObject* frame_obj;
    MirrorFrame311* previous;
    uint16_t* prev_instr;
    int stacktop;
    // A byte, not a bool: the signal can land while the interpreter is still filling a new
    // frame in, and loading a bool from a byte that is not 0 or 1 is undefined behaviour.
    uint8_t is_entry;
    char owner;
};

struct PyLayout {
    static constexpr const char* kName = "3.11 _PyInterpreterFrame";
    // A whole chain ends at a shim (no shims before 3.12): one that ends elsewhere was cut, i.e. torn.
    static constexpr bool kEndsAtShim = false;
    static constexpr char kOwnedByGenerator = 1;
    static constexpr char kMaxOwner = 2;  // FRAME_OBJECT: the highest owner 3.11 has
    static constexpr bool kCheckCodeType = false;
    using Frame = MirrorFrame311;
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t code(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, f_code));
    }
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t instr_ptr(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, prev_instr));
    }
    static bool is_shim(char) { return false; }
    SPPROF_NO_SANITIZE_ADDRESS static bool is_entry(const unsigned char* f) {
        return load_field<uint8_t>(f, offsetof(Frame, is_entry)) != 0;
    }
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
