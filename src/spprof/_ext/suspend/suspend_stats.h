// suspend/suspend_stats.h: the Mach sampler's counters.
//
// One writer (the sampler thread) and any number of readers (stats() from Python, the debug
// log at stop). Each counter is a lock-free atomic updated with relaxed ordering: readers get
// a value that is at most one tick stale, never a torn one. Nothing here allocates or locks,
// so the writer side may run right after a thread was resumed, and readers never wait for
// the sampler.
//
// Portable and Python-free; tested on Linux (tests/native/test_suspend_stats.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>

namespace spprof {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "stats are read while sampling");

// Plain copy of the counters, for reporting.
struct SuspendStatsSnapshot {
    uint64_t samples_captured = 0;  // records written into the threads' rings
    uint64_t samples_dropped = 0;   // records refused (ring full or busy, thread retired)
    uint64_t threads_sampled = 0;   // completed suspend -> copy -> resume cycles
    uint64_t threads_skipped = 0;   // thread gone, suspend refused, or not in the registry
    uint64_t total_suspend_ns = 0;  // sum of suspended-window lengths
    uint64_t max_suspend_ns = 0;    // longest single suspended window
    uint64_t walk_errors = 0;       // register read failed or Python chain unreadable
    uint64_t ticks = 0;             // sampler wake-ups that sampled
    uint64_t missed_ticks = 0;      // deadlines skipped while catching up
    uint64_t resume_failures = 0;   // thread_resume refused after a successful suspend
    uint64_t unmatched_threads = 0; // attached Python threads absent from the registry (last tick)
    uint64_t off_cpu_skipped = 0;   // CPU mode: threads left unsuspended because they were off CPU
};

class SuspendStats {
public:
    // ---- writer side: the sampler thread only, NO-HEAP ----------------------------------
    void add_captured() { bump(captured_); }
    void add_dropped() { bump(dropped_); }
    void add_sampled() { bump(sampled_); }
    void add_skipped() { bump(skipped_); }
    void add_walk_error() { bump(walk_errors_); }
    void add_tick() { bump(ticks_); }
    void add_missed_ticks(uint64_t n) { bump(missed_ticks_, n); }
    void add_resume_failure() { bump(resume_failures_); }
    void add_off_cpu_skipped() { bump(off_cpu_skipped_); }
    void set_unmatched(uint64_t n) { unmatched_.store(n, std::memory_order_relaxed); }
    void add_suspend_ns(uint64_t ns) {
        bump(total_suspend_ns_, ns);
        // Single writer: a plain load/compare/store cannot lose a larger value.
        if (ns > max_suspend_ns_.load(std::memory_order_relaxed)) {
            max_suspend_ns_.store(ns, std::memory_order_relaxed);
        }
    }

    // ---- any thread ---------------------------------------------------------------------
    SuspendStatsSnapshot snapshot() const {
        SuspendStatsSnapshot s;
        s.samples_captured = captured_.load(std::memory_order_relaxed);
        s.samples_dropped = dropped_.load(std::memory_order_relaxed);
        s.threads_sampled = sampled_.load(std::memory_order_relaxed);
        s.threads_skipped = skipped_.load(std::memory_order_relaxed);
        s.total_suspend_ns = total_suspend_ns_.load(std::memory_order_relaxed);
        s.max_suspend_ns = max_suspend_ns_.load(std::memory_order_relaxed);
        s.walk_errors = walk_errors_.load(std::memory_order_relaxed);
        s.ticks = ticks_.load(std::memory_order_relaxed);
        s.missed_ticks = missed_ticks_.load(std::memory_order_relaxed);
        s.resume_failures = resume_failures_.load(std::memory_order_relaxed);
        s.unmatched_threads = unmatched_.load(std::memory_order_relaxed);
        s.off_cpu_skipped = off_cpu_skipped_.load(std::memory_order_relaxed);
        return s;
    }

    // Control thread, while no sampler thread exists (start of a session).
    void reset() {
        for (std::atomic<uint64_t>* c : {&captured_, &dropped_, &sampled_, &skipped_,
                                         &total_suspend_ns_, &max_suspend_ns_, &walk_errors_,
                                         &ticks_, &missed_ticks_, &resume_failures_, &unmatched_,
                                         &off_cpu_skipped_}) {
            c->store(0, std::memory_order_relaxed);
        }
    }

private:
    static void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
        c.fetch_add(n, std::memory_order_relaxed);
    }

    std::atomic<uint64_t> captured_{0};
    std::atomic<uint64_t> dropped_{0};
    std::atomic<uint64_t> sampled_{0};
    std::atomic<uint64_t> skipped_{0};
    std::atomic<uint64_t> total_suspend_ns_{0};
    std::atomic<uint64_t> max_suspend_ns_{0};
    std::atomic<uint64_t> walk_errors_{0};
    std::atomic<uint64_t> ticks_{0};
    std::atomic<uint64_t> missed_ticks_{0};
    std::atomic<uint64_t> resume_failures_{0};
    std::atomic<uint64_t> unmatched_{0};
    std::atomic<uint64_t> off_cpu_skipped_{0};
};

}  // namespace spprof
