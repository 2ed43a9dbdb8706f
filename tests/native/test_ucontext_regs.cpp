// test_ucontext_regs.cpp: register_context_from_ucontext (platform/stack_linux.cpp) reads the
// registers the unwinder starts from out of the machine context the kernel saved, at the
// offsets this architecture's ucontext_t has: a context with a distinct value in every field
// must come out with each value in its RegisterContext slot. Run on x86_64 by
// `make native-test` and on aarch64 (cross-built, under qemu-user) by `make test-arm64`.
#if defined(__linux__)

#include <signal.h>
#include <ucontext.h>

#include <cstdint>
#include <cstring>

#include "harness.h"
#include "unwind/native_stack.h"
#include "unwind/ucontext_regs.h"

using namespace spprof;

TEST(ucontext_registers_land_in_their_slots) {
    ucontext_t uc;
    std::memset(&uc, 0, sizeof uc);
    mcontext_t& mc = uc.uc_mcontext;
#if defined(__x86_64__)
    mc.gregs[REG_RIP] = 0x1111;
    mc.gregs[REG_RSP] = 0x2222;
    mc.gregs[REG_RBP] = 0x3333;
    mc.gregs[REG_RBX] = 0x4000;
    mc.gregs[REG_R12] = 0x4001;
    mc.gregs[REG_R13] = 0x4002;
    mc.gregs[REG_R14] = 0x4003;
    mc.gregs[REG_R15] = 0x4004;
    mc.gregs[REG_RAX] = 0x9999;  // caller-saved: not carried
    mc.gregs[REG_R10] = 0x6666;  // caller-saved, but gcc's DRAP register: carried apart
    const int kCallee = 5;
#elif defined(__aarch64__)
    mc.pc = 0x1111;
    mc.sp = 0x2222;
    for (int i = 0; i < 31; ++i) mc.regs[i] = 0x9900 + static_cast<uint64_t>(i);  // x0..x30
    mc.regs[29] = 0x3333;  // frame pointer
    mc.regs[30] = 0x5555;  // link register
    for (int i = 0; i < 10; ++i) mc.regs[19 + i] = 0x4000 + static_cast<uint64_t>(i);  // x19..x28
    const int kCallee = 10;
#endif
#if defined(__x86_64__) || defined(__aarch64__)
    RegisterContext rc;
    rc.lr = 0xbad;
    CHECK(register_context_from_ucontext(&uc, &rc));
    CHECK_EQ(rc.pc, uint64_t{0x1111});
    CHECK_EQ(rc.sp, uint64_t{0x2222});
    CHECK_EQ(rc.fp, uint64_t{0x3333});
#if defined(__aarch64__)
    CHECK_EQ(rc.lr, uint64_t{0x5555});
    CHECK(!rc.drap_known);  // no DRAP on aarch64
#else
    CHECK_EQ(rc.lr, uint64_t{0});  // no link register: the return address is on the stack
    CHECK(rc.drap_known);
    CHECK_EQ(rc.drap, uint64_t{0x6666});
#endif
    for (int i = 0; i < kCallee; ++i) CHECK_EQ(rc.callee_saved[i], uint64_t{0x4000} + static_cast<uint64_t>(i));
    for (int i = kCallee; i < 10; ++i) CHECK_EQ(rc.callee_saved[i], uint64_t{0});
#endif
}

TEST(ucontext_null_leaves_registers_zeroed) {
    RegisterContext rc;
    rc.pc = 1;
    rc.callee_saved[3] = 7;
    CHECK(!register_context_from_ucontext(nullptr, &rc));
    CHECK_EQ(rc.pc, uint64_t{0});
    CHECK_EQ(rc.callee_saved[3], uint64_t{0});
}

namespace {

volatile sig_atomic_t g_got = 0;
RegisterContext g_regs;
uintptr_t g_handler_stack = 0;

void on_signal(int, siginfo_t*, void* uc) {
    int local = 0;
    g_handler_stack = reinterpret_cast<uintptr_t>(&local);
    register_context_from_ucontext(uc, &g_regs);
    g_got = 1;
}

__attribute__((noinline)) uintptr_t raise_here() {
    int local = 0;
    raise(SIGUSR2);
    return reinterpret_cast<uintptr_t>(&local);
}

}  // namespace

// From a real signal: the interrupted sp lies on this thread's stack between the handler's
// frame and the frame that raised it, and the pc points into code (not 0, not the stack).
TEST(ucontext_from_a_real_signal) {
#if defined(__x86_64__) || defined(__aarch64__)
    struct sigaction sa, old;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR2, &sa, &old) == 0);
    g_got = 0;
    const uintptr_t caller = raise_here();
    sigaction(SIGUSR2, &old, nullptr);
    CHECK(g_got == 1);
    CHECK(g_regs.sp > g_handler_stack);
    CHECK(g_regs.sp < caller + 4096);
    CHECK(g_regs.pc != 0);
    CHECK(g_regs.pc < g_handler_stack - 0x100000 || g_regs.pc > caller + 0x100000);
#endif
}

#endif  // __linux__
