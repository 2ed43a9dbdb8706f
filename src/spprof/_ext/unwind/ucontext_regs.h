// unwind/ucontext_regs.h: the bridge from a signal's ucontext to the unwinder, and the
// thread's stack bounds the unwinder checks every read against.
//
// ucontext_regs.cpp is the one file under unwind/ that includes <ucontext.h> / <signal.h>
// (an agreed exception to "only platform/ includes <signal.h>": it reads the machine context
// the kernel saved, and nothing else). Its callers need neither header: the context is
// passed as the handler's `void*` third argument.
#pragma once

#include <cstdint>

#include "unwind/unwinder.h"

namespace spprof {

// Fill `out` from the `ucontext_t*` a SA_SIGINFO handler receives (or one getcontext filled).
// Returns false, leaving `out` zeroed, on other OSes/architectures or when ucontext is null.
// SIGNAL-SAFE, NO-HEAP. Called in the handler of the thread being sampled.
bool register_context_from_ucontext(const void* ucontext, RegisterContext* out);

// [lo, hi) of the calling thread's stack (pthread_getattr_np on Linux; for the main thread
// glibc derives it from /proc/self/maps and RLIMIT_STACK). Normal context, on the thread
// itself (typically when it registers with the session); may allocate. Returns false and sets
// both to 0 when unknown.
bool current_thread_stack_bounds(uintptr_t* lo, uintptr_t* hi);

}  // namespace spprof
