// platform/exit_signals_posix.cpp: the exit-signal handler of platform.h, on Linux and macOS.
//
// The CLI must write the profile when SIGTERM, SIGHUP or SIGQUIT ends the program, and the
// program must still end by that signal. A handler can do none of that work (no allocation,
// locks or Python), so ours counts the signal in an atomic slot, posts a semaphore and
// returns; the watcher thread (exit_signals.cpp) waits on the semaphore, has the profile
// written, and calls platform_die_by_signal. No file descriptor: the numbers are the
// program's (a program that closes every fd from 3 up, or reopens its own files there, must
// find nothing of ours). Linux: a POSIX semaphore (sem_post is async-signal-safe). macOS has
// no unnamed POSIX semaphores (sem_init returns ENOSYS): a Mach semaphore, whose
// semaphore_signal is a Mach trap and as safe in a handler.
//
// Priority: the handler goes only where the action is SIG_DFL at install, and removal puts
// SIG_DFL back only where ours is still installed, so whatever the program sets before or
// after wins. One exception: a program that sets SIG_DFL again through signal.signal (it
// saved the default, installed its own handler and now restores what it saved) asks for the
// default action, which ours performs after the profile; reclaim() puts ours back then. Fork: a child runs without the parent's watcher, so a pthread_atfork hook puts
// SIG_DFL back in the child, and a handler that still runs in a child (a fork the hook did not
// see) acts as SIG_DFL itself.
#if defined(__linux__) || defined(__APPLE__)

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <mach/mach.h>
#include <mach/semaphore.h>
#else
#include <semaphore.h>
#endif

#include <atomic>
#include <cstring>

#include "platform.h"

namespace spprof {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGHUP, SIGQUIT};
constexpr int kSignalCount = sizeof kSignals / sizeof kSignals[0];

static_assert(std::atomic<int>::is_always_lock_free, "the handler reads these");
static_assert(std::atomic<bool>::is_always_lock_free, "the handler reads this");
static_assert(std::atomic<pid_t>::is_always_lock_free, "the handler reads this");

// The watcher's wake-up: one post per signal counted and per wake(). Made once per process
// and never destroyed (a late handler may still post), so it outlives every session.
class WakeSemaphore {
   public:
    // GIL held. False when the OS refuses one.
    bool make() {
        if (made_) return true;
#if defined(__APPLE__)
        made_ = semaphore_create(mach_task_self(), &sem_, SYNC_POLICY_FIFO, 0) == KERN_SUCCESS;
#else
        made_ = sem_init(&sem_, 0, 0) == 0;
#endif
        return made_;
    }
    // SIGNAL-SAFE, NO-HEAP.
    void post() {
#if defined(__APPLE__)
        semaphore_signal(sem_);
#else
        sem_post(&sem_);
#endif
    }
    // Blocks until a post; interrupted waits are resumed.
    void wait() {
#if defined(__APPLE__)
        while (semaphore_wait(sem_) == KERN_ABORTED) {
        }
#else
        while (sem_wait(&sem_) != 0 && errno == EINTR) {
        }
#endif
    }
    // Drops posts left from an earlier session (their counts were taken by remove()).
    void drain() {
#if defined(__APPLE__)
        const mach_timespec_t now = {0, 0};
        while (semaphore_timedwait(sem_, now) == KERN_SUCCESS) {
        }
#else
        while (sem_trywait(&sem_) == 0) {
        }
#endif
    }

   private:
#if defined(__APPLE__)
    semaphore_t sem_ = 0;
#else
    sem_t sem_;
#endif
    bool made_ = false;
};

WakeSemaphore g_wake;
// Deliveries of kSignals[i] not yet taken by the watcher: the handler adds, wait() takes.
std::atomic<int> g_pending[kSignalCount];
// wake() calls not yet seen by wait().
std::atomic<int> g_wakes{0};
// The handler may count and post: install() to remove(). The handler reads it.
std::atomic<bool> g_armed{false};
// The process that installed the handler; 0 when none is installed.
std::atomic<pid_t> g_owner{0};
// Handlers between their load of g_armed and their post: remove() waits for 0 before it
// collects late signals, so a late handler's signal is seen by the caller.
std::atomic<int> g_in_handler{0};
// Our action is installed for kSignals[i]. Control paths only (GIL held, or the atfork child).
bool g_ours[kSignalCount] = {};
bool g_atfork_registered = false;

void set_default(int signo) {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signo, &dfl, nullptr);
}

int index_of(int signo) {
    for (int i = 0; i < kSignalCount; ++i)
        if (kSignals[i] == signo) return i;
    return -1;
}

// Takes one counted delivery, first in kSignals order; 0 when none is pending.
int take_pending() {
    for (int i = 0; i < kSignalCount; ++i) {
        int n = g_pending[i].load();
        while (n > 0)
            if (g_pending[i].compare_exchange_weak(n, n - 1)) return kSignals[i];
    }
    return 0;
}

// SIGNAL-SAFE, NO-HEAP. Runs on whichever program thread the kernel picked.
void on_exit_signal(int signo) {
    const int saved_errno = errno;
    g_in_handler.fetch_add(1);
    const int i = index_of(signo);
    if (getpid() != g_owner.load()) {
        // A forked child still running our action: there is no watcher here; behave as the
        // SIG_DFL we replaced. Blocked while we run, the re-raised signal is delivered (and
        // ends the process) as soon as we return.
        set_default(signo);
        raise(signo);
    } else if (g_armed.load() && i >= 0) {
        g_pending[i].fetch_add(1);
        g_wake.post();
    } else {
        // remove() has already put SIG_DFL back while this delivery was on its way: let the
        // default action have it.
        raise(signo);
    }
    g_in_handler.fetch_sub(1);
    errno = saved_errno;
}

bool ours_now(int signo) {
    struct sigaction cur;
    if (sigaction(signo, nullptr, &cur) != 0) return false;
    return (cur.sa_flags & SA_SIGINFO) == 0 && cur.sa_handler == &on_exit_signal;
}

void install_ours(int i) {
    struct sigaction act;
    std::memset(&act, 0, sizeof act);
    act.sa_handler = &on_exit_signal;
    sigemptyset(&act.sa_mask);
    act.sa_flags = SA_RESTART | SA_ONSTACK;
    g_ours[i] = sigaction(kSignals[i], &act, nullptr) == 0;
}

void restore_defaults() {
    for (int i = 0; i < kSignalCount; ++i) {
        if (g_ours[i] && ours_now(kSignals[i])) set_default(kSignals[i]);
        g_ours[i] = false;
    }
}

// pthread_atfork child hook: async-signal-safe calls only (sigaction).
void after_fork_child() {
    if (g_owner.load() == 0) return;
    restore_defaults();
    g_armed.store(false);
    // g_owner keeps the parent's pid: platform_exit_signals_inherited() tells from it.
}

}  // namespace

Error platform_exit_signals_install() {
    if (g_owner.load() != 0) return Error::runtime("exit signals are already watched");
    if (!g_wake.make()) return Error::os("could not create the exit-signal semaphore", errno);
    if (!g_atfork_registered) {
        if (pthread_atfork(nullptr, nullptr, &after_fork_child) != 0)
            return Error::runtime("could not register the exit-signal fork hook");
        g_atfork_registered = true;
    }
    g_wake.drain();
    for (auto& n : g_pending) n.store(0);
    g_wakes.store(0);
    g_owner.store(getpid());
    g_armed.store(true);
    for (int i = 0; i < kSignalCount; ++i) {
        struct sigaction cur;
        if (sigaction(kSignals[i], nullptr, &cur) != 0) continue;
        if ((cur.sa_flags & SA_SIGINFO) != 0 || cur.sa_handler != SIG_DFL) continue;  // not ours to take
        install_ours(i);
    }
    return Error::none();
}

bool platform_exit_signals_reclaim(int signo) {
    if (g_owner.load() != getpid() || !g_armed.load()) return false;
    for (int i = 0; i < kSignalCount; ++i) {
        if (kSignals[i] != signo) continue;
        struct sigaction cur;
        if (sigaction(signo, nullptr, &cur) != 0) return false;
        if ((cur.sa_flags & SA_SIGINFO) != 0 || cur.sa_handler != SIG_DFL) return false;
        install_ours(i);
        return g_ours[i];
    }
    return false;
}

int platform_exit_signals_wait() {
    if (g_owner.load() == 0) return -1;
    for (;;) {
        // A signal counted before the wait returns at once (its post is still there to take
        // later: then the loop finds nothing and waits again).
        const int signo = take_pending();
        if (signo != 0) return signo;
        int w = g_wakes.load();
        while (w > 0)
            if (g_wakes.compare_exchange_weak(w, w - 1)) return 0;
        g_wake.wait();
    }
}

void platform_exit_signals_wake() {
    if (g_owner.load() == 0) return;
    g_wakes.fetch_add(1);
    g_wake.post();
}

int platform_exit_signals_remove() {
    if (g_owner.load() == 0) return 0;
    restore_defaults();
    g_armed.store(false);
    // From here a handler that has not loaded g_armed yet re-raises its signal to the default
    // action. One that loaded it before is counted in g_in_handler and takes microseconds:
    // wait for it, so that its count is seen below. Bounded: after ~1 s, go on without it.
    for (int i = 0; i < 10000 && g_in_handler.load() != 0; ++i) {
        const struct timespec pause = {0, 100 * 1000};
        nanosleep(&pause, nullptr);
    }
    // The watcher has gone: a signal still counted arrived after it stopped waiting, and is
    // the caller's to act on.
    const int late = take_pending();
    for (auto& n : g_pending) n.store(0);
    g_owner.store(0);
    return late;
}

bool platform_exit_signals_inherited() {
    const pid_t owner = g_owner.load();
    return owner != 0 && owner != getpid();
}

const char* platform_signal_name(int signo) {
    // strsignal() is not thread-safe everywhere, and these are the only ones we name.
    switch (signo) {
        case SIGTERM: return "SIGTERM";
        case SIGHUP: return "SIGHUP";
        case SIGQUIT: return "SIGQUIT";
        default: return "signal";
    }
}

void platform_die_by_signal(int signo) {
    set_default(signo);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signo);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    raise(signo);
    // Only reached for a signal whose default action does not end the process (none of the
    // ones the CLI watches): end with the shell's code for it.
    _exit(128 + signo);
}

}  // namespace spprof

#endif  // __linux__ || __APPLE__
