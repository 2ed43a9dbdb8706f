// platform/stack_darwin.cpp: a macOS thread's stack bounds (platform_thread_stack_bounds,
// platform.h), for the Mach sampler's frame-pointer walk; and register_context_from_ucontext
// (unwind/ucontext_regs.h), which has nothing to read: the Mach sampler reads registers with
// thread_get_state and sends no signal. macOS only.
#if defined(__APPLE__)

#include <pthread.h>

#include "platform/platform.h"
#include "unwind/ucontext_regs.h"

namespace spprof {
namespace {

// A stack reported by pthread outside these bounds is not trusted (pthread_get_stackaddr_np
// returns ESRCH cast to a pointer for a thread that just exited).
constexpr uintptr_t kMinStackTop = 0x10000;
constexpr size_t kMaxStackSize = size_t{1} << 30;

}  // namespace

bool register_context_from_ucontext(const void*, RegisterContext* out) {
    *out = RegisterContext{};
    return false;
}

bool platform_thread_stack_bounds(unsigned long ident, uintptr_t* lo, uintptr_t* hi) {
    // Normal context (or the thread's own introspection hook): for another thread these take
    // the pthread list lock, so never inside a suspended window.
    *lo = 0;
    *hi = 0;
    pthread_t t = reinterpret_cast<pthread_t>(ident);
    if (t == nullptr) return false;
    const uintptr_t top = reinterpret_cast<uintptr_t>(pthread_get_stackaddr_np(t));
    const size_t size = pthread_get_stacksize_np(t);
    if (top < kMinStackTop || size == 0 || size > kMaxStackSize || size >= top) return false;
    *hi = top;  // the stack grows down from its address
    *lo = top - size;
    return true;
}

}  // namespace spprof

#endif  // __APPLE__
