// platform/thread_signals_posix.cpp: the signal mask of spprof's threads (platform.h:
// platform_thread_create, platform_block_signals_in_this_thread), on Linux and macOS.
//
// The kernel gives a signal sent to the process (Ctrl-C's SIGINT, SIGTERM, SIGCHLD, SIGALRM)
// to any thread that does not block it. One of ours would run the program's handler there
// (its main thread, blocked in waitpid() or sleep(), never sees EINTR), or, where the program
// blocks the signal in its threads and waits for it with sigwait(), take the default action:
// the process is killed. So our threads block every signal but those a faulting instruction
// raises: blocked, those would make the kernel kill the process instead of running the fault
// guard or faulthandler.
#if defined(__linux__) || defined(__APPLE__)

#include <signal.h>

#include "platform.h"

namespace spprof {
namespace {

sigset_t asynchronous_signals() {
    sigset_t set;
    sigfillset(&set);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&set, sig);
    return set;
}

}  // namespace

int platform_thread_create(pthread_t* thread, void* (*fn)(void*), void* arg) {
    // Blocked in the creator around pthread_create: the new thread has no instant without it.
    const sigset_t quiet = asynchronous_signals();
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &quiet, &old);
    const int rc = pthread_create(thread, nullptr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return rc;
}

void platform_block_signals_in_this_thread() {
    const sigset_t quiet = asynchronous_signals();
    pthread_sigmask(SIG_BLOCK, &quiet, nullptr);
}

std::vector<int> platform_blocked_signals() {
    const sigset_t quiet = asynchronous_signals();
    std::vector<int> out;
    for (int sig = 1; sig < NSIG; ++sig)
        if (sigismember(&quiet, sig) == 1) out.push_back(sig);
    return out;
}

}  // namespace spprof

#endif
