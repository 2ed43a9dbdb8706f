// pyframes/py314.h: frame layout of CPython 3.14 (written from its headers; no 3.14
// interpreter runs here, so this is compile-checked in spirit only).
//
// tstate->current_frame; f_executable and f_funcobj are _PyStackRef, a tagged word: clear the
// tag bits to get the object. stacktop became a stackpointer. Owners: THREAD=0, GENERATOR=1,
// FRAME_OBJECT=2, INTERPRETER=3, CSTACK/THREAD_STATE=4: every owner >= 3 is not a Python
// frame; the shim is the C-stack one. Mirrored; checked by layout_check.cpp where the real
// header is installed.
#pragma once

#include "interp_frame.h"

namespace spprof {

struct MirrorFrame314 {
    uintptr_t f_executable;  // _PyStackRef
    MirrorFrame314* previous;
    uintptr_t f_funcobj;     // _PyStackRef
    PyObject* f_globals;
    PyObject* f_builtins;
    PyObject* f_locals;
    PyObject* frame_obj;
    uint16_t* instr_ptr;
    void* stackpointer;
    uint16_t return_offset;
    char owner;
    uint8_t visited;
};

struct PyLayout {
    static constexpr const char* kName = "3.14 _PyInterpreterFrame";
    // A whole chain ends at a shim (not verified on 3.14 yet): one that ends elsewhere was cut, i.e. torn.
    static constexpr bool kEndsAtShim = false;
    static constexpr char kOwnedByGenerator = 1;
    static constexpr char kMaxOwner = 4;  // CSTACK: the highest owner this version has
    static constexpr char kFirstNonPythonOwner = 3;
    static constexpr char kOwnedByCStack = 4;
    static constexpr uintptr_t kStackRefTagBits = 7;  // objects are at least 8-aligned
    static constexpr bool kCheckCodeType = true;
    using Frame = MirrorFrame314;
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t code(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, f_executable)) & ~kStackRefTagBits;
    }
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t instr_ptr(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, instr_ptr));
    }
    static bool is_shim(char owner) { return owner == kOwnedByCStack; }
    static bool is_entry(const unsigned char*) { return false; }
    static bool not_python(char owner) { return owner >= kFirstNonPythonOwner; }

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
