// unwind/unwinder.h: the signal handler's native stack walk (DWARF CFI, frame-pointer fallback).
//
// unwind_native starts from the registers of the interrupted code (a RegisterContext filled
// from the signal's ucontext by register_context_from_ucontext, ucontext_regs.h) and steps
// frame by frame: find the module of the pc in the UnwindSnapshot, find the FDE in its
// .eh_frame_hdr table, run the CFA program to the pc (eh_frame.h), compute the CFA and read the
// saved registers and the return address from the stack. Every stack read is checked against
// [stack_lo, stack_hi), the thread's stack bounds cached when the thread was registered
// (current_thread_stack_bounds), so a wrong rule or a corrupt stack ends the walk instead of
// faulting. When a pc has no FDE (hand-written assembly, JIT code, a module without
// .eh_frame_hdr) one frame-pointer step is tried, if the frame pointer lies in the stack above
// the stack pointer and above any frame pointer used before.
//
// Output: pcs[0] is the interrupted pc, pcs[1..] are return addresses (the instruction after
// each call). To symbolize a return address or test it with is_eval_frame, use pc - 1 (the
// call instruction itself: after a call to a noreturn function the return address may already
// belong to the next function). A frame that cannot be unwound ends the walk; the frames found
// so far are kept and UnwindStatus::stop says why (the caller counts it).
//
// Linux x86_64 and aarch64. Elsewhere unwind_native returns 0 frames with kUnsupported.
// SIGNAL-SAFE and NO-HEAP: no allocation, no lock, no libc call but memcpy, bounded by `max`
// (each iteration writes a pc or returns); about 3 KiB of stack in all (gcc 12 -O2, measured
// with -fstack-usage: unwind_native 1.1 KiB + run_cfi 1.6 KiB, most of it CFA rows).
#pragma once

#include <cstdint>

#include "unwind/unwind_tables.h"

namespace spprof {

// The registers CFI may need, from the interrupted context. The caller-saved registers are
// never needed to unwind compiled code and are not carried.
struct RegisterContext {
    uint64_t pc = 0;
    uint64_t sp = 0;
    uint64_t fp = 0;  // rbp on x86_64, x29 on aarch64
    uint64_t lr = 0;  // x30 on aarch64; unused on x86_64
    // Other callee-saved registers. x86_64: rbx, r12, r13, r14, r15 in [0..4].
    // aarch64: x19..x28 in [0..9].
    uint64_t callee_saved[10] = {};
};

// Why the walk ended.
enum class UnwindStop : uint8_t {
    kBottom,           // return address 0 or undefined (thread entry, _start): complete stack
    kOutsideModules,   // the return address is in no loaded module (JIT code, garbage)
    kNoCfi,            // no FDE for the pc and no usable frame pointer
    kBadCfi,           // the module's CFI is truncated or inconsistent
    kUnsupportedCfi,   // a rule this unwinder does not evaluate (DWARF expression with memory reads)
    kStackBounds,      // a saved register or the CFA lies outside [stack_lo, stack_hi)
    kNotRising,        // the stack pointer did not grow (a cycle or a wrong rule)
    kDepthCap,         // `max` frames written while the stack goes on (truncated)
    kNoSnapshot,       // no unwind tables yet, or no registers: only the pc was recorded
    kUnsupported,      // not Linux x86_64/aarch64: nothing recorded
};

struct UnwindStatus {
    uint32_t depth = 0;      // pcs written
    bool truncated = false;  // stopped at max with frames remaining
    uint16_t cfi_steps = 0;  // frames unwound with CFI
    uint16_t fp_steps = 0;   // frames unwound with the frame-pointer fallback
    UnwindStop stop = UnwindStop::kBottom;
};

// Walk the native stack from `regs`. Writes at most `max` pcs, leaf first; returns the count
// (also in status->depth). `snapshot` may be null (only the pc is recorded). `status` may be
// null. Called from the signal handler of the thread being sampled (or any thread for a
// context it owns, e.g. tests); GIL not needed. SIGNAL-SAFE, NO-HEAP.
uint32_t unwind_native(const UnwindSnapshot* snapshot, const RegisterContext& regs,
                       uintptr_t stack_lo, uintptr_t stack_hi, uint64_t* pcs, uint32_t max,
                       UnwindStatus* status);

// A short static name for `stop` ("bottom", "no_cfi"...), for stats keys. Any context.
const char* unwind_stop_name(UnwindStop stop);

}  // namespace spprof
