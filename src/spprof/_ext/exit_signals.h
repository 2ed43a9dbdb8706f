// exit_signals.h: the CLI's watcher for the signals that end a program (SIGTERM, SIGHUP,
// SIGQUIT).
//
// The platform's handler (platform.h, "exit signals") counts each such signal and posts a
// semaphore (no file descriptor). The watcher, a thread of spprof's with no Python thread
// state, waits on that semaphore. On a
// signal it starts a runner thread that takes the GIL and calls the CLI's callback (stop the
// session, write the profile, print the summary); the runner then ends the process by the
// same signal, still holding the GIL so that no program code runs after the profile is
// written. If the GIL cannot be had within kGilDeadline (a thread holds it in C code and never
// lets go), the watcher writes what the drain already resolved as a .spprof file without the
// GIL (session/exit_dump.h), says so in one line on stderr and ends the process by the signal
// itself: a profile is not worth a process that will not die. A second exit signal while the
// profile is being written ends the process at once. While it runs, a signal.signal call that
// sets a watched signal back to SIG_DFL gets our handler back (exit_calls.h).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

#include "error.h"
#include "gil_join.h"

namespace spprof {

class ExitSignalWatcher {
   public:
    // GIL held. Installs the handler and starts the watcher thread; `callback` is called with
    // the signal number (GIL held, from the runner thread) and must not return early: the
    // process ends when it returns. Returns nullptr and sets *err on failure.
    static ExitSignalWatcher* start(PyObject* callback, Error* err);

    // GIL held (released while joining). Stops the thread, puts SIG_DFL back where ours still
    // is. If a signal arrived after the thread stopped reading, ends the process by it (the
    // caller has written the profile by then). In a forked child, only forgets the handler.
    void stop();

    // GIL held (released while joining). Around os.fork, in the parent: the watcher thread is
    // stopped (the child inherits no thread of ours, nor CPython 3.12+'s fork warning) and
    // started again; the handler stays, and a signal that arrives meanwhile waits in the pipe
    // for the new thread. Idempotent.
    void stop_thread_for_fork();
    void restart_thread_after_fork();

    ~ExitSignalWatcher();
    ExitSignalWatcher(const ExitSignalWatcher&) = delete;
    ExitSignalWatcher& operator=(const ExitSignalWatcher&) = delete;

   private:
    explicit ExitSignalWatcher(PyObject* callback);
    static void* thread_main(void* self);
    [[noreturn]] void handle(int signo);

    PyObject* callback_;  // strong reference, dropped by stop()
    GilJoin join_;
    bool stopped_for_fork_ = false;
};

}  // namespace spprof
