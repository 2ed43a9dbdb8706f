// unwind/split_parts.h: the split-off parts of a function in an image without a symbol table.
//
// gcc moves a function's unlikely blocks (or, in a profile-guided build, every block the
// training run did not reach) into a separate part, `name.cold`, named only in .symtab.
// Debian's python3.14 and python3.15 executables are stripped and their eval loop is almost
// all in that part: the exported _PyEval_EvalFrameDefault is an 844-1184 byte entry that jumps
// into an 84 KB .cold part, where the pc of every eval-loop frame is. Without .symtab the part
// is found from the code and its unwind data instead: the main part branches into it with
// direct jumps, and gcc gives the part an FDE of its own that, unlike a function's, starts
// with the frame already set up (a non-default CFA rule at its first pc), the same rule the
// jump's source has. A jump target that passes both checks is a split part of the function.
//
// Normal context (reads the mapped code and .eh_frame of loaded images); any thread, GIL not
// needed. Architectures: x86_64 (jmp/jcc rel32) and aarch64 (b, b.cond, cbz/cbnz).
#pragma once

#include <cstddef>
#include <cstdint>

#include "unwind/eval_ranges.h"
#include "unwind/unwind_tables.h"

namespace spprof {

// A direct branch at run-time address `from` to `to`.
struct DirectBranch {
    uint64_t from = 0;
    uint64_t to = 0;
};

// The direct branches with a reach of at least +-1 MiB in code[0..n), which sits at run-time
// address `addr`, for the architecture this is built for. x86_64 has no instruction
// boundaries to go by: every byte that starts such an encoding counts (the CFI checks of
// find_split_parts reject the stray ones). Returns how many were written to out[0..max).
uint32_t scan_direct_branches(const uint8_t* code, size_t n, uint64_t addr, DirectBranch* out, uint32_t max);

// Append to `out` (up to EvalRanges::kMax) every split part of the function at [lo, hi) that
// its direct branches lead to, as [FDE start, FDE end), skipping ranges already there.
// Returns how many were added. Normal context; `snap` must describe the loaded images.
uint32_t find_split_parts(const UnwindSnapshot& snap, uint64_t lo, uint64_t hi, EvalRanges* out);

}  // namespace spprof
