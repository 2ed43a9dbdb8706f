// pyframes/py39.h: frame layout of CPython 3.9 and 3.10.
//
// tstate->frame is a PyFrameObject (public struct in these versions); f_back links towards the
// root. f_lasti counts bytes on 3.9 and code units on 3.10; -1 means "not started". Every
// frame runs in its own _PyEval_EvalFrameDefault call, so every frame is an entry frame.
#pragma once

#include <frameobject.h>  // PyFrameObject is public here, but not included by Python.h

#include "../reader.h"

namespace spprof {

struct PyLayout {
    static constexpr const char* kName = "3.9/3.10 PyFrameObject";
    // A whole chain ends at a shim (a frame object chain ends at any frame): one that ends elsewhere was cut, i.e. torn.
    static constexpr bool kEndsAtShim = false;

    template <class R>
    SPPROF_NO_SANITIZE_ADDRESS static bool first_frame(const R& r, uintptr_t tstate, uintptr_t* out) {
        return r.read(tstate + offsetof(PyThreadState, frame), out, sizeof *out);
    }

    template <class R>
    SPPROF_NO_SANITIZE_ADDRESS static bool read_frame(const R& r, uintptr_t frame, FrameView* v) {
        uintptr_t code = 0, back = 0;
        int lasti = 0;
        if constexpr (ReaderHasView<R>::value) {  // one check for the frame, then loads
            const auto* f = static_cast<const unsigned char*>(r.view(frame, sizeof(PyFrameObject)));
            if (f == nullptr) return false;
            back = load_field<uintptr_t>(f, offsetof(PyFrameObject, f_back));
            code = load_field<uintptr_t>(f, offsetof(PyFrameObject, f_code));
            lasti = load_field<int>(f, offsetof(PyFrameObject, f_lasti));
        } else if (!r.read(frame + offsetof(PyFrameObject, f_back), &back, sizeof back) ||
                   !r.read(frame + offsetof(PyFrameObject, f_code), &code, sizeof code) ||
                   !r.read(frame + offsetof(PyFrameObject, f_lasti), &lasti, sizeof lasti)) {
            return false;
        }
        v->code = code;
        v->previous = back;
#if PY_VERSION_HEX >= 0x030A0000
        v->instr = lasti < 0 ? 0u : static_cast<uint32_t>(lasti);
#else
        v->instr = lasti < 0 ? 0u : static_cast<uint32_t>(lasti) / 2u;
#endif
        v->is_entry = true;
        return true;
    }
    static void finish_frame(const CodeFacts&, FrameView*) {}  // f_lasti is the offset already
};

}  // namespace spprof
