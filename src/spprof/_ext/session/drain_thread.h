// drain_thread.h: the drain thread: wakes every period and, when a pass is due, runs it with the GIL.
//
// Started by start(), joined by stop(). It holds its own thread state (tstate(), excluded
// from sampling and invisible to threading) and wakes every period, but takes the GIL for a
// pass only when a capture asked for one (its ring would fill within 200 ms: record_writer.h), when the application replaced
// our sampling-signal handler, or at the latest every kMaxIdlePeriods-th wake-up: each pass
// costs the running program a GIL hand-off and the drain a thread scan. Every wake-up, GIL or not, puts the
// fault guard back in front of a SIGSEGV/SIGBUS handler the program installed meanwhile,
// and asks whether the control socket has a client (control_wake.h: served with the GIL).
// Before a pass, the GIL not taken yet, the optional BeforePass does the pass's work that
// needs no GIL (the OS thread list: os_thread_scan.cpp), so the program waits less for it.
// After a pass, with the GIL let go, the optional AfterPass does work the pass left for it
// (module files to read: symbol_reads.h); when it did some, the next pass comes at once.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "../gil_join.h"
#include "../own_table_worker.h"

namespace spprof {

class DrainThread {
public:
    using Pass = void (*)(void* arg);  // runs on the drain thread, GIL held
    // Runs on the drain thread after each pass, GIL released; true: run the next pass now.
    using AfterPass = bool (*)(void* arg);
    // Runs on the drain thread right before each pass, GIL not held.
    using BeforePass = void (*)(void* arg);

    DrainThread() = default;
    DrainThread(const DrainThread&) = delete;
    DrainThread& operator=(const DrainThread&) = delete;

    // GIL held. Starts the thread; without one (pthread_create failed: logged), no pass runs
    // until stop() and started() stays false.
    void start(uint32_t period_ms, Pass pass, void* arg, AfterPass after_pass = nullptr,
               BeforePass before_pass = nullptr);
    // GIL held (released while joining: the thread may be waiting for it). After it returns
    // the thread is gone and no pass runs, also when another thread's stop() was joining it
    // (gil_join.h).
    void stop();
    // In a forked child: the thread does not exist there and its mutex may be held: touch neither.
    void abandon() {
        join_.forget();
        reads_.abandon();
    }

    bool started() const { return join_.running(); }
    // GIL held. The drain thread's state (nullptr when not running), never sampled.
    PyThreadState* tstate() const { return tstate_; }

private:
    static void* main(void* arg);

    GilJoin join_;
    OwnTableWorker reads_;  // the pass's /proc reads, in a descriptor table of spprof's own
    PyThreadState* tstate_ = nullptr;
    uint32_t period_ms_ = 50;
    Pass pass_ = nullptr;
    AfterPass after_pass_ = nullptr;
    BeforePass before_pass_ = nullptr;
    void* pass_arg_ = nullptr;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool stop_ = false;
};

}  // namespace spprof
