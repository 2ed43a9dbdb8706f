// pyframes/interp_frame.h: helpers shared by the _PyInterpreterFrame layouts (3.11+).
//
// The bytecode of a code object starts at co_code_adaptive (public struct field since 3.11);
// offsets are in code units of 2 bytes. A frame whose instruction pointer is before
// _co_firsttraceable has not started yet (incomplete) unless a generator owns it.
#pragma once

namespace spprof {

template <class R>
inline bool read_instr_offset(const R& r, uintptr_t code, uintptr_t instr_ptr, bool check_start,
                              uint32_t* instr, bool* incomplete) {
    const uintptr_t start = code + offsetof(PyCodeObject, co_code_adaptive);
    *incomplete = false;
    if (check_start) {
        int first_traceable = 0;
        if (!r.read(code + offsetof(PyCodeObject, _co_firsttraceable), &first_traceable,
                    sizeof first_traceable))
            return false;
        if (instr_ptr < start + 2u * static_cast<uintptr_t>(first_traceable)) {
            *incomplete = true;
        }
    }
    *instr = instr_ptr > start ? static_cast<uint32_t>((instr_ptr - start) / 2u) : 0u;
    return true;
}

template <class R>
inline bool is_code_object(const R& r, uintptr_t obj);

#if PY_VERSION_HEX < 0x030D0000
// 3.11/3.12: the current frame hangs off tstate->cframe.
template <class R>
inline bool first_frame_via_cframe(const R& r, uintptr_t tstate, uintptr_t* out) {
    uintptr_t cframe = 0;
    if (!r.read(tstate + offsetof(PyThreadState, cframe), &cframe, sizeof cframe)) return false;
    return r.read(cframe + offsetof(_PyCFrame, current_frame), out, sizeof *out);
}
#else
// 3.13+: tstate->current_frame.
template <class R>
inline bool first_frame_direct(const R& r, uintptr_t tstate, uintptr_t* out) {
    return r.read(tstate + offsetof(PyThreadState, current_frame), out, sizeof *out);
}
#endif

// The one reader of every _PyInterpreterFrame layout (3.11+). `Layout` supplies the mirrored
// struct and small accessors:
//   using Frame = MirrorFrameXY;
//   static uintptr_t code(const Frame&);        // the code object (or None/garbage)
//   static uintptr_t instr_ptr(const Frame&);
//   static bool is_shim(const Frame&);          // a C-stack entry frame (3.12+)
//   static bool is_entry(const Frame&);         // 3.11's is_entry; false elsewhere
//   static bool not_python(const Frame&);       // an owner that is no Python frame at all
//   static constexpr bool kCheckCodeType;       // f_executable may be something else
//   static constexpr char kOwnedByGenerator;
template <class Layout, class R>
inline bool read_interp_frame(const R& r, uintptr_t frame, FrameView* v) {
    typename Layout::Frame f;
    if (!r.read(frame, &f, sizeof f)) return false;
    v->previous = reinterpret_cast<uintptr_t>(f.previous);
    if (Layout::is_shim(f) || Layout::not_python(f)) {
        v->is_shim = Layout::is_shim(f);
        v->skip = true;
        return true;
    }
    const uintptr_t code = Layout::code(f);
    if (Layout::kCheckCodeType && !is_code_object(r, code)) {  // None for a shim: nothing to report
        v->skip = true;
        return true;
    }
    v->code = code;
    v->is_entry = Layout::is_entry(f);
    bool incomplete = false;
    if (!read_instr_offset(r, code, Layout::instr_ptr(f), f.owner != Layout::kOwnedByGenerator,
                           &v->instr, &incomplete))
        return false;
    v->skip = incomplete;
    return true;
}

template <class R>
inline bool is_code_object(const R& r, uintptr_t obj) {
    uintptr_t type = 0;
    return obj != 0 && r.read(obj + offsetof(PyObject, ob_type), &type, sizeof type) &&
           type == reinterpret_cast<uintptr_t>(&PyCode_Type);
}

}  // namespace spprof
