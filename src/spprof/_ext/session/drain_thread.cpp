// drain_thread.cpp: the drain thread's loop (see drain_thread.h).
#include "drain_thread.h"

#include <chrono>

#include "../log.h"
#include "../own_threads.h"
#include "../platform/platform.h"
#include "../signal_handler.h"
#include "control_wake.h"
#include "proc_reads.h"
#include "drain_timer.h"
#include "python_tick.h"

namespace spprof {

namespace {

// Drain periods a pass may be put off while no capture asked for one (250 ms at 50 ms).
constexpr uint32_t kMaxIdlePeriods = 5;

}  // namespace

void DrainThread::start(uint32_t period_ms, Pass pass, void* arg, AfterPass after_pass, BeforePass before_pass) {
    period_ms_ = period_ms;
    pass_ = pass;
    after_pass_ = after_pass;
    before_pass_ = before_pass;
    pass_arg_ = arg;
    stop_ = false;
    // The /proc reads' worker first, from here: start() returns with both threads running
    // with their final signal masks (a thread glibc is still creating blocks every signal).
    reads_.start();
    pthread_t thread;
    if (own_thread_create(&thread, &DrainThread::main, this) == 0) {
        join_.started(thread);
    } else {
        reads_.stop();
        log_warning("could not start the drain thread; samples are drained at stop() only");
    }
}

void DrainThread::stop() {
    // The drain thread may be waiting for the GIL we hold: gil_join.h lets it go.
    join_.stop([this] {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
    });
}

void* DrainThread::main(void* arg) {
    auto* self = static_cast<DrainThread*>(arg);
    OwnThreadScope own;  // never sampled; its CPU time is spprof's in the balance
    // The pass's /proc reads (the thread scan's) are made on a worker in a descriptor table of
    // spprof's own (proc_reads.h), started by start() and ended with this thread (so before a
    // fork, too).
    proc_reads_use_worker(&self->reads_);
    PyGILState_STATE gil = PyGILState_Ensure();
    self->tstate_ = PyThreadState_Get();
    PyThreadState* saved = PyEval_SaveThread();
    const auto period = std::chrono::milliseconds(self->period_ms_);
    // Each pass takes the GIL from the running program (a hand-off, two context switches, a
    // thread scan): with the rings far from full, wait up to kMaxIdlePeriods periods between
    // passes. A capture whose ring would fill within 200 ms, or an application that replaced
    // our signal handler, gets a pass at the next wake-up.
    uint32_t idle_periods = 0;
    bool again = false;  // the last pass left work that is now done: the next pass at once
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(self->mutex_);
            // A timed call already due goes first: a program forking every few milliseconds
            // stops and restarts this thread each time, before any period has passed.
            if (!again && !python_drain_timer().due(platform_monotonic_ns())) {
                self->cv_.wait_for(lock, period, [self] { return self->stop_; });
            }
            if (self->stop_) break;
        }
        // Every wake-up, without the GIL: a SIGSEGV/SIGBUS handler the program installed since
        // the last one is put behind the fault guard again.
        platform_fault_guard_keep();
        // The control socket (control_wake.h): one poll, the GIL only when a client waits.
        const bool serve = control_wake_due();
        // The asyncio task census (python_tick.h), when one runs: queued at its time, made
        // here if the main thread has not made it within half a period.
        python_tick_queue_if_due();
        const bool tick = python_tick_overdue();
        // Python's timed call (drain_timer.h), when one is set and due.
        const bool timer = python_drain_timer().due(platform_monotonic_ns());
        const bool pass = again || !(++idle_periods < kMaxIdlePeriods && !capture_take_drain_request() &&
                                     !platform_handler_replaced());
        again = false;
        if (!serve && !tick && !timer && !pass) continue;
        if (pass) idle_periods = 0;
        if (pass && self->before_pass_ != nullptr) self->before_pass_(self->pass_arg_);
        PyEval_RestoreThread(saved);
        // stop() may have come while this thread waited for the GIL: then no pass.
        bool stopping;
        {
            std::lock_guard<std::mutex> lock(self->mutex_);
            stopping = self->stop_;
        }
        if (!stopping && serve) control_wake_serve();
        if (!stopping && tick) python_tick_serve();
        if (!stopping && timer) python_drain_timer().call("drain timer");
        if (!stopping && pass) {
            self->pass_(self->pass_arg_);
            // Asked while this pass waited for the GIL or ran: its rings were read since. A
            // ring still filling fast asks again with its next record; taken here, the flag
            // made every other wake-up a pass with a few records to drain.
            (void)capture_take_drain_request();
        }
        saved = PyEval_SaveThread();
        // Each call does what the pass before it queued, and a pass queues a file once
        // (symbol_reads.h): `again` cannot hold the loop.
        if (!stopping && pass && self->after_pass_ != nullptr) again = self->after_pass_(self->pass_arg_);
    }
    proc_reads_use_worker(nullptr);
    self->reads_.stop();
    PyEval_RestoreThread(saved);
    self->tstate_ = nullptr;  // GIL held; stop() returns only once this thread is gone
    PyGILState_Release(gil);
    return nullptr;
}

}  // namespace spprof
