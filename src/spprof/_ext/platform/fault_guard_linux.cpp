// platform/fault_guard_linux.cpp: the fault guard of platform.h on Linux.
//
// One SA_SIGINFO handler for SIGSEGV and SIGBUS stands in front of the program's while a
// session runs. For a fault the kernel raised it asks the capture path's claim first (which
// jumps back into a capture that faulted, and does not return). Every other fault is not
// ours, and the program must see it exactly as without spprof: the guard steps aside, i.e.
// puts back the action it stands in front of, and returns, so the faulting instruction runs
// again and the kernel delivers the same fault, with the same registers, to that action (the
// program's handler, faulthandler, a crash reporter, or the default: death by the signal, with
// a core dump). A signal that was sent rather than raised (kill, raise, a handler re-raising)
// is re-sent to the same thread with the same siginfo after stepping aside, delivered when
// our handler has returned.
//
// Loops: handlers like faulthandler restore the action they saw when they were enabled (which
// may be ours) and re-raise. A fault that comes back to us after we stepped aside, or any sent
// one, goes to the action that was there before spprof's first install in this process, never
// back to the handler that just passed it on.
//
// Staying in front: a program that installs its own handler after us takes the front place;
// the drain thread calls platform_fault_guard_keep() at every wake-up and puts the guard back
// in front of it (forwarding foreign faults to it from then on). Between the two, captures
// that fault would reach the program's handler; see docs/architecture.md.
#if defined(__linux__)

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "../log.h"
#include "platform.h"

namespace spprof {
namespace {

void on_fault(int signo, siginfo_t* si, void* uc);

struct Guarded {
    int signo = 0;
    // Where a foreign fault goes: the action that was in front when the guard last took its
    // place. Two slots: keep() (drain thread) writes the idle one and flips `slot` while a
    // handler on another thread may read the current one.
    struct sigaction prev[2];
    std::atomic<int> slot{0};
    // The action before spprof's first install in this process: where a fault that came back
    // to us through someone else's handler goes.
    struct sigaction original;
    bool have_original = false;
    // Our action is installed and has not stepped aside since.
    std::atomic<bool> in_front{false};
};

Guarded g_guarded[2];
std::atomic<FaultClaimFn> g_claim{nullptr};
std::atomic<bool> g_installed{false};
std::atomic<uint64_t> g_retaken{0};
// When the guard last stepped aside for a fault that was not ours (monotonic ns, 0: never).
// Such a fault is almost always the program crashing: faulthandler, a crash reporter or
// AddressSanitizer is at work, and the guard must not take the front place back in the middle
// of that (a nested fault or re-raise would then come to us). A program that recovers from
// its own faults (a VM using guard pages) gets sampled again after the grace period.
std::atomic<uint64_t> g_stepped_aside_ns{0};
constexpr uint64_t kStepAsideGraceNs = 5'000'000'000;

uint64_t monotonic_ns() {
    struct timespec ts;
    // The raw system call: async-signal-safe, and no sanitizer interceptor runs inside a
    // fault that is on its way to the sanitizer's own handler.
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

static_assert(std::atomic<FaultClaimFn>::is_always_lock_free, "loaded by the fault handler");
static_assert(std::atomic<bool>::is_always_lock_free, "loaded by the fault handler");

Guarded* guarded_for(int signo) {
    for (Guarded& g : g_guarded)
        if (g.signo == signo) return &g;
    return nullptr;
}

// For the debug log: what stands behind the guard.
const char* describe(const struct sigaction& a) {
    if ((a.sa_flags & SA_SIGINFO) != 0) return a.sa_sigaction != nullptr ? "a handler" : "the default action";
    if (a.sa_handler == SIG_DFL) return "the default action";
    if (a.sa_handler == SIG_IGN) return "ignored";
    return "a handler";
}

bool is_ours(const struct sigaction& a) {
    return (a.sa_flags & SA_SIGINFO) != 0 && a.sa_sigaction == on_fault;
}

struct sigaction our_action() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    // NODEFER: the capture leaves this handler by siglongjmp without restoring the mask, so
    // the signal must not be blocked in here. ONSTACK: a foreign stack overflow still finds
    // the program's alternate stack.
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    return sa;
}

const struct sigaction& original_or_default(const Guarded& g) {
    static struct sigaction dfl;  // zero: SIG_DFL, no flags, empty mask
    return g.have_original ? g.original : dfl;
}

// SIGNAL-SAFE, NO-HEAP.
void on_fault(int signo, siginfo_t* si, void* /*uc*/) {
    const int saved_errno = errno;
    const bool raised = si != nullptr && si->si_code > 0;  // by the kernel, for an instruction
    if (raised) {
        const FaultClaimFn claim = g_claim.load(std::memory_order_acquire);
        if (claim != nullptr) claim();  // returns only when the fault is not a capture's
    }
    Guarded* g = guarded_for(signo);
    if (g == nullptr) {
        errno = saved_errno;
        return;
    }
    g_stepped_aside_ns.store(monotonic_ns(), std::memory_order_release);
    const bool was_in_front = g->in_front.exchange(false, std::memory_order_acq_rel);
    const struct sigaction& target =
        raised && was_in_front ? g->prev[g->slot.load(std::memory_order_acquire)] : original_or_default(*g);
    sigaction(signo, &target, nullptr);
    if (!raised && si != nullptr) {
        // Deliver it again, to `target`, once this handler has returned: blocked here, the
        // re-sent signal stays pending until sigreturn restores the interrupted mask. So
        // `target` runs where the sender's own delivery would have run it (inside a handler
        // that re-raised, say), not nested in ours.
        sigset_t block;
        sigemptyset(&block);
        sigaddset(&block, signo);
        pthread_sigmask(SIG_BLOCK, &block, nullptr);
        syscall(SYS_rt_tgsigqueueinfo, getpid(), syscall(SYS_gettid), signo, si);
    }
    errno = saved_errno;
}

// Normal context. Installs our action in front of `current` (the action in place now).
bool take_front(Guarded& g, const struct sigaction& current) {
    const int idle = 1 - g.slot.load(std::memory_order_relaxed);
    // Our own action left in place (restored by a handler that had us as its previous):
    // forward to what was there before spprof, not to ourselves.
    g.prev[idle] = is_ours(current) ? original_or_default(g) : current;
    g.slot.store(idle, std::memory_order_release);
    const struct sigaction sa = our_action();
    if (!is_ours(current) && sigaction(g.signo, &sa, nullptr) != 0) return false;
    g.in_front.store(true, std::memory_order_release);
    return true;
}

}  // namespace

Error platform_fault_guard_install(FaultClaimFn claim) {
    if (g_installed.load()) return Error::runtime("the fault guard is already installed");
    g_guarded[0].signo = SIGSEGV;
    g_guarded[1].signo = SIGBUS;
    g_claim.store(claim, std::memory_order_release);
    for (Guarded& g : g_guarded) {
        struct sigaction current;
        if (sigaction(g.signo, nullptr, &current) != 0) return Error::os("sigaction (fault guard) failed", errno);
        if (!g.have_original && !is_ours(current)) {
            g.original = current;
            g.have_original = true;
        }
        if (!take_front(g, current)) {
            const int e = errno;
            platform_fault_guard_remove();
            return Error::os("sigaction (fault guard) failed", e);
        }
    }
    g_installed.store(true, std::memory_order_release);
    log_debug("fault guard: in front of SIGSEGV (%s) and SIGBUS (%s)",
              describe(g_guarded[0].prev[g_guarded[0].slot.load()]),
              describe(g_guarded[1].prev[g_guarded[1].slot.load()]));
    return Error::none();
}

bool platform_fault_guard_keep() {
    if (!g_installed.load(std::memory_order_acquire)) return false;
    const uint64_t aside = g_stepped_aside_ns.load(std::memory_order_acquire);
    if (aside != 0 && monotonic_ns() - aside < kStepAsideGraceNs) return false;
    bool retook = false;
    for (Guarded& g : g_guarded) {
        struct sigaction current;
        if (sigaction(g.signo, nullptr, &current) != 0) continue;
        if (is_ours(current) && g.in_front.load(std::memory_order_acquire)) continue;
        if (take_front(g, current)) {
            retook = true;
            log_debug("fault guard: back in front of the %s handler installed since (signal %d)",
                      is_ours(current) ? "original" : "program's", g.signo);
        }
    }
    if (retook) g_retaken.fetch_add(1, std::memory_order_relaxed);
    return retook;
}

void platform_fault_guard_remove() {
    g_installed.store(false, std::memory_order_release);
    for (Guarded& g : g_guarded) {
        if (g.signo == 0) continue;
        struct sigaction current;
        g.in_front.store(false, std::memory_order_release);
        if (sigaction(g.signo, nullptr, &current) == 0 && is_ours(current))
            sigaction(g.signo, &g.prev[g.slot.load(std::memory_order_acquire)], nullptr);
        // Otherwise someone installed a handler after us: theirs stays. If it ever passes a
        // fault on to us, on_fault forwards it to the original action.
    }
}

bool platform_fault_guard_ready() {
    return g_guarded[0].in_front.load(std::memory_order_relaxed) &&
           g_guarded[1].in_front.load(std::memory_order_relaxed);
}

uint64_t platform_fault_guard_retaken() { return g_retaken.load(std::memory_order_relaxed); }

}  // namespace spprof

#endif  // __linux__
