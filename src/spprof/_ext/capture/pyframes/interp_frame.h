// pyframes/interp_frame.h: helpers shared by the _PyInterpreterFrame layouts (3.11+).
//
// The bytecode of a code object starts at co_code_adaptive (public struct field since 3.11);
// offsets are in code units of 2 bytes. A frame whose instruction pointer is before
// _co_firsttraceable has not started yet (incomplete) unless a generator owns it.
#pragma once

#include "../code_facts.h"
#include "../reader.h"

namespace spprof {

// The instruction offset (code units) of a frame whose code object's facts are known; sets
// v->skip for a frame that has not reached its first traceable instruction (incomplete),
// unless a generator owns it.
inline void finish_interp_frame(const CodeFacts& facts, FrameView* v) {
    // v->code, not facts.code: they are equal (facts are v->code's), and v->code is already
    // in a register after the cache probe.
    const uintptr_t start = v->code + offsetof(PyCodeObject, co_code_adaptive);
    if (v->check_start && v->instr_ptr < start + 2u * static_cast<uintptr_t>(facts.first_traceable))
        v->skip = true;
    v->instr = v->instr_ptr > start ? static_cast<uint32_t>((v->instr_ptr - start) / 2u) : 0u;
}

#if PY_VERSION_HEX < 0x030D0000
// 3.11/3.12: the current frame hangs off tstate->cframe.
template <class R>
SPPROF_NO_SANITIZE_ADDRESS inline bool first_frame_via_cframe(const R& r, uintptr_t tstate, uintptr_t* out) {
    uintptr_t cframe = 0;
    if (!r.read(tstate + offsetof(PyThreadState, cframe), &cframe, sizeof cframe)) return false;
    return r.read(cframe + offsetof(_PyCFrame, current_frame), out, sizeof *out);
}
#else
// 3.13+: tstate->current_frame.
template <class R>
SPPROF_NO_SANITIZE_ADDRESS inline bool first_frame_direct(const R& r, uintptr_t tstate, uintptr_t* out) {
    return r.read(tstate + offsetof(PyThreadState, current_frame), out, sizeof *out);
}
#endif

// The one reader of every _PyInterpreterFrame layout (3.11+). `Layout` supplies the mirrored
// struct (`previous` and `owner` have those names in every version, read here) and small
// accessors over its bytes (read_object(), load_field()), so that a reader with a view loads
// just these fields:
//   using Frame = MirrorFrameXY;
//   static uintptr_t code(const unsigned char*);       // the code object (or None/garbage)
//   static uintptr_t instr_ptr(const unsigned char*);
//   static bool is_shim(char owner);                  // a C-stack entry frame (3.12+)
//   static bool is_entry(const unsigned char*);       // 3.11's is_entry; false elsewhere
//   static bool not_python(char owner);               // an owner that is no Python frame at all
//   static constexpr bool kCheckCodeType;             // f_executable may be something else
//   static constexpr char kOwnedByGenerator;
//   static constexpr char kMaxOwner;                  // owners above it do not exist: torn
// False when the frame cannot be read or its owner is no owner this version has.
template <class Layout, class R>
SPPROF_NO_SANITIZE_ADDRESS inline bool read_interp_frame(const R& r, uintptr_t frame, FrameView* v) {
    using Frame = typename Layout::Frame;
    Frame copy;  // used by readers without a view only
    const unsigned char* f = read_object(r, frame, &copy);
    if (f == nullptr) return false;
    v->previous = load_field<uintptr_t>(f, offsetof(Frame, previous));
    const char owner = load_field<char>(f, offsetof(Frame, owner));
    // Compared as unsigned: char is signed on x86_64 and unsigned on arm64, and a torn byte
    // (0x80-0xff) must fail the range check on both.
    if (static_cast<unsigned char>(owner) > static_cast<unsigned char>(Layout::kMaxOwner)) return false;
    if (Layout::is_shim(owner) || Layout::not_python(owner)) {
        v->is_shim = Layout::is_shim(owner);
        v->skip = true;
        return true;
    }
    v->code = Layout::code(f);
    v->code_may_be_other = Layout::kCheckCodeType;  // None where a shim has no code
    v->is_entry = Layout::is_entry(f);
    v->instr_ptr = Layout::instr_ptr(f);
    v->check_start = owner != Layout::kOwnedByGenerator;
    return true;
}

}  // namespace spprof
