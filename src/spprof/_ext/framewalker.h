// framewalker.h: the version-neutral walk of a thread's Python frame chain.
//
// One walk template over a Reader (how memory is read) and the layout of the CPython version
// we are compiled against (pyframes/pyXY.h, chosen by one PY_VERSION_HEX dispatch below).
// The walk records raw frames only: code pointer, instruction offset, fingerprint. Names and
// lines are resolved later, GIL held (resolver.h).
//
// SIGNAL-SAFE, NO-HEAP when the Reader is: no allocation, no locks, no Python API, every loop
// bounded. Callers: the Linux signal handler (DirectReader over its own thread's memory) and
// the macOS Mach sampler (a reader that cannot fault, over a suspended thread).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "sample_record.h"

namespace spprof {

// One frame as the version layer sees it.
struct FrameView {
    uintptr_t code = 0;      // PyCodeObject*, 0 when the frame has none (shims, None)
    uintptr_t previous = 0;  // next frame towards the root
    uint32_t instr = 0;      // instruction offset in code units
    bool skip = false;       // not a Python frame to report (incomplete, shim)
    bool is_shim = false;    // 3.12+: the C-stack frame pushed by each entry into the eval loop
    bool is_entry = false;   // first Python frame of a C call into the eval loop
};

// Reads the caller's own memory. For the Linux handler, which only ever walks the thread it
// interrupted: that chain is consistent at every instruction boundary of that thread, so the
// checks here (null page, natural alignment) catch torn or stale values and a load is enough.
struct DirectReader {
    bool read(uintptr_t addr, void* out, size_t n) const {
        const uintptr_t align = n >= 8 ? 8 : (n >= 4 ? 4 : (n >= 2 ? 2 : 1));
        if (addr < 4096 || (addr & (align - 1)) != 0) return false;
        std::memcpy(out, reinterpret_cast<const void*>(addr), n);
        return true;
    }
};

}  // namespace spprof

// ---- the one version dispatch ------------------------------------------------------------
#if defined(Py_GIL_DISABLED)
#error "spprof does not support free-threaded CPython builds yet"
#elif PY_VERSION_HEX >= 0x030E0000
#include "pyframes/py314.h"
#elif PY_VERSION_HEX >= 0x030D0000
#include "pyframes/py313.h"
#elif PY_VERSION_HEX >= 0x030C0000
#include "pyframes/py312.h"
#elif PY_VERSION_HEX >= 0x030B0000
#include "pyframes/py311.h"
#elif PY_VERSION_HEX >= 0x03090000
#include "pyframes/py39.h"
#else
#error "unsupported CPython version: spprof needs 3.9 or newer"
#endif

namespace spprof {

// Reads the fields of a code object the capture path needs. Returns false when `code` does
// not look like a live code object.
template <class Reader>
inline bool read_code_fingerprint(const Reader& r, uintptr_t code, uint32_t* fingerprint) {
    uintptr_t type = 0;
    if (!r.read(code + offsetof(PyObject, ob_type), &type, sizeof type)) return false;
    if (type != reinterpret_cast<uintptr_t>(&PyCode_Type)) return false;
    int firstlineno = 0;
    uintptr_t name = 0;
    if (!r.read(code + offsetof(PyCodeObject, co_firstlineno), &firstlineno, sizeof firstlineno))
        return false;
    if (!r.read(code + offsetof(PyCodeObject, co_name), &name, sizeof name)) return false;
    *fingerprint = code_fingerprint(firstlineno, name);
    return true;
}

struct WalkResult {
    uint32_t depth = 0;
    bool truncated = false;
    bool error = false;  // a read failed mid-chain: the frames so far are kept
};

// Walk the Python frames of `tstate`, leaf first, into out[0..max). SIGNAL-SAFE, NO-HEAP.
// Shims and incomplete frames do not count towards `max`; kWalkBudget bounds the loop anyway,
// so a corrupted (cyclic) chain ends as a truncated sample, not a hang.
constexpr uint32_t kWalkBudget = 4 * kMaxPythonFrames;

template <class Reader>
inline WalkResult walk_python_stack(const Reader& r, uintptr_t tstate, RawFrame* out,
                                    uint32_t max) {
    WalkResult res;
    uintptr_t frame = 0;
    if (!PyLayout::first_frame(r, tstate, &frame)) {
        res.error = true;
        return res;
    }
    for (uint32_t step = 0; frame != 0; ++step) {
        if (step == kWalkBudget) {
            res.truncated = true;
            break;
        }
        FrameView v;
        if (!PyLayout::read_frame(r, frame, &v)) {
            res.error = true;
            break;
        }
        if (v.is_shim) {
            // 3.12+: the frame recorded just before a shim is the entry frame of that eval call.
            if (res.depth > 0) out[res.depth - 1].instr |= kInstrEntryFlag;
        } else if (!v.skip && v.code != 0) {
            if (res.depth == max) {
                res.truncated = true;
                break;
            }
            uint32_t fp = 0;
            if (!read_code_fingerprint(r, v.code, &fp)) {
                res.error = true;
                break;
            }
            RawFrame& f = out[res.depth++];
            f.code = v.code;
            f.instr = (v.instr & ~kInstrEntryFlag) | (v.is_entry ? kInstrEntryFlag : 0u);
            f.fingerprint = fp;
        }
        frame = v.previous;
    }
    return res;
}

}  // namespace spprof
