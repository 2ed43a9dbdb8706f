// framewalker.h: the version-neutral walk of a thread's Python frame chain.
//
// One walk template over a Reader (how memory is read) and the layout of the CPython version
// we are compiled against (pyframes/pyXY.h, chosen by one PY_VERSION_HEX dispatch below).
// The walk records raw frames only: code pointer, instruction offset, fingerprint. Names and
// lines are resolved later, GIL held (resolver.h).
//
// SIGNAL-SAFE, NO-HEAP when the Reader is: no allocation, no locks, no Python API, every loop
// bounded. Nothing read is trusted: an address no object can have, a frame owner this version
// does not have, a code pointer that is no code object end the walk (WalkResult::error),
// keeping the frames before; a cyclic chain ends at kWalkBudget. Loads that fault are the
// caller's to survive (the fault guard). Instruction offsets are checked by the resolver. Callers: the Linux signal handler (DirectReader over its own thread's memory) and
// the macOS Mach sampler (a reader that cannot fault, over a suspended thread).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "capture/code_facts.h"
#include "capture/reader.h"
#include "capture/sample_record.h"

namespace spprof {

// One frame as the version layer sees it.
struct FrameView {
    uintptr_t code = 0;      // PyCodeObject*, 0 when the frame has none (shims, None)
    uintptr_t previous = 0;  // next frame towards the root
    uint32_t instr = 0;      // instruction offset in code units
    bool skip = false;       // not a Python frame to report (incomplete, shim)
    bool is_shim = false;    // 3.12+: the C-stack frame pushed by each entry into the eval loop
    bool is_entry = false;   // first Python frame of a C call into the eval loop
    bool code_may_be_other = false;  // 3.13+: f_executable may be None: skip, not an error
    uintptr_t instr_ptr = 0;  // 3.11+: the raw instruction pointer (finish_frame turns it into instr)
    bool check_start = false; // 3.11+: an incomplete frame is skipped (not for generators)
};

}  // namespace spprof

// ---- the one version dispatch ------------------------------------------------------------
#if defined(Py_GIL_DISABLED)
#error "spprof does not support free-threaded CPython (3.13t/3.14t/3.15t): build it for a default CPython"
#elif PY_VERSION_HEX >= 0x03100000
// A newer CPython may move what the walk reads: its layout has to be checked and added first.
#error "spprof knows CPython's frame layouts up to 3.15: a newer CPython needs capture/pyframes/pyXY.h"
#elif PY_VERSION_HEX >= 0x030F0000
#include "capture/pyframes/py315.h"
#elif PY_VERSION_HEX >= 0x030E0000
#include "capture/pyframes/py314.h"
#elif PY_VERSION_HEX >= 0x030D0000
#include "capture/pyframes/py313.h"
#elif PY_VERSION_HEX >= 0x030C0000
#include "capture/pyframes/py312.h"
#elif PY_VERSION_HEX >= 0x030B0000
#include "capture/pyframes/py311.h"
#elif PY_VERSION_HEX >= 0x03090000
#include "capture/pyframes/py39.h"
#else
#error "unsupported CPython version: spprof needs 3.9 or newer"
#endif

namespace spprof {

// Reads a code object's facts. False when `code` is not a code object (or cannot be read).
template <class Reader>
SPPROF_NO_SANITIZE_ADDRESS inline bool read_code_facts(const Reader& r, uintptr_t code, CodeFacts* out) {
    uintptr_t type = 0;
    if (code == 0 || !r.read(code + offsetof(PyObject, ob_type), &type, sizeof type)) return false;
    if (type != reinterpret_cast<uintptr_t>(&PyCode_Type)) return false;
    int first_line = 0;
    uintptr_t name = 0;
    if (!r.read(code + offsetof(PyCodeObject, co_firstlineno), &first_line, sizeof first_line) ||
        !r.read(code + offsetof(PyCodeObject, co_name), &name, sizeof name))
        return false;
    int first_traceable = 0;
#if PY_VERSION_HEX >= 0x030B0000
    if (!r.read(code + offsetof(PyCodeObject, _co_firsttraceable), &first_traceable,
                sizeof first_traceable))
        return false;
#endif
    out->code = code;
    out->fingerprint = code_fingerprint(first_line, name);
    out->first_traceable = first_traceable;
    return true;
}

struct WalkResult {
    uint32_t depth = 0;
    bool truncated = false;
    bool error = false;  // a read failed or a value was implausible (a torn chain): the
                         // frames so far are kept, nothing past that value is followed
};

// Walk the Python frames of `tstate`, leaf first, into out[0..max). SIGNAL-SAFE, NO-HEAP.
// Shims and incomplete frames do not count towards `max`; they have a budget of their own
// (kSkipBudget), so the loop runs at most max + kSkipBudget <= kWalkBudget times and a
// corrupted (cyclic) chain ends as a truncated sample, not a hang. A recorded frame pays only
// the `max` test, a skipped one only the budget test. `cache`, when given, belongs to the
// sampled thread and is used by its capture path only.
constexpr uint32_t kWalkBudget = 4 * kMaxPythonFrames;
constexpr uint32_t kSkipBudget = kWalkBudget - kMaxPythonFrames;

// The walk without a cache: every frame reads its code object.
struct NoCodeFactsCache {
    void sync() {}
    static constexpr CodeFacts kEmpty{};
    const CodeFacts& find(uintptr_t) const { return kEmpty; }
    void put(const CodeFacts&) {}
};

// Where the walk reports each frame it recorded, as it goes: called with the end of the
// frames written so far. The capture path keeps it in a volatile slot, so that a walk
// abandoned by a fault (see signal_handler.cpp) still knows how many frames it wrote (one
// store per frame); other callers need nothing.
struct NoProgress {
    void operator()(const RawFrame*) const {}
};
struct VolatileProgress {
    const RawFrame* volatile* end;
    void operator()(const RawFrame* e) const { *end = e; }
};

// The loop, once per cache type: the per-frame path then has no "is there a cache" test.
template <class Reader, class Cache, class Progress>
SPPROF_NO_SANITIZE_ADDRESS inline WalkResult walk_frames(const Reader& r, uintptr_t frame, RawFrame* out,
                                                         uint32_t max, Cache& cache, Progress progress) {
    WalkResult res;
    cache.sync();
    RawFrame* next = out;
    RawFrame* const end = out + max;
    CodeFacts read;  // out of the loop: a cache hit does not initialise it
    uint32_t skips = 0;
    // Where the chain must end (PyLayout::kEndsAtShim): the last frame visited was a shim, or
    // none was visited. Starts true: an empty chain is whole.
    bool at_shim = true;
    for (;;) {
        FrameView v;
        // The end of the chain (frame 0) fails here too, as every Reader rejects the null
        // page: one test per frame instead of two. Sorted out on the way out.
        if (__builtin_expect(!PyLayout::read_frame(r, frame, &v), 0)) {
            // A chain cut short (a generator's link not yet set when the sample landed) ends
            // at 0 too: where every whole chain ends at a shim, that is torn.
            if (frame != 0 || (PyLayout::kEndsAtShim && !at_shim)) res.error = true;
            break;
        }
        frame = v.previous;
        at_shim = v.is_shim;
        if (v.is_shim) {
            // 3.12+: the frame recorded just before a shim is the entry frame of that eval call.
            if (next != out) next[-1].instr |= kInstrEntryFlag;
            if (__builtin_expect(++skips == kSkipBudget, 0)) goto over_budget;
            continue;
        }
        if (v.skip || v.code == 0) {
            if (__builtin_expect(++skips == kSkipBudget, 0)) goto over_budget;
            continue;
        }
        {
            const CodeFacts* facts = &cache.find(v.code);
            if (__builtin_expect(facts->code != v.code, 0)) {  // a miss: rare once warm
                if (!read_code_facts(r, v.code, &read)) {
                    if (v.code_may_be_other) {  // None: nothing to report
                        if (++skips == kSkipBudget) goto over_budget;
                        continue;
                    }
                    res.error = true;
                    break;
                }
                cache.put(read);
                facts = &read;
            }
            PyLayout::finish_frame(*facts, &v);
            if (v.skip) {  // incomplete: not started yet
                if (++skips == kSkipBudget) goto over_budget;
                continue;
            }
            if (next == end) {
                res.truncated = true;
                break;
            }
            next->code = v.code;
            next->instr = (v.instr & ~kInstrEntryFlag) | (v.is_entry ? kInstrEntryFlag : 0u);
            next->fingerprint = facts->fingerprint;
            ++next;
            progress(next);
        }
        continue;
    over_budget:
        res.truncated = true;  // more skipped frames than any real chain has: a cycle
        break;
    }
    res.depth = static_cast<uint32_t>(next - out);
    return res;
}

template <class Reader, class Progress = NoProgress>
SPPROF_NO_SANITIZE_ADDRESS inline WalkResult walk_python_stack(const Reader& r, uintptr_t tstate, RawFrame* out,
                                                               uint32_t max, CodeFactsCache* cache = nullptr,
                                                               Progress progress = Progress{}) {
    uintptr_t frame = 0;
    if (!PyLayout::first_frame(r, tstate, &frame)) {
        WalkResult res;
        res.error = true;
        return res;
    }
    if (cache != nullptr) return walk_frames(r, frame, out, max, *cache, progress);
    NoCodeFactsCache none;
    return walk_frames(r, frame, out, max, none, progress);
}

}  // namespace spprof
