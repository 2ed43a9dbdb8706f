// exit_signals.cpp: the CLI's exit-signal watcher (exit_signals.h).
#include "exit_signals.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "exit_calls.h"
#include "log.h"
#include "platform/platform.h"
#include "session/exit_dump.h"
#include "own_threads.h"

namespace spprof {
namespace {

// How long the runner may wait for the GIL. Python threads hand it over within the switch
// interval (5 ms); only C code that holds it takes longer, and then possibly forever. 2 s
// keeps the whole exit well inside `docker stop`'s and systemd's 10 s before SIGKILL.
constexpr auto kGilDeadline = std::chrono::seconds(2);

// Shared by the watcher and its runner. Lives on the watcher's stack: handle() never returns.
struct Handoff {
    Handoff(int s, PyObject* cb) : signo(s), callback(cb) {}
    const int signo;
    PyObject* const callback;
    std::mutex mutex;
    std::condition_variable cv;
    bool gil_taken = false;  // the runner holds the GIL and will end the process
    bool abandoned = false;  // the watcher gave up waiting and is ending the process
};

void say(const char* text) {
    ssize_t ignored = write(2, text, std::strlen(text));
    (void)ignored;
}

// Runner thread: takes the GIL (possibly never), calls the callback, ends the process.
void* run_callback(void* arg) {
    own_thread_enter();  // never left: the process ends on this thread
    platform_block_signals_in_this_thread();
    auto* h = static_cast<Handoff*>(arg);
    PyGILState_Ensure();  // never released: the process ends below
    {
        std::unique_lock<std::mutex> lock(h->mutex);
        // The watcher gave up and writes what it can without the GIL; it ends the process.
        // Holding the GIL here keeps the program (and the session) still meanwhile.
        if (h->abandoned) h->cv.wait(lock, [] { return false; });
        h->gil_taken = true;
    }
    h->cv.notify_all();
    PyObject* result = PyObject_CallFunction(h->callback, "i", h->signo);
    if (result == nullptr)
        PyErr_WriteUnraisable(h->callback);
    else
        Py_DECREF(result);
    platform_die_by_signal(h->signo);
}

}  // namespace

ExitSignalWatcher::ExitSignalWatcher(PyObject* callback) : callback_(callback) { Py_INCREF(callback_); }

ExitSignalWatcher::~ExitSignalWatcher() { Py_XDECREF(callback_); }

ExitSignalWatcher* ExitSignalWatcher::start(PyObject* callback, Error* err) {
    *err = platform_exit_signals_install();
    if (!err->ok()) return nullptr;
    auto* w = new ExitSignalWatcher(callback);
    pthread_t thread;
    if (own_thread_create(&thread, &ExitSignalWatcher::thread_main, w) != 0) {
        *err = Error::runtime("could not start the exit-signal watcher thread");
        platform_exit_signals_remove();
        delete w;
        return nullptr;
    }
    w->join_.started(thread);
    // A program that restores SIG_DFL through signal.signal gets our handler back; without
    // the stand-in only that round trip is lost, so a failure is not the caller's error.
    const Error hooked = signal_call_hook(SignalCallHolder::kExitSignals);
    if (!hooked.ok()) log_debug("signal.signal not covered: %s", hooked.what);
    return w;
}

void ExitSignalWatcher::stop() {
    signal_call_unhook(SignalCallHolder::kExitSignals);
    if (platform_exit_signals_inherited()) {
        // A forked child: the thread was not copied, so there is nothing to wake or join.
        platform_exit_signals_remove();
        join_.forget();
        return;
    }
    // A signal read before the wake-up ends the process from the watcher; join then never
    // returns, and must not hold the GIL the runner needs (gil_join.h lets it go).
    join_.stop([] { platform_exit_signals_wake(); });
    const int late = platform_exit_signals_remove();
    if (late != 0) platform_die_by_signal(late);
}

void ExitSignalWatcher::stop_thread_for_fork() {
    // A join under way (another thread's fork, or stop()) is waited for, not skipped: the
    // watcher may be making or deleting its thread state, whose lock a fork must not copy
    // held (Session::stop_threads_for_fork).
    if (join_.running()) stopped_for_fork_ = true;
    // As in stop(): a signal read before the wake-up ends the process from the watcher.
    join_.stop([] { platform_exit_signals_wake(); });
}

void ExitSignalWatcher::restart_thread_after_fork() {
    if (!stopped_for_fork_) return;
    stopped_for_fork_ = false;
    pthread_t thread;
    if (own_thread_create(&thread, &ExitSignalWatcher::thread_main, this) == 0) {
        join_.started(thread);
    } else {
        log_warning("could not restart the exit-signal watcher after fork: SIGTERM, SIGHUP and SIGQUIT now "
                    "end the program without writing the profile");
    }
}

void* ExitSignalWatcher::thread_main(void* self) {
    OwnThreadScope own;  // never sampled; its CPU time is spprof's in the balance
    platform_block_signals_in_this_thread();
    auto* w = static_cast<ExitSignalWatcher*>(self);
    for (;;) {
        const int signo = platform_exit_signals_wait();
        if (signo <= 0) return nullptr;  // stop(), or the handler is gone
        w->handle(signo);
    }
}

void ExitSignalWatcher::handle(int signo) {
    if (!Py_IsInitialized()) platform_die_by_signal(signo);
    Handoff h(signo, callback_);
    pthread_t runner;
    if (own_thread_create(&runner, &run_callback, &h) == 0) {
        pthread_detach(runner);
        std::unique_lock<std::mutex> lock(h.mutex);
        if (h.cv.wait_for(lock, kGilDeadline, [&h] { return h.gil_taken; })) {
            lock.unlock();
            // The runner ends the process once the profile is written; a second exit
            // signal meanwhile ends it now.
            for (;;) {
                const int again = platform_exit_signals_wait();
                if (again > 0) {
                    char line[160];
                    std::snprintf(line, sizeof line,
                                  "spprof: second %s while writing the profile: ending now, the "
                                  "profile may be incomplete\n",
                                  platform_signal_name(again));
                    say(line);
                    platform_die_by_signal(again);
                }
                if (again < 0) {
                    // Nothing to wait on: wait for the runner.
                    lock.lock();
                    h.cv.wait(lock, [] { return false; });
                }
            }
        }
        h.abandoned = true;
    }
    // Without the GIL: what the drain already resolved, as a .spprof file (exit_dump.h).
    const ExitDumpResult dump = exit_dump_write();
    const long long secs = std::chrono::duration_cast<std::chrono::seconds>(kGilDeadline).count();
    std::string line(dump.path.size() + 300, '\0');
    int n;
    if (dump.written)
        n = std::snprintf(&line[0], line.size(),
                          "spprof: %s while C code held the GIL for %lld s: wrote the %llu samples "
                          "drained so far to %s (.spprof; `spprof report` reads it)\n",
                          platform_signal_name(signo), secs, static_cast<unsigned long long>(dump.samples),
                          dump.path.c_str());
    else
        n = std::snprintf(&line[0], line.size(),
                          "spprof: %s: the profile could not be written: a thread (the main thread, "
                          "usually) held the GIL in C code for %lld s, and %s\n",
                          platform_signal_name(signo), secs, dump.why);
    if (n > 0) line.resize(std::min<size_t>(static_cast<size_t>(n), line.size() - 1));
    say(line.c_str());
    platform_die_by_signal(signo);
}

}  // namespace spprof
