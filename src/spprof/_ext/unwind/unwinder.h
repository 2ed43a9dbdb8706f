// unwind/unwinder.h: the signal handler's native stack walk (DWARF CFI, frame-pointer fallback).
//
// unwind_native starts from the registers of the interrupted code (a RegisterContext filled
// from the signal's ucontext by register_context_from_ucontext, ucontext_regs.h) and steps
// frame by frame: find the module of the pc in the UnwindSnapshot, find the FDE in its
// .eh_frame_hdr table, run the CFA program to the pc (eh_frame.h), compute the CFA and read the
// saved registers and the return address from the stack. Every stack read is checked against
// [stack_lo, stack_hi), the thread's stack bounds cached when the thread was registered
// (platform_thread_stack_bounds), so a wrong rule or a corrupt stack ends the walk instead of
// faulting. When a pc has no FDE (hand-written assembly, JIT code, a module without
// .eh_frame_hdr) one frame-pointer step is tried (read_frame_record, fp_walk.h: the frame
// pointer must lie in the stack above the stack pointer and above any frame pointer used
// before). RegisterContext, UnwindStop and UnwindStatus are shared with the Mach sampler's
// walk (native_stack.h).
//
// Output: pcs[0] is the interrupted pc, pcs[1..] are return addresses (the instruction after
// each call). To symbolize a return address or test it with is_eval_frame, use pc - 1 (the
// call instruction itself: after a call to a noreturn function the return address may already
// belong to the next function). A frame that cannot be unwound ends the walk; the frames found
// so far are kept and UnwindStatus::stop says why (the caller counts it).
//
// x86_64 and arm64 (the tables are built on Linux only: unwind_tables.h). On other
// architectures unwind_native returns 0 frames with kUnsupported.
// SIGNAL-SAFE and NO-HEAP: no allocation, no lock, no libc call but memcpy, bounded by `max`
// (each iteration writes a pc or returns); about 3 KiB of stack in all (gcc 12 -O2, measured
// with -fstack-usage: unwind_native 1.1 KiB + run_cfi 1.6 KiB, most of it CFA rows).
#pragma once

#include <cstdint>

#include "unwind/native_stack.h"
#include "unwind/unwind_tables.h"

namespace spprof {

// Walk the native stack from `regs`. Writes at most `max` pcs, leaf first; returns the count
// (also in status->depth). `snapshot` may be null (only the pc is recorded). `status` may be
// null. Called from the signal handler of the thread being sampled (or any thread for a
// context it owns, e.g. tests); GIL not needed. SIGNAL-SAFE, NO-HEAP.
uint32_t unwind_native(const UnwindSnapshot* snapshot, const RegisterContext& regs,
                       uintptr_t stack_lo, uintptr_t stack_hi, uint64_t* pcs, uint32_t max,
                       UnwindStatus* status);

}  // namespace spprof
