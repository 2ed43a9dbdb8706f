// unwind/ucontext_regs.h: the bridge from a signal's ucontext to the unwinder.
//
// Declared here, next to its one caller's needs, and implemented per OS in platform/
// (stack_linux.cpp reads the machine context the kernel saved; stack_darwin.cpp has none to
// read: the Mach sampler sends no signal). Callers need neither <signal.h> nor <ucontext.h>:
// the context is passed as the handler's `void*` third argument. The thread's stack bounds,
// which the unwinder checks every read against, come from platform_thread_stack_bounds
// (platform.h).
#pragma once

#include "unwind/native_stack.h"

namespace spprof {

// Fill `out` from the `ucontext_t*` a SA_SIGINFO handler receives (or one getcontext filled).
// Returns false, leaving `out` zeroed, on other OSes/architectures or when ucontext is null.
// SIGNAL-SAFE, NO-HEAP. Called in the handler of the thread being sampled.
bool register_context_from_ucontext(const void* ucontext, RegisterContext* out);

}  // namespace spprof
