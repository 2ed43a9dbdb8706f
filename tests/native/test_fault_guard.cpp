// test_fault_guard.cpp: the Linux fault guard (platform/fault_guard_linux.cpp).
//
// A claim that longjmps back into an armed "capture" turns a load from unmapped memory into a
// recovered fault; every fault that is not claimed must reach the program exactly as without
// the guard. Those cases end a process, so each runs in a forked child and the parent checks
// how the child ended: killed by SIGSEGV (the default action), or the program's own handler
// ran, and never a loop between the program's handler and ours.
#if defined(__linux__)

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "harness.h"
#include "platform/platform.h"

using namespace spprof;

namespace {

sigjmp_buf g_env;
std::atomic<bool> g_armed{false};
std::atomic<int> g_claims{0};

void test_claim() {
    if (!g_armed.load(std::memory_order_relaxed)) return;
    g_armed.store(false, std::memory_order_relaxed);
    g_claims.fetch_add(1);
    siglongjmp(g_env, 1);
}

// An address that is mapped nowhere: a page we map, then unmap.
uintptr_t unmapped_address() {
    void* p = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p, 4096);
    return reinterpret_cast<uintptr_t>(p) + 64;
}

// Reads through an armed guard; false when the read faulted and was recovered.
__attribute__((noinline)) bool guarded_load(uintptr_t addr, uint64_t* out) {
    if (sigsetjmp(g_env, 0) != 0) return false;
    g_armed.store(true);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    *out = *reinterpret_cast<volatile const uint64_t*>(addr);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    g_armed.store(false);
    return true;
}

// Runs `body` in a forked child; returns its wait status.
template <class F>
int in_child(F body) {
    const pid_t pid = fork();
    if (pid == 0) {
        body();
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

volatile sig_atomic_t g_program_handler_runs = 0;
void program_handler(int) {
    ++g_program_handler_runs;
    _exit(42);  // a crash reporter that wrote its report
}

// faulthandler's pattern: on a fault, restore the action it saw when it was enabled and
// re-raise.
struct sigaction g_saved_by_reraiser;
void reraising_handler(int signo) {
    sigaction(signo, &g_saved_by_reraiser, nullptr);
    raise(signo);
}

bool killed_by(int status, int signo) { return WIFSIGNALED(status) && WTERMSIG(status) == signo; }

}  // namespace

TEST(fault_guard_recovers_a_claimed_fault_and_keeps_working) {
    const int status = in_child([] {
        if (!platform_fault_guard_install(&test_claim).ok()) _exit(3);
        if (!platform_fault_guard_ready()) _exit(4);
        uint64_t v = 0;
        for (int i = 0; i < 100; ++i)
            if (guarded_load(unmapped_address(), &v)) _exit(5);  // must fault, every time
        static const uint64_t mapped = 0x1234;
        if (!guarded_load(reinterpret_cast<uintptr_t>(&mapped), &v) || v != 0x1234) _exit(6);
        if (g_claims.load() != 100 || !platform_fault_guard_ready()) _exit(7);
        platform_fault_guard_remove();
        _exit(0);
    });
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
}

TEST(fault_guard_unclaimed_fault_ends_the_process_as_without_the_guard) {
    // The default action (or, in the sanitizer build, AddressSanitizer's own handler): the
    // same ending with and without the guard.
    const auto crash = [](bool guard) {
        return in_child([guard] {
            if (guard) platform_fault_guard_install(&test_claim);
            *reinterpret_cast<volatile int*>(unmapped_address()) = 1;  // the program's own bug
            _exit(0);
        });
    };
    const int without = crash(false);
    const int with = crash(true);
    CHECK(!WIFEXITED(without) || WEXITSTATUS(without) != 0);
    CHECK_EQ(with, without);
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(killed_by(with, SIGSEGV));
#endif
}

TEST(fault_guard_unclaimed_fault_reaches_a_handler_installed_before) {
    const int status = in_child([] {
        signal(SIGSEGV, program_handler);
        platform_fault_guard_install(&test_claim);
        *reinterpret_cast<volatile int*>(unmapped_address()) = 1;
        _exit(0);
    });
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 42);
}

TEST(fault_guard_keep_goes_back_in_front_of_a_handler_installed_after) {
    const int status = in_child([] {
        platform_fault_guard_install(&test_claim);
        signal(SIGSEGV, program_handler);  // the program takes the front place
        if (!platform_fault_guard_keep()) _exit(3);
        if (platform_fault_guard_retaken() != 1 || platform_fault_guard_keep()) _exit(4);
        uint64_t v = 0;
        if (guarded_load(unmapped_address(), &v)) _exit(5);  // ours again: recovered
        *reinterpret_cast<volatile int*>(unmapped_address()) = 1;  // theirs: to their handler
        _exit(0);
    });
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 42);
}

TEST(fault_guard_a_reraising_handler_after_us_ends_as_without_the_guard_not_in_a_loop) {
    // faulthandler.enable() after start(): it saw our action and restores it before
    // re-raising. Both orders: before and after the guard took the front place back. The
    // ending must be the one the re-raising handler gets without the guard (its previous
    // action: the default, or AddressSanitizer's handler in the sanitizer build).
    for (int retake = 0; retake < 2; ++retake) {
        const auto crash = [retake](bool guard) {
            return in_child([retake, guard] {
                alarm(5);  // a loop would end in SIGALRM
                if (guard) platform_fault_guard_install(&test_claim);
                struct sigaction sa;
                std::memset(&sa, 0, sizeof sa);
                sa.sa_handler = reraising_handler;
                sa.sa_flags = SA_NODEFER;
                sigemptyset(&sa.sa_mask);
                sigaction(SIGSEGV, &sa, &g_saved_by_reraiser);
                if (guard && retake) platform_fault_guard_keep();
                *reinterpret_cast<volatile int*>(unmapped_address()) = 1;
                _exit(0);
            });
        };
        const int without = crash(false);
        const int with = crash(true);
        CHECK(!killed_by(with, SIGALRM));
        CHECK_EQ(with, without);
#if !defined(__SANITIZE_ADDRESS__)
        CHECK(killed_by(with, SIGSEGV));
#endif
    }
}

TEST(fault_guard_sent_signal_is_redelivered_to_the_previous_handler) {
    const int status = in_child([] {
        signal(SIGBUS, program_handler);
        platform_fault_guard_install(&test_claim);
        kill(getpid(), SIGBUS);  // sent, not raised by an instruction: never claimed
        _exit(0);
    });
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 42);
}

TEST(fault_guard_remove_restores_the_previous_action) {
    const int status = in_child([] {
        signal(SIGSEGV, program_handler);
        platform_fault_guard_install(&test_claim);
        platform_fault_guard_remove();
        struct sigaction cur;
        sigaction(SIGSEGV, nullptr, &cur);
        if (cur.sa_handler != program_handler) _exit(3);
        if (platform_fault_guard_keep()) _exit(4);  // removed: keep() must not reinstall
        _exit(0);
    });
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
}

#endif  // __linux__
