// unwind/fp_walk.h: the frame-pointer walk, written once for both native walks.
//
// Code built with frame pointers (x86_64 and arm64 alike) keeps a chain of frame records
// {saved frame pointer, return address} on the stack, the frame pointer register pointing at
// the innermost one. read_frame_record checks a frame pointer before it is followed (inside
// the stack, 8-byte aligned, room for a record, at or above a floor that makes the chain rise)
// and reads the record through a Reader; walk_frame_pointers follows the whole chain.
//
// Who uses it: the Linux unwinder (unwinder.cpp) takes one step with read_frame_record when a
// pc has no CFI, reading its own thread's stack in the signal handler under the fault guard;
// the Mach sampler (platform/darwin_mach.cpp) runs walk_frame_pointers over a suspended
// thread's stack. A Reader has `bool read(uintptr_t addr, void* out, size_t n) const`
// (reader.h); StackReader below loads directly, which both use today: the bounds check comes
// first, so only the thread's mapped stack is read.
//
// SIGNAL-SAFE and NO-HEAP: no allocation, no lock, no libc call but memcpy; every loop bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "capture/reader.h"
#include "unwind/native_stack.h"

namespace spprof {

// Size of one frame record: saved frame pointer then return address.
constexpr uintptr_t kFrameRecordBytes = 16;

// Reads memory of the calling process with plain loads: for stacks already checked against
// their bounds. SIGNAL-SAFE.
struct StackReader {
    SPPROF_NO_SANITIZE_ADDRESS bool read(uintptr_t addr, void* out, size_t n) const {
        std::memcpy(out, reinterpret_cast<const void*>(addr), n);
        return true;
    }
};

// True when a frame record at `fp` lies wholly inside [stack_lo, stack_hi) and is 8-byte
// aligned (both ABIs keep 16-byte aligned records; 8 tolerates hand-written assembly). Pure.
inline bool validate_frame_pointer(uintptr_t fp, uintptr_t stack_lo, uintptr_t stack_hi) {
    if (fp == 0 || stack_hi <= stack_lo) return false;
    if ((fp & 7u) != 0) return false;
    if (fp < stack_lo) return false;
    // fp + 16 <= hi, written so that an fp near UINTPTR_MAX cannot wrap.
    if (stack_hi - stack_lo < kFrameRecordBytes) return false;
    return fp <= stack_hi - kFrameRecordBytes;
}

struct FrameRecord {
    uint64_t caller_fp = 0;
    uint64_t ret = 0;  // pointer-authentication stripped
};

// Read the record at `fp`: false when fp fails validate_frame_pointer, lies below `floor` (the
// current stack pointer, or just above the previous record: the chain must rise), or the
// reader fails. SIGNAL-SAFE, NO-HEAP.
template <class Reader>
SPPROF_NO_SANITIZE_ADDRESS inline bool read_frame_record(const Reader& r, uintptr_t fp, uintptr_t floor,
                                                         const StackBounds& b, FrameRecord* out) {
    if (fp < floor || !validate_frame_pointer(fp, b.lo, b.hi)) return false;
    uint64_t rec[2];
    if (!r.read(fp, rec, sizeof rec)) return false;
    out->caller_fp = rec[0];
    out->ret = strip_pointer_auth(rec[1]);
    return true;
}

// Follow the frame-pointer chain from `regs` (pc, fp, sp) over the stack in `bounds`, writing
// at most `max` addresses leaf first into `out`: out[0] = pc, then each frame's return address
// (all pointer-authentication stripped). Stops: kBottom (frame pointer or return address 0),
// kNoCfi (a frame pointer failed validation: code without frame pointers, e.g. libpython),
// kNotRising (a saved frame pointer not above the current one), kDepthCap, kNoSnapshot (bounds
// unknown: only the pc). Called by the Mach sampler while the target is suspended: NO-HEAP,
// bounded by `max` (each iteration writes an address or returns).
template <class Reader>
SPPROF_NO_SANITIZE_ADDRESS inline UnwindStatus walk_frame_pointers(const Reader& r, const RegisterContext& regs,
                                                                   const StackBounds& bounds, uint64_t* out,
                                                                   uint32_t max) {
    UnwindStatus st;
    if (max == 0) {
        st.truncated = true;
        st.stop = UnwindStop::kDepthCap;
        return st;
    }
    const uint64_t pc = strip_pointer_auth(regs.pc);
    if (pc != 0) out[st.depth++] = pc;
    if (!bounds.known()) {
        st.stop = UnwindStop::kNoSnapshot;
        return st;
    }
    uintptr_t fp = static_cast<uintptr_t>(regs.fp);
    for (;;) {
        if (fp == 0) {
            st.stop = UnwindStop::kBottom;
            return st;
        }
        FrameRecord rec;
        if (!read_frame_record(r, fp, bounds.lo, bounds, &rec)) {
            st.stop = UnwindStop::kNoCfi;
            return st;
        }
        if (rec.ret == 0) {
            st.stop = UnwindStop::kBottom;
            return st;
        }
        if (st.depth == max) {
            st.truncated = true;
            st.stop = UnwindStop::kDepthCap;
            return st;
        }
        out[st.depth++] = rec.ret;
        if (st.fp_steps < UINT16_MAX) ++st.fp_steps;
        const uintptr_t next = static_cast<uintptr_t>(rec.caller_fp);
        if (next != 0 && next <= fp) {
            st.stop = UnwindStop::kNotRising;
            return st;
        }
        fp = next;
    }
}

}  // namespace spprof
