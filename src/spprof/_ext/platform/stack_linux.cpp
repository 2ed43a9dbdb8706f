// platform/stack_linux.cpp: what the native unwinder needs of a Linux thread: its registers at
// a signal (register_context_from_ucontext, unwind/ucontext_regs.h) and its stack bounds
// (platform_thread_stack_bounds, platform.h). Linux only.
#if defined(__linux__)

#include <pthread.h>
#include <signal.h>
#include <ucontext.h>

#include "platform/platform.h"
#include "unwind/ucontext_regs.h"

namespace spprof {

bool register_context_from_ucontext(const void* ucontext, RegisterContext* out) {
    *out = RegisterContext{};
    if (ucontext == nullptr) return false;
#if defined(__x86_64__)
    const mcontext_t& mc = static_cast<const ucontext_t*>(ucontext)->uc_mcontext;
    out->pc = static_cast<uint64_t>(mc.gregs[REG_RIP]);
    out->sp = static_cast<uint64_t>(mc.gregs[REG_RSP]);
    out->fp = static_cast<uint64_t>(mc.gregs[REG_RBP]);
    out->callee_saved[0] = static_cast<uint64_t>(mc.gregs[REG_RBX]);
    out->callee_saved[1] = static_cast<uint64_t>(mc.gregs[REG_R12]);
    out->callee_saved[2] = static_cast<uint64_t>(mc.gregs[REG_R13]);
    out->callee_saved[3] = static_cast<uint64_t>(mc.gregs[REG_R14]);
    out->callee_saved[4] = static_cast<uint64_t>(mc.gregs[REG_R15]);
    out->drap = static_cast<uint64_t>(mc.gregs[REG_R10]);
    out->drap_known = true;
    return true;
#elif defined(__aarch64__)
    const mcontext_t& mc = static_cast<const ucontext_t*>(ucontext)->uc_mcontext;
    out->pc = mc.pc;
    out->sp = mc.sp;
    out->fp = mc.regs[29];
    out->lr = mc.regs[30];
    for (int i = 0; i < 10; ++i) out->callee_saved[i] = mc.regs[19 + i];
    return true;
#else
    return false;
#endif
}

bool platform_thread_stack_bounds(unsigned long ident, uintptr_t* lo, uintptr_t* hi) {
    // For the main thread glibc derives the range from /proc/self/maps and RLIMIT_STACK.
    *lo = 0;
    *hi = 0;
    pthread_attr_t attr;
    if (pthread_getattr_np(static_cast<pthread_t>(ident), &attr) != 0) return false;
    void* addr = nullptr;
    size_t size = 0;
    const int rc = pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    if (rc != 0 || addr == nullptr || size == 0) return false;
    *lo = reinterpret_cast<uintptr_t>(addr);
    *hi = *lo + size;
    return true;
}

}  // namespace spprof

#endif  // __linux__
