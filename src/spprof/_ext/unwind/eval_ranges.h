// unwind/eval_ranges.h: where CPython's eval loop lives, to interleave Python and native frames.
//
// Each native frame inside _PyEval_EvalFrameDefault is one C-level entry into the eval loop;
// the drain replaces it with the Python frames of that entry (up to the next entry frame).
// gcc splits the loop's unlikely blocks into a separate `.cold` part
// (`_PyEval_EvalFrameDefault.cold`, a local symbol only in .symtab: 3.11 and 3.12 builds here
// have one, 3.9 and 3.13 none), and a pc there belongs to the same C frame, so every part is
// recorded. find_eval_ranges locates the function with dlsym (it is exported from libpython or
// from a python executable linked with -export-dynamic) and reads the parts from the module's
// symbol table through the Symbolizer; in a stripped image (Debian's python3.14/3.15, where
// almost the whole loop is in the unnamed .cold part) from its code and unwind data.
//
// EvalRanges is a small POD: copy it into the session once at start; is_eval_frame is
// SIGNAL-SAFE and NO-HEAP, usable from the handler and the drain alike.
#pragma once

#include <cstdint>

#include "error.h"
#include "unwind/symbolizer.h"

namespace spprof {

struct EvalRanges {
    // The main function and its split parts; gcc emits at most one .cold part per function,
    // clones (.part/.constprop/.isra) are rare for it: 8 is ample.
    static constexpr uint32_t kMax = 8;
    uint32_t count = 0;
    uint64_t lo[kMax] = {};
    uint64_t hi[kMax] = {};  // exclusive
};

// Fill `out` with the ranges of _PyEval_EvalFrameDefault and its parts in this process: those
// the symbol table names, plus, with `unwind` (may be null), the split parts it does not name
// (unwind/split_parts.h). Normal context (dlsym, file reads, allocation), the thread that owns
// `symbolizer`; GIL not needed. Errors: kRuntime when the function cannot be found (then count == 0 and the drain
// should put all Python frames above the native ones). macOS: one range, from the image's
// LC_FUNCTION_STARTS (platform_function_extent).
struct UnwindSnapshot;
Error find_eval_ranges(Symbolizer& symbolizer, const UnwindSnapshot* unwind, EvalRanges* out);

// Same, for any function name; used by find_eval_ranges and by tests.
Error find_function_ranges(Symbolizer& symbolizer, const void* addr_in_function, const char* name,
                           EvalRanges* out);

// True when pc lies in one of the ranges. For a return address (every native frame but the
// innermost), pass pc - 1. SIGNAL-SAFE, NO-HEAP; any thread.
inline bool is_eval_frame(const EvalRanges& r, uint64_t pc) {
    const uint32_t n = r.count < EvalRanges::kMax ? r.count : EvalRanges::kMax;
    for (uint32_t i = 0; i < n; ++i)
        if (pc >= r.lo[i] && pc < r.hi[i]) return true;
    return false;
}

// How many of `n` native frames (leaf first: the leaf pc as is, return addresses minus one)
// are eval-loop calls. SIGNAL-SAFE, NO-HEAP; any thread.
inline uint32_t eval_calls_in(const EvalRanges& r, const uint64_t* pcs, uint32_t n) {
    uint32_t calls = 0;
    for (uint32_t i = 0; i < n; ++i) calls += is_eval_frame(r, i == 0 ? pcs[i] : pcs[i] - 1) ? 1 : 0;
    return calls;
}

}  // namespace spprof
