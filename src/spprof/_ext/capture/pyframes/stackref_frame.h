// pyframes/stackref_frame.h: the _PyInterpreterFrame of CPython 3.14 and 3.15, where
// f_executable and f_funcobj are _PyStackRef (a tagged word: clear the tag bits to get the
// object) and stacktop became a stackpointer. The two versions lay the frame out alike and
// differ in their owner values (py314.h, py315.h say which); both mirror it from here, and
// layout_check.cpp checks the mirror against the real header of the version built against.
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

// The accessors read_interp_frame needs, over MirrorFrame314. Each C entry into the eval loop
// pushes a frame owned by the interpreter (`kShimOwner`, None as f_executable): the Python
// frame just above it is an entry frame, and every whole chain ends at one. Owners above
// `kMaxOwnerV` do not exist: a frame that has one is torn.
template <char kShimOwner, char kMaxOwnerV>
struct StackRefFrameLayout {
    static constexpr bool kEndsAtShim = true;
    static constexpr char kOwnedByGenerator = 1;
    static constexpr char kOwnedByInterpreter = kShimOwner;
    static constexpr char kMaxOwner = kMaxOwnerV;
    static constexpr uintptr_t kStackRefTagBits = 7;  // objects are at least 8-aligned
    static constexpr bool kCheckCodeType = true;      // f_executable: a code object, or None
    using Frame = MirrorFrame314;
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t code(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, f_executable)) & ~kStackRefTagBits;
    }
    SPPROF_NO_SANITIZE_ADDRESS static uintptr_t instr_ptr(const unsigned char* f) {
        return load_field<uintptr_t>(f, offsetof(Frame, instr_ptr));
    }
    // Every owner from the interpreter's up is a C-stack frame, no Python one.
    static bool is_shim(char owner) { return owner >= kShimOwner; }
    static bool is_entry(const unsigned char*) { return false; }
    static bool not_python(char owner) { return owner >= kShimOwner; }

    template <class R>
    SPPROF_NO_SANITIZE_ADDRESS static bool first_frame(const R& r, uintptr_t tstate, uintptr_t* out) {
        return first_frame_direct(r, tstate, out);
    }
    template <class R>
    SPPROF_NO_SANITIZE_ADDRESS static bool read_frame(const R& r, uintptr_t frame, FrameView* v) {
        return read_interp_frame<StackRefFrameLayout>(r, frame, v);
    }
    static void finish_frame(const CodeFacts& facts, FrameView* v) { finish_interp_frame(facts, v); }
};

}  // namespace spprof
