// unwind/native_stack.h: what every native stack walk shares: the register context it starts
// from, the stack bounds it reads inside, why it stopped, and the pointer-authentication strip.
//
// Two walks use these: the Linux signal handler's unwinder (unwind/unwinder.h: DWARF CFI with a
// frame-pointer fallback) and the macOS Mach sampler's frame-pointer walk over a suspended
// thread (unwind/fp_walk.h, called from platform/darwin_mach.cpp). Each platform fills a
// RegisterContext from what its OS hands over (a signal's ucontext: platform/ucontext_*.cpp;
// thread_get_state: darwin_mach.cpp) and each thread's StackBounds are read once, outside the
// signal path (platform_thread_stack_bounds).
//
// Pure data and inline helpers, no Python.h: the native tests use them over fake stacks.
// SIGNAL-SAFE, NO-HEAP.
#pragma once

#include <cstdint>

#include "platform/address_space.h"

namespace spprof {

// The registers a native walk may need, from the interrupted or suspended context. The
// caller-saved registers are never needed to unwind compiled code and are not carried.
struct RegisterContext {
    uint64_t pc = 0;
    uint64_t sp = 0;
    uint64_t fp = 0;  // rbp on x86_64, x29 on arm64
    uint64_t lr = 0;  // x30 on arm64; 0 on x86_64
    // Other callee-saved registers, for CFI (the Mach sampler's walk leaves them 0).
    // x86_64: rbx, r12, r13, r14, r15 in [0..4]. arm64: x19..x28 in [0..9].
    uint64_t callee_saved[10] = {};
    // x86_64: r10 at the interrupted instruction, the interrupted frame's only (caller-saved):
    // gcc's DRAP register, the CFA in a realigning function's prologue and epilogue
    // (`DW_CFA_def_cfa: r10 ofs 0`). From a signal's context; not known elsewhere.
    uint64_t drap = 0;
    bool drap_known = false;
};

// [lo, hi) of a thread's stack; stacks grow down from hi. lo == hi == 0 means unknown.
struct StackBounds {
    uintptr_t lo = 0;
    uintptr_t hi = 0;
    bool known() const { return lo != 0 && hi > lo; }
};

// Why a native walk ended. The values index the `native_stop_reasons` stats
// (signal_handler.cpp): append, never reorder.
enum class UnwindStop : uint8_t {
    kBottom,           // return address 0 or undefined, or frame pointer 0 (thread entry): complete
    kOutsideModules,   // the return address is in no loaded module (JIT code, garbage)
    kNoCfi,            // no FDE for the pc (or a frame-pointer-only walk) and no usable frame pointer
    kBadCfi,           // the module's CFI is truncated or inconsistent
    kUnsupportedCfi,   // a rule the unwinder does not evaluate (DWARF expression with memory reads)
    kStackBounds,      // a saved register or the CFA lies outside the stack bounds
    kNotRising,        // the stack or frame pointer did not grow (a cycle or a wrong rule)
    kDepthCap,         // `max` frames written while the stack goes on (truncated)
    kNoSnapshot,       // no unwind tables or stack bounds, or no registers: only the pc was recorded
    kUnsupported,      // no unwinder for this architecture: nothing recorded
};

struct UnwindStatus {
    uint32_t depth = 0;      // pcs written
    bool truncated = false;  // stopped at max with frames remaining
    uint16_t cfi_steps = 0;  // frames unwound with CFI
    uint16_t fp_steps = 0;   // frames unwound by following a frame pointer
    uint16_t leaf_steps = 0;  // interrupted functions without CFI left by their return address (a heuristic)
    uint16_t cached_steps = 0;  // of cfi_steps, those taken by a row an earlier walk kept (step_cache.h)
    UnwindStop stop = UnwindStop::kBottom;
};

// `addr` with its pointer-authentication signature cleared (the mask and why it is right for
// each OS: platform/address_space.h). Applied to every pc and return address a walk records.
// Pure; SIGNAL-SAFE.
constexpr uint64_t strip_pointer_auth(uint64_t addr) { return addr & kPointerAuthStripMask; }

// A short static name for `stop` ("bottom", "no_cfi"...), for stats keys. Any context.
const char* unwind_stop_name(UnwindStop stop);

}  // namespace spprof
