// suspend/fp_walk.cpp: validate_frame_pointer and walk_stack (see fp_walk.h).
#include "fp_walk.h"

#include <cstring>

namespace spprof {

bool validate_frame_pointer(uintptr_t fp, uintptr_t stack_lo, uintptr_t stack_hi) {
    if (fp == 0 || stack_hi <= stack_lo) return false;
    if ((fp & 7u) != 0) return false;
    if (fp < stack_lo) return false;
    // fp + 16 <= hi, written so that an fp near UINTPTR_MAX cannot wrap.
    if (stack_hi - stack_lo < kFrameRecordBytes) return false;
    return fp <= stack_hi - kFrameRecordBytes;
}

// NO-HEAP: runs while the target thread is suspended.
NativeWalk walk_stack(const RegisterState& regs, const StackBounds& bounds, uint64_t* out,
                      uint32_t max) {
    NativeWalk w;
    if (max == 0) {
        w.truncated = true;
        w.stop = WalkStop::kDepthCap;
        return w;
    }
    const uint64_t pc = strip_pac(regs.pc);
    if (pc != 0) out[w.depth++] = pc;
    if (!bounds.known()) {
        w.stop = WalkStop::kNoBounds;
        return w;
    }
    uintptr_t fp = static_cast<uintptr_t>(regs.fp);
    // Each iteration either ends the walk or moves fp strictly up inside the stack, and the
    // depth cap bounds it too: the loop cannot run more than `max` times.
    for (;;) {
        if (fp == 0) {
            w.stop = WalkStop::kBottom;
            return w;
        }
        if (!validate_frame_pointer(fp, bounds.lo, bounds.hi)) {
            w.stop = WalkStop::kInvalidFp;
            return w;
        }
        uint64_t record[2];
        std::memcpy(record, reinterpret_cast<const void*>(fp), sizeof record);
        const uint64_t ret = strip_pac(record[1]);
        if (ret == 0) {
            w.stop = WalkStop::kBottom;
            return w;
        }
        if (w.depth == max) {
            w.truncated = true;
            w.stop = WalkStop::kDepthCap;
            return w;
        }
        out[w.depth++] = ret;
        const uintptr_t next = static_cast<uintptr_t>(record[0]);
        if (next != 0 && next <= fp) {
            w.stop = WalkStop::kNotRising;
            return w;
        }
        fp = next;
    }
}

}  // namespace spprof
