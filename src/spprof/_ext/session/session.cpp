// session.cpp: a session's lifecycle and its drain pass (see session.h).
#include "session.h"

#include <cstring>

#include "exit_dump.h"
#include "proc_reads.h"
#include "../exit_calls.h"
#include "../log.h"
#include "../own_threads.h"
#include "../signal_handler.h"
#include "../unwind/eval_ranges.h"
#include "../unwind/rust_demangle.h"

namespace spprof {

Session::Session(const SessionConfig& config)
    : config_(config),
      threads_(config_, counters_),
      drain_(config_, threads_, resolver_, store_, keepalive_, counters_) {
    threads_.set_ring_sink(&drain_);
}

Session::~Session() = default;

Error Session::start(bool threads_after_fork) {
    // The scan below and the balance's readings open /proc files: on a worker, in a table of
    // spprof's own, never on the program's lowest free numbers (proc_reads.h).
    ProcReadsApart apart;
    capture_reset_stats();
    platform_reset_stats();
    start_ns_ = platform_monotonic_ns();
    rust_over_limit_at_start_ = spprof::rust_names_over_limit();
    // Before the first capture: from here no code object a sample may name can be freed
    // before the drain has resolved it.
    keepalive_.activate();
    // Handler first, then the table the handler reads, then the timers that fire into it.
    if (config_.native) {
        // A module file read for names while the GIL is held (nobody read it apart first; the
        // eval loop's ranges below, stop, a window's end) opens in a table of its own too.
        resolver_.symbolizer().set_file_read_runner(&own_thread_run_apart);
        // Unwind tables and the eval loop's address ranges, before the first signal.
        unwind_ = std::make_unique<UnwindTables>();
        Error u = unwind_->refresh();
        if (!u.ok()) {
            unwind_.reset();
            return u;
        }
        EvalRanges eval;
        Error r = find_eval_ranges(resolver_.symbolizer(), unwind_->current(), &eval);
        drain_.builder().set_eval_ranges(eval);
        unwind_->set_eval_ranges(eval);
        resolver_.set_eval_ranges(eval);
        if (!r.ok()) log_warning("native mode: %s; Python frames will sit above native ones", r.what);
        log_debug("native mode: %u eval-loop ranges, %llu modules without CFI", eval.count,
                  static_cast<unsigned long long>(unwind_->modules_without_cfi()));
        platform_set_native_unwinding(true);
    }
    const TimerKind kind = config_.wall_mode ? TimerKind::kWall : config_.timer;
    Error e = platform_timer_create(config_.interval_ns, kind);
    if (!e.ok()) {
        if (config_.native) platform_set_native_unwinding(false);
        return e;
    }
    // The guard before the first capture: from here a torn frame chain costs a sample, never
    // the process.
    e = platform_fault_guard_install(capture_fault_claim());
    if (!e.ok()) {
        platform_timer_destroy();
        if (config_.native) platform_set_native_unwinding(false);
        return e;
    }
    // What the session reads from /proc from here is read through descriptors it holds above
    // the program's numbers (platform.h, "the /proc descriptors").
    e = platform_proc_files_open();
    if (!e.ok()) {
        platform_fault_guard_remove();
        platform_timer_destroy();
        if (config_.native) platform_set_native_unwinding(false);
        return e;
    }
    capture_enable(&threads_.table(), unwind_.get());
    running_ = true;
    scan_threads();
    PlatformStats ps;
    platform_get_stats(&ps);
    if (threads_.table().live() == 0 || !platform_sampling_armed()) {
        stop();
        return Error::runtime("no thread could be sampled (per-thread timers refused and no fallback)");
    }
    timer_name_ = ps.timer;
    sampling_signal_ = platform_sampling_signal();
    budget_.reset(config_.interval_ns);
    if (config_.max_overhead_pct > 0) {
        const uint64_t signal_cost = platform_calibrate_signal_ns(200);
        const uint64_t now = platform_monotonic_ns();
        const uint64_t cpu = platform_process_cpu_ns();
        budget_.begin(config_.max_overhead_pct, signal_cost, now, cpu);
        log_debug("overhead budget %.3f %%: one signal delivery costs %llu ns", config_.max_overhead_pct,
                  static_cast<unsigned long long>(signal_cost));
    }
    if (config_.wall_mode && platform_traits().session_wall_census) {
        wall_ = std::make_unique<WallSampler>(&threads_.table(), config_.interval_ns);
        if (!threads_after_fork) e = wall_->start();
        if (!e.ok()) {
            wall_.reset();
            stop();
            return e;
        }
    }
    // The program's signal.signal on our sampling signal gives it back to us in the same call,
    // not at the next drain pass (exit_calls.h).
    signal_call_reset_retakes();
    const Error hooked = signal_call_hook(SignalCallHolder::kSession);
    if (!hooked.ok()) log_debug("signal.signal not covered: %s", hooked.what);
    if (threads_after_fork) {
        threads_stopped_for_fork_ = true;  // restart_threads_after_fork starts them
        log_debug("a fork is under way: spprof's threads start once it has ended");
    } else {
        start_drain_thread();
    }
    // The CPU balance's window opens here; threads found from now on bring the CPU they used
    // before (SessionCounters::cpu_before_found_ns).
    std::vector<OsThread> scratch;
    cpu_begin_ = read_cpu_now(&scratch);
    threads_.begin_window();
    log_debug("session started: interval %llu ns, timer %s, %zu threads",
              static_cast<unsigned long long>(config_.interval_ns), ps.timer, threads_.table().live());
    return Error::none();
}

Error Session::stop() {
    if (!running_) return Error::runtime("session is not running");
    ProcReadsApart apart;  // the last scan's and the names' /proc reads, as in start()
    settle_caller();  // a no-op if the Python side did it first
    // Whatever lets the GIL go from here (the drain thread's join, a collection during the
    // last scan) may let another thread fork: its after-fork hook must not start the threads
    // this stop is ending (restart_threads_after_fork).
    stopping_ = true;
    // First of all, no more captures: what the calling thread does from here is spprof's own
    // stopping, never a sample of the program (signals still arriving find no table).
    if (!capture_disable_and_wait()) {
        // A handler may still read this session's memory: it must never be freed.
        must_leak_ = true;
        log_warning("a sample capture did not finish within 1 s of stop(); leaking the session");
    }
    // Stopping is spprof's own work on the caller's thread, no longer sampled: the balance
    // counts it with spprof's threads.
    const uint64_t caller_tid = platform_current_tid();
    uint64_t caller_cpu0 = 0;
    platform_thread_cpu_ns_of(caller_tid, 0, &caller_cpu0);
    if (wall_) wall_->stop();  // no more sample requests or idle records from here on
    drain_thread_.stop();
    // Threads that ended since the last drain are retired now, so they are reported as
    // ended (with their names) rather than as running at stop.
    scan_threads();
    threads_.refresh_cpu_all();
    {
        // The balance's window closes once every thread that ended is retired (its final CPU
        // known) and spprof's threads are joined.
        std::vector<OsThread> scratch;
        cpu_end_ = read_cpu_now(&scratch);
        uint64_t caller_cpu1 = 0;
        if (platform_thread_cpu_ns_of(caller_tid, 0, &caller_cpu1) && caller_cpu1 > caller_cpu0)
            stop_own_ns_ = caller_cpu1 - caller_cpu0;
    }
    PlatformStats ps;
    platform_get_stats(&ps);
    timer_name_ = ps.timer;  // a fallback may have happened after start()
    if (platform_sampling_signal() != 0) sampling_signal_ = platform_sampling_signal();
    // Before the timers go: what each one owes its thread (a thread-end sample each).
    threads_.finish_all();
    const ThreadTable& table = threads_.table();
    for (size_t i = 0; i < table.slot_count(); ++i)
        if (ThreadCtx* ctx = table.at(i)) platform_thread_detach(ctx);
    signal_call_unhook(SignalCallHolder::kSession);
    platform_timer_destroy();
    platform_fault_guard_remove();  // no capture runs any more (capture_disable_and_wait)
    platform_proc_files_close();  // spprof's threads are joined, the last scan is done
    for (size_t i = 0; i < table.slot_count(); ++i)
        if (ThreadCtx* ctx = table.at(i)) ctx->state_.store(ThreadState::kDetached, std::memory_order_release);
    if (config_.native) platform_set_native_unwinding(false);
    end_ns_ = platform_monotonic_ns();
    threads_.refresh_cpu_all();
    threads_.refresh_names();
    drain_all();
    if (config_.progress) progress_.clear();
    threads_.mark_running_at_stop();
    running_ = false;
    const CaptureStats cs = capture_stats();
    log_debug("session stopped: %llu captured, %llu dropped (ring full %llu, busy %llu, memory %llu), "
              "%zu threads, %zu stacks, %zu samples, %zu code objects",
              static_cast<unsigned long long>(cs.captured),
              static_cast<unsigned long long>(cs.dropped_full + cs.dropped_busy + counters_.dropped_memory),
              static_cast<unsigned long long>(cs.dropped_full), static_cast<unsigned long long>(cs.dropped_busy),
              static_cast<unsigned long long>(counters_.dropped_memory), static_cast<size_t>(counters_.threads_registered),
              store_.stack_count(), store_.sample_count(), resolver_.code_count());
    return Error::none();
}

void Session::abandon_after_fork() {
    // The drain thread does not exist in the child and its mutex may be held: touch neither.
    running_ = false;
    drain_thread_.abandon();
}

void Session::stop_threads_for_fork() {
    if (!running_) return;
    // Even when another thread's fork (or stop()) stopped them first: its join of the drain
    // thread may still be under way, GIL released, with the drain thread making or deleting
    // its thread state. drain_thread_.stop() waits for that join (gil_join.h). Forking
    // meanwhile copied CPython's thread-state lock held, and 3.9-3.11's child waits for it
    // forever in PyOS_AfterFork_Child (_PyThreadState_DeleteExcept): a hang in 1 of ~8 runs
    // of test_fork's stop-while-forking program under ASan on 3.11.
    threads_stopped_for_fork_ = true;
    if (wall_) {
        wall_->stop();
        threads_.fork_began();  // after the census's last pass: what it wrote is before
    }
    drain_thread_.stop();
}

bool Session::has_other_threads() const {
    const uint64_t me = platform_current_tid();
    for (const ThreadRecord& r : threads_.records()) {
        if (r.alive && !r.free && r.native_tid != 0 && r.native_tid != me && platform_thread_exists(r.native_tid))
            return true;
    }
    return false;
}

void Session::restart_threads_after_fork(bool fork_returned) {
    if (!threads_stopped_for_fork_) return;
    threads_stopped_for_fork_ = false;
    if (!running_ || stopping_) return;
    if (wall_) {
        // The census was away: the forking thread's wait goes where it is now. Not from inside
        // os.fork's hook: its stack there is spprof's, and the census was away milliseconds.
        if (fork_returned) threads_.settle_caller_after_fork();
        const Error e = wall_->start();
        if (!e.ok()) log_warning("wall mode: %s after fork; blocked threads are no longer sampled", e.what);
    }
    start_drain_thread();
}

Error Session::register_current_thread(PyObject* entry_code, PyObject* skip_code, const char* name, uint64_t tid) {
    if (!running_) return Error::none();
    PyThreadState* ts = PyThreadState_Get();
    if (ts == drain_thread_.tstate()) return Error::none();
    threads_.register_current(ts, entry_code, skip_code, name, tid);
    return Error::none();
}

void Session::thread_exiting(PyThreadState* ts, uint64_t tid) {
    if (!running_) return;
    // The forking thread in a child and finalization clear other threads' states too.
    if (reinterpret_cast<PyThreadState*>(PyGILState_GetThisThreadState()) != ts || platform_current_tid() != tid)
        return;
    threads_.thread_exiting(ts, tid);
}

void Session::start_drain_thread() {
    drain_thread_.start(config_.drain_interval_ms, &Session::drain_pass, this, &Session::drain_reads,
                        &Session::drain_prelist);
}

void Session::scan_threads(bool drain_thread) {
    // Threads a pass of the running drain finds were made from C (threading's hook registers
    // its own): counted as found by the scan. start()'s and stop()'s scans are not.
    threads_.scan(drain_thread_.tstate(), running_ && drain_thread_.started());
    // Threads without a Python state (Linux, macOS); the drain's pass uses the list its thread
    // took just before, without the GIL (drain_prelist).
    os_threads_scanned_ = threads_.scan_os_threads(drain_thread);
}

void Session::drain_all(SymbolReads* reads) {
    // Tables the drain thread read since the last pass, before any record needs them.
    if (config_.native) symbol_reads_.install(resolver_.symbolizer());
    store_.mark_time(platform_monotonic_ns());  // before the pass: every row held is older
    drain_.drain_all(memory_bytes() > config_.memory_limit_bytes, reads);
}

uint64_t Session::rust_names_over_limit() const {
    return spprof::rust_names_over_limit() - rust_over_limit_at_start_;
}

void Session::drain_rings() {
    if (!running_) return;
    const SessionMutation changing;  // an exit dump may be reading (exit_dump.h)
    const uint64_t t0 = platform_monotonic_ns();
    const uint64_t c0 = platform_own_cpu_ns();
    drain_all();
    drain_ns_ += platform_monotonic_ns() - t0;
    drain_cpu_ns_ += platform_own_cpu_ns() - c0;
}

void Session::periodic() { periodic_pass(false); }

void Session::pass_on_drain_thread() { periodic_pass(true); }

void Session::periodic_pass(bool drain_thread) {
    if (!running_) return;
    const SessionMutation changing;  // an exit dump may be reading (exit_dump.h)
    const uint64_t t0 = platform_monotonic_ns();
    const uint64_t c0 = platform_own_cpu_ns();
    if (platform_keep_handler()) {
        ++counters_.handler_retaken;
        log_debug("the application installed its own handler on our sampling signal: chaining to it, ours back in front");
    }
    scan_threads(drain_thread);
    // CPU clocks feed the thread table only (registration and retirement read them too, and
    // the handler records CPU with each sample): every 10th pass is plenty. Names every pass:
    // once a thread has ended, threading has forgotten it, so a rename is seen only if a pass
    // falls between it and the thread's end.
    if (passes_++ % 10 == 0) threads_.refresh_cpu_all();
    threads_.refresh_names();
    // Only the drain thread lets the GIL go after its pass to read what a record waits for.
    drain_all(drain_thread && config_.native ? &symbol_reads_ : nullptr);
    if (unwind_) unwind_->refresh();  // modules loaded since the last pass (cheap otherwise)
    if (config_.progress) show_progress();
    drain_ns_ += platform_monotonic_ns() - t0;
    drain_cpu_ns_ += platform_own_cpu_ns() - c0;
    if (config_.max_overhead_pct > 0) apply_budget();
}

CpuBalance Session::cpu_balance() const {
    std::vector<OsThread> scratch;
    const CpuReading end = running_ ? read_cpu_now(&scratch) : cpu_end_;
    CpuBalance b = spprof::cpu_balance(cpu_begin_, end, counters_, threads_.blocked_cpu_ns(), running_ ? 0 : stop_own_ns_);
    account_given_up(&b, end, platform_sampling_given_up_cpu_ns());
    return b;
}

void Session::apply_budget() {
    // Drain thread, GIL held: the budget's measurements in, its interval out to every timer.
    const uint64_t now = platform_monotonic_ns();
    if (!budget_.window_over(now)) return;
    const CaptureStats cs = capture_stats();
    PlatformStats ps;
    platform_get_stats(&ps);
    OverheadReading r;
    r.now_ns = now;
    r.capture_ns = cs.capture_ns;
    r.signals = ps.signals;
    r.drain_ns = drain_ns_;
    r.process_cpu_ns = platform_process_cpu_ns();
    const uint64_t next = budget_.close_window(r);
    if (next == budget_.effective_interval_ns()) return;
    Error e = platform_set_interval(next);
    if (!e.ok()) {
        log_warning("overhead budget disabled: %s", e.what);
        config_.max_overhead_pct = 0;
        return;
    }
    const ThreadTable& table = threads_.table();
    for (size_t i = 0; i < table.slot_count(); ++i)
        if (ThreadCtx* ctx = table.at(i)) platform_thread_set_interval(ctx, next);
    if (wall_) wall_->set_interval(next);
    budget_.applied(next);
    log_debug("overhead %.3f %% against a budget of %.3f %%: interval now %.2f ms", budget_.state().last_overhead_pct,
              config_.max_overhead_pct, static_cast<double>(next) / 1e6);
}

void Session::show_progress() {
    // Drain thread, GIL held.
    const uint64_t now = platform_monotonic_ns();
    if (!progress_.due(now)) return;
    const CaptureStats cs = capture_stats();
    const unsigned long long dropped = cs.dropped_full + cs.dropped_busy + counters_.dropped_memory;
    progress_.show(now - start_ns_, store_.sample_count(), dropped, threads_.live_count());
}

}  // namespace spprof
