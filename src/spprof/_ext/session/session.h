// session.h: one profiling session: its lifecycle, and the parts it owns.
//
// Lifecycle (all GIL held, from Python): start() installs the timer, registers every Python
// thread that exists and starts the drain thread; stop() stops the drain, disarms every timer,
// waits for captures in flight, drains the rings one last time and keeps the result for
// export; the Session is then deleted. There is at most one Session per process, owned by
// module state; the signal path reaches it only through the ThreadTable handed to
// capture_enable().
//
// The parts, one job each:
//  - SessionThreads (session_threads.h): the sampled threads: scan, registration,
//    retirement, records, names (thread_names.h), CPU time;
//  - DrainThread (drain_thread.h): wakes every drain_interval_ms, runs periodic() when due;
//  - SampleDrain (sample_drain.h): rings -> stacks (StackBuilder, stack_builder.h) -> store;
//  - OverheadBudget (overhead_budget.h): measured cost -> next interval;
//  - ProgressLine (progress_line.h): the CLI's status line.
// periodic() is one drain pass over them: discover threads created from C, retire threads
// that ended, refresh thread names and CPU times, drain every ring through the resolver into
// the stack store, then the budget and the progress line. Memory therefore stays bounded by
// distinct stacks, not by samples waiting in rings.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "code_keepalive.h"
#include "cpu_balance.h"
#include "drain_thread.h"
#include "../error.h"
#include "overhead_budget.h"
#include "../platform/platform.h"
#include "progress_line.h"
#include "../resolver.h"
#include "sample_drain.h"
#include "session_config.h"
#include "session_threads.h"
#include "stack_store.h"
#include "symbol_reads.h"
#include "../capture/thread_table.h"
#include "../unwind/unwind_tables.h"
#include "../wall/wall_sampler.h"

namespace spprof {

class Session {
public:
    explicit Session(const SessionConfig& config);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // GIL held. Starts sampling every existing Python thread. `threads_after_fork`: another
    // thread's os.fork is under way (its before hook ran, its after hook has not): spprof's
    // threads start with restart_threads_after_fork once the last fork in flight has ended,
    // never while the process is being copied (a drain thread making its thread state holds
    // CPython's thread-state lock, which 3.9-3.11's child then waits for forever).
    Error start(bool threads_after_fork = false);
    // GIL held (released internally while joining the drain thread). After it returns no
    // timer, handler or thread of ours remains and every captured record is in the store.
    Error stop();
    // GIL held, on the thread to register (the threading hook). Idempotent. entry_code,
    // skip_code: see SessionThreads::register_current (may be null). name (may be null): the
    // thread's, when threading has not put it in _active yet (the hook runs before that).
    // tid: the calling thread's kernel id, or 0 to ask the kernel.
    Error register_current_thread(PyObject* entry_code = nullptr, PyObject* skip_code = nullptr,
                                  const char* name = nullptr, uint64_t tid = 0);
    // GIL held, while the state of a thread the hook registered is cleared (the watch of
    // thread_exit_watch.h): on that thread, its final CPU reading; from any other, nothing.
    void thread_exiting(PyThreadState* ts, uint64_t tid);
    // GIL held: what the drain thread does every interval; also callable on demand.
    void periodic();
    // GIL held: only the rings into the store (a window's end): none of periodic()'s thread
    // scan, names, modules or budget, which a window does not need and a per-request window
    // would pay for each time.
    void drain_rings();
    // GIL held, before a window's drain: wall mode's long waits get their time up to now.
    void settle_waits() {
        if (running_) threads_.settle_waits();
    }
    // GIL held, on the thread that is about to stop the session (stop() calls it too): in
    // wall mode its time off CPU since the census's last visit, on the stack it waited on,
    // before spprof's own stopping code can be sampled and become its last stack.
    void settle_caller() {
        if (running_ && wall_) threads_.settle_caller();
    }
    // In a forked child: forget everything without touching locks or Python objects.
    void abandon_after_fork();
    // GIL held (released while joining). Around os.fork, in the parent (os.register_at_fork's
    // before / after_in_parent): spprof's threads of this session (the drain, the wall census)
    // are stopped, not paused, so that the child inherits none of their locks and CPython
    // 3.12+ does not warn that a single-threaded program is multi-threaded. Samples keep
    // arriving in the rings meanwhile (a full ring counts its drops, as always). Idempotent.
    void stop_threads_for_fork();
    // fork_returned: called once the forking thread has left os.fork (3.13+'s pending call,
    // which may come seconds later): the time since goes where that thread is now.
    void restart_threads_after_fork(bool fork_returned = false);

    const SessionConfig& config() const { return config_; }
    const std::vector<ThreadRecord>& threads() const { return threads_.records(); }
    const StackStore& store() const { return store_; }
    const Resolver& resolver() const { return resolver_; }
    const SymbolReads& symbol_reads() const { return symbol_reads_; }
    // GIL held, after stop(): drop the references the resolver holds.
    void release_references() {
        keepalive_.deactivate();
        resolver_.release();
    }
    const CodeKeepAlive& keepalive() const { return keepalive_; }
    const SessionCounters& counters() const { return counters_; }
    uint64_t start_ns() const { return start_ns_; }
    uint64_t end_ns() const { return end_ns_; }
    // Everything the session holds: stacks, samples, resolved frames, per-thread memory
    // (contexts, rings, thread records), and what its Python side says it holds.
    size_t memory_bytes() const {
        return store_.memory_bytes() + resolver_.memory_bytes() + thread_memory_bytes() + python_bytes();
    }
    // The censuses' rows (spprof/_waits.py), set by them: one limit for the whole profile.
    void set_python_bytes(size_t n) { python_bytes_.store(n, std::memory_order_relaxed); }
    size_t python_bytes() const { return python_bytes_.load(std::memory_order_relaxed); }
    size_t thread_memory_bytes() const { return threads_.memory_bytes() + drain_.memory_bytes(); }
    size_t ring_touched_bytes() const { return threads_.ring_touched_bytes(); }
    bool running() const { return running_; }
    // stop() could not prove every capture finished: the owner must not delete the session.
    bool must_leak() const { return must_leak_; }
    const char* timer_name() const { return timer_name_; }  // the timer this session used
    int sampling_signal() const { return sampling_signal_; }  // the signal samples came on (0: none)
    const WallSampler* wall_sampler() const { return wall_.get(); }
    const UnwindTables* unwind_tables() const { return unwind_.get(); }
    const BudgetState& budget() const { return budget_.state(); }
    uint64_t drain_ns() const { return drain_ns_; }
    uint64_t drain_cpu_ns() const { return drain_cpu_ns_; }
    // Rust v0 names this session left mangled by a demangler limit (the counter runs since load).
    uint64_t rust_names_over_limit() const;
    uint32_t eval_range_count() const { return drain_.builder().eval_ranges().count; }
    // GIL held. The CPU balance (cpu_balance.h): from start() to stop(), or to now while running.
    CpuBalance cpu_balance() const;
    // Before or after a fork: a thread of the program's other than the caller lives (one the
    // session knows; checked with the OS, no file opened).
    bool has_other_threads() const;
    // Threads without a Python state are found and sampled (Linux); false: Python threads only.
    bool os_threads_scanned() const { return os_threads_scanned_; }

private:
    void scan_threads(bool drain_thread = false);
    // start() and the restart after a fork: the drain with its before- and after-pass calls.
    void start_drain_thread();
    // `reads`: the drain thread's pass in native mode (sample_drain.h).
    void drain_all(SymbolReads* reads = nullptr);
    void apply_budget();
    void show_progress();
    void periodic_pass(bool drain_thread);
    void pass_on_drain_thread();
    static void drain_pass(void* self) { static_cast<Session*>(self)->pass_on_drain_thread(); }
    // The drain thread, GIL released after a pass: the files that pass queued (symbol_reads.h).
    static bool drain_reads(void* self) { return static_cast<Session*>(self)->symbol_reads_.read_queued(); }
    // The drain thread, GIL not taken yet, right before its pass: the OS thread list.
    static void drain_prelist(void* self) { static_cast<Session*>(self)->threads_.prelist_os_threads(); }

    SessionConfig config_;
    SessionCounters counters_;
    SessionThreads threads_;
    Resolver resolver_;
    SymbolReads symbol_reads_;  // native mode: module files read off the GIL for resolver_
    CodeKeepAlive keepalive_;  // after resolver_: destroyed first, while the resolver still holds its refs
    StackStore store_;
    SampleDrain drain_;
    std::unique_ptr<WallSampler> wall_;
    bool threads_stopped_for_fork_ = false;
    bool stopping_ = false;  // stop() has begun: no fork restarts its threads
    // Native mode. Destroyed with the session, after stop() has restored the handler.
    std::unique_ptr<UnwindTables> unwind_;
    DrainThread drain_thread_;
    OverheadBudget budget_;
    ProgressLine progress_;
    uint64_t passes_ = 0;
    uint64_t start_ns_ = 0, end_ns_ = 0;
    uint64_t rust_over_limit_at_start_ = 0;
    uint64_t drain_ns_ = 0;  // time the drain spent holding the GIL
    // Its CPU in that time: below drain_ns_ when the drain, GIL held, waited for a core.
    uint64_t drain_cpu_ns_ = 0;
    std::atomic<size_t> python_bytes_{0};  // read by the drain thread, set under the GIL
    bool running_ = false;
    bool must_leak_ = false;
    bool os_threads_scanned_ = false;
    CpuReading cpu_begin_, cpu_end_;  // the balance's window: end of start(), stop()
    uint64_t stop_own_ns_ = 0;        // stop()'s work on its caller before the end reading
    const char* timer_name_ = "none";
    int sampling_signal_ = 0;
};

}  // namespace spprof
