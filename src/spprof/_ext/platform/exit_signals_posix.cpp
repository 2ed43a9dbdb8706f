// platform/exit_signals_posix.cpp: the exit-signal handler of platform.h, on Linux and macOS.
//
// The CLI must write the profile when SIGTERM, SIGHUP or SIGQUIT ends the program, and the
// program must still end by that signal. A handler can do none of that work (no allocation,
// locks or Python), so ours writes the signal number into a pipe and returns; the watcher
// thread (exit_signals.cpp) reads it, has the profile written, and calls
// platform_die_by_signal.
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
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "platform.h"

namespace spprof {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGHUP, SIGQUIT};
constexpr int kSignalCount = sizeof kSignals / sizeof kSignals[0];

static_assert(std::atomic<int>::is_always_lock_free, "the handler reads these");
static_assert(std::atomic<pid_t>::is_always_lock_free, "the handler reads this");

// Pipe ends, -1 when closed. The handler reads g_write_fd only.
std::atomic<int> g_write_fd{-1};
std::atomic<int> g_read_fd{-1};
// The process that installed the handler; 0 when none is installed.
std::atomic<pid_t> g_owner{0};
// Handlers between their load of g_write_fd and their write: remove() waits for 0 before it
// closes the pipe, so a late handler never writes into a reused descriptor.
std::atomic<int> g_in_handler{0};
// Our action is installed for kSignals[i]. Control paths only (GIL held, or the atfork child).
bool g_ours[kSignalCount] = {};
bool g_atfork_registered = false;

// Owns a descriptor until released: closes it on every failure path of install().
class UniqueFd {
   public:
    explicit UniqueFd(int fd) : fd_(fd) {}
    ~UniqueFd() {
        if (fd_ >= 0) close(fd_);
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    int get() const { return fd_; }
    int release() {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }

   private:
    int fd_;
};

void set_default(int signo) {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signo, &dfl, nullptr);
}

// SIGNAL-SAFE, NO-HEAP. Runs on whichever program thread the kernel picked.
void on_exit_signal(int signo) {
    const int saved_errno = errno;
    g_in_handler.fetch_add(1);
    const int fd = g_write_fd.load();
    if (getpid() != g_owner.load()) {
        // A forked child still running our action: there is no watcher here; behave as the
        // SIG_DFL we replaced. Blocked while we run, the re-raised signal is delivered (and
        // ends the process) as soon as we return.
        set_default(signo);
        raise(signo);
    } else if (fd >= 0) {
        const unsigned char byte = static_cast<unsigned char>(signo);
        ssize_t ignored = write(fd, &byte, 1);  // non-blocking: a full pipe already holds one
        (void)ignored;
    } else {
        // remove() has already put SIG_DFL back and closed the pipe while this delivery was
        // on its way: let the default action have it.
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

// pthread_atfork child hook: async-signal-safe calls only (sigaction, close).
void after_fork_child() {
    if (g_owner.load() == 0) return;
    restore_defaults();
    const int w = g_write_fd.exchange(-1);
    const int r = g_read_fd.exchange(-1);
    if (w >= 0) close(w);
    if (r >= 0) close(r);
    // g_owner keeps the parent's pid: platform_exit_signals_inherited() tells from it.
}

bool set_fd_flags(int fd, bool nonblocking) {
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) return false;
    if (!nonblocking) return true;
    const int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

}  // namespace

Error platform_exit_signals_install() {
    if (g_owner.load() != 0) return Error::runtime("exit signals are already watched");
    int fds[2];
    if (pipe(fds) != 0) return Error::os("could not create the exit-signal pipe", errno);
    UniqueFd read_end(fds[0]);
    UniqueFd write_end(fds[1]);
    // CLOEXEC: programs the profiled program execs must not inherit the pipe.
    if (!set_fd_flags(read_end.get(), false) || !set_fd_flags(write_end.get(), true))
        return Error::os("could not set up the exit-signal pipe", errno);
    if (!g_atfork_registered) {
        if (pthread_atfork(nullptr, nullptr, &after_fork_child) != 0)
            return Error::runtime("could not register the exit-signal fork hook");
        g_atfork_registered = true;
    }
    g_read_fd.store(read_end.release());
    g_write_fd.store(write_end.release());
    g_owner.store(getpid());
    for (int i = 0; i < kSignalCount; ++i) {
        struct sigaction cur;
        if (sigaction(kSignals[i], nullptr, &cur) != 0) continue;
        if ((cur.sa_flags & SA_SIGINFO) != 0 || cur.sa_handler != SIG_DFL) continue;  // not ours to take
        install_ours(i);
    }
    return Error::none();
}

bool platform_exit_signals_reclaim(int signo) {
    if (g_owner.load() != getpid() || g_write_fd.load() < 0) return false;
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
    const int fd = g_read_fd.load();
    if (fd < 0) return -1;
    for (;;) {
        unsigned char byte = 0;
        const ssize_t n = read(fd, &byte, 1);
        if (n == 1) return byte;
        if (n < 0 && errno == EINTR) continue;
        return -1;
    }
}

void platform_exit_signals_wake() {
    const int fd = g_write_fd.load();
    if (fd < 0) return;
    const unsigned char zero = 0;
    ssize_t ignored = write(fd, &zero, 1);
    (void)ignored;
}

int platform_exit_signals_remove() {
    if (g_owner.load() == 0) return 0;
    restore_defaults();
    const int w = g_write_fd.exchange(-1);
    // From here a handler that has not loaded the descriptor yet sees -1 and re-raises its
    // signal to the default action. One that loaded it before is counted in g_in_handler and
    // takes microseconds: wait for it, so that its byte is in the pipe before we read it and
    // it never writes into a reused descriptor. Bounded: after ~1 s, leave the pipe open.
    bool quiet = false;
    for (int i = 0; i < 10000 && !(quiet = g_in_handler.load() == 0); ++i) {
        const struct timespec pause = {0, 100 * 1000};
        nanosleep(&pause, nullptr);
    }
    const int r = g_read_fd.exchange(-1);
    int late = 0;
    if (quiet && r >= 0) {
        // The watcher has gone: a signal byte still in the pipe arrived after it stopped
        // reading, and is the caller's to act on.
        const int fl = fcntl(r, F_GETFL);
        if (fl >= 0 && fcntl(r, F_SETFL, fl | O_NONBLOCK) == 0) {
            unsigned char byte = 0;
            for (int i = 0; i < 4096 && read(r, &byte, 1) == 1; ++i)
                if (byte != 0 && late == 0) late = byte;
        }
    }
    if (quiet) {
        if (w >= 0) close(w);
        if (r >= 0) close(r);
    }
    g_owner.store(0);
    return late;
}

bool platform_exit_signals_inherited() {
    const pid_t owner = g_owner.load();
    return owner != 0 && owner != getpid();
}

void platform_block_signals_in_this_thread() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
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
