// unwind/eval_ranges.cpp: find_eval_ranges and find_function_ranges (see eval_ranges.h).
#include "unwind/eval_ranges.h"

#include "platform/platform.h"
#include "unwind/split_parts.h"

#include <dlfcn.h>

#include <vector>

namespace spprof {

Error find_function_ranges(Symbolizer& symbolizer, const void* addr_in_function, const char* name,
                           EvalRanges* out) {
    *out = EvalRanges{};
    const uint64_t addr = reinterpret_cast<uintptr_t>(addr_in_function);
    std::vector<FunctionRange> found;
    Error err = symbolizer.find_functions(addr, name, &found);
    if (!err.ok() || found.empty()) {
        // No symbol table (a deleted or unreadable file, or macOS, where none is read): the
        // image itself still knows the function's extent (Linux: the dynamic symbol's size,
        // which covers the main part; macOS: LC_FUNCTION_STARTS, and Apple's toolchain does
        // not split off .cold parts).
        uint64_t lo = 0, hi = 0;
        if (platform_function_extent(addr_in_function, &lo, &hi)) {
            out->lo[0] = lo;
            out->hi[0] = hi;
            out->count = 1;
            return Error::none();
        }
        return err.ok() ? Error::runtime("function not found in its module's symbol table") : err;
    }
    for (const FunctionRange& r : found) {
        if (out->count == EvalRanges::kMax) break;
        bool dup = false;  // .symtab and an alias may name the same range twice
        for (uint32_t i = 0; i < out->count; ++i) dup = dup || (out->lo[i] == r.lo && out->hi[i] == r.hi);
        if (dup) continue;
        out->lo[out->count] = r.lo;
        out->hi[out->count] = r.hi;
        ++out->count;
    }
    return Error::none();
}

Error find_eval_ranges(Symbolizer& symbolizer, const UnwindSnapshot* unwind, EvalRanges* out) {
    *out = EvalRanges{};
    static const char kName[] = "_PyEval_EvalFrameDefault";
    void* addr = dlsym(RTLD_DEFAULT, kName);
    if (addr == nullptr) return Error::runtime("_PyEval_EvalFrameDefault is not exported");
    Error err = find_function_ranges(symbolizer, addr, kName, out);
    if (!err.ok() || unwind == nullptr) return err;
    // Split parts the symbol table did not name (a stripped image: only .dynsym, which has
    // the main part alone), found from the main part's jumps and the unwind data.
    const uint64_t pc = reinterpret_cast<uintptr_t>(addr);
    for (uint32_t i = 0; i < out->count; ++i) {
        if (pc >= out->lo[i] && pc < out->hi[i]) {
            find_split_parts(*unwind, out->lo[i], out->hi[i], out);
            break;
        }
    }
    return Error::none();
}

}  // namespace spprof
