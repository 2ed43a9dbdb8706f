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
inline bool is_code_object(const R& r, uintptr_t obj) {
    uintptr_t type = 0;
    return obj != 0 && r.read(obj + offsetof(PyObject, ob_type), &type, sizeof type) &&
           type == reinterpret_cast<uintptr_t>(&PyCode_Type);
}

}  // namespace spprof
