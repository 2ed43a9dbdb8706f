// wall_sampler.h: wall-clock mode's census thread, for platforms where a sample is taken by
// the thread itself in a signal handler (Linux).
//
// Threads that run are sampled by their own per-thread CPU timers, exactly as in CPU mode
// (no wake-up of ours per sample). Every max(interval, 10 ms), to absolute deadlines (no
// drift; censuses missed under load are skipped, not replayed; stretched up to 50 ms while
// every thread is running, CensusPace in wall_census.h), the census reads each
// attached thread's CPU clock and accounts for the time it spent off CPU (wall_census.h): a
// blocked thread is never signalled (a signal makes the blocking call it sits in fail with
// EINTR). While its CPU clock stands still its stack cannot change: the census writes an idle
// record into its ring and the drain gives it the thread's last stack. When the clock moved,
// or for time it spent runnable, the census reads the thread's Python stack from outside
// (walk_outside: reads that cannot fault, through platform_read_no_fault) and trusts the walk
// only if the thread's CPU clock did not move during it. Only a thread whose CPU timer was
// refused is signalled (platform_signal_thread): nothing else samples its CPU time.
//
// Threads: start()/stop() from the session (GIL held); everything else on the sampler thread,
// which never touches Python. It reads the ThreadTable lock-free; ThreadCtx objects outlive
// it (the session stops the sampler before it frees anything).
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "../error.h"
#include "../capture/record_writer.h"  // write_foreign_record, for the session
#include "wall_census.h"

namespace spprof {

class ThreadTable;
struct ThreadCtx;

class WallSampler {
public:
    WallSampler(ThreadTable* table, uint64_t interval_ns);
    ~WallSampler();
    WallSampler(const WallSampler&) = delete;
    WallSampler& operator=(const WallSampler&) = delete;

    Error start();
    void stop();  // joins the sampler thread; idempotent
    // Overhead budget: the sample interval widened to `interval_ns`; the census comes every
    // k-th deadline only, k = interval / census period (deadlines stay on the base schedule,
    // so nothing drifts). Any thread.
    void set_interval(uint64_t interval_ns) {
        sample_interval_ns_.store(interval_ns, std::memory_order_relaxed);
        const uint64_t k = (interval_ns + census_ns_ / 2) / census_ns_;
        stride_.store(k < 1 ? 1u : static_cast<uint32_t>(k), std::memory_order_relaxed);
    }

    uint64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }
    uint64_t missed_ticks() const { return missed_.load(std::memory_order_relaxed); }
    // The longest time between two censuses: a census places a period's off-CPU time on the
    // stack it finds at the period's end, so a thread's idle weight is true to within about
    // this much at each end of a wait (10 ms idle; more when the census waited for a CPU).
    uint64_t longest_gap_ns() const { return longest_gap_ns_.load(std::memory_order_relaxed); }
    // Base-period deadlines passed over while the census was stretched (wake-ups saved).
    uint64_t quiet_skips() const { return quiet_skips_.load(std::memory_order_relaxed); }
    uint64_t signals_sent() const { return signals_.load(std::memory_order_relaxed); }
    uint64_t idle_records() const { return idle_.load(std::memory_order_relaxed); }
    uint64_t idle_dropped() const { return idle_dropped_.load(std::memory_order_relaxed); }
    uint64_t state_probes() const { return probes_.load(std::memory_order_relaxed); }
    uint64_t walks() const { return walks_.load(std::memory_order_relaxed); }
    uint64_t walks_lost() const { return walks_lost_.load(std::memory_order_relaxed); }
    // Threads a census passed over (a long wait, its clock not read: wall_census.h).
    uint64_t passed_over() const { return passed_over_.load(std::memory_order_relaxed); }

private:
    struct OutsideReader;  // wall_sampler.cpp: a CachedReader over platform_read_no_fault
    struct WakeableClock;  // wall_sampler.cpp: the deadline loop's clock
    static void* thread_main(void* arg);
    // One census; returns the base periods to the next one.
    uint32_t tick();
    // True when the census was quiet (census_quiet for every thread). `last`: stop()'s census,
    // which visits only the threads passed over since their last visit (a long wait's time
    // since then), so that no wait's end is left out of the profile.
    bool tick_threads(uint64_t period_ns, bool last = false);
    // Sampler thread: what decision d asks for at a visit (a walk, a record or a signal).
    void account(ThreadCtx* ctx, CensusSlot& slot, const CensusDecision& d, const CensusInput& in,
                 uint32_t censuses);
    // Sampler thread: reads ctx's Python stack from outside and writes it into its ring as a
    // sample of `weight_ns` flagged `flags`. False when the walk cannot be trusted (the thread
    // ran during it, or has ended) or the record could not be written.
    bool walk_outside(ThreadCtx* ctx, uint64_t cpu_before_ns, uint64_t now_ns, uint64_t weight_ns,
                      uint32_t flags, uint32_t censuses = 1);
    // Sampler thread: a record with no frames (the drain gives it the thread's last stack).
    // `censuses`: how many censuses it stands for (census_visited).
    bool write_census_record(ThreadCtx* ctx, uint64_t now_ns, uint64_t weight_ns, uint32_t flags,
                             uint32_t censuses = 1);
    // Both of the above: the record (hdr + depth frames) into ctx's ring, counted either way.
    bool put_record(ThreadCtx* ctx, uint64_t now_ns, uint64_t weight_ns, uint32_t flags,
                    const struct RawFrame* frames, uint32_t depth, uint32_t censuses = 1);

    ThreadTable* const table_;
    const uint64_t census_ns_;
    const uint64_t run_threshold_ns_;  // CPU progress that counts as having run
    std::atomic<uint64_t> sample_interval_ns_;  // what one sample stands for
    std::vector<CensusSlot> slots_;  // sampler thread only
    std::unique_ptr<OutsideReader> reader_;    // allocated once, in the constructor
    std::unique_ptr<struct RawFrame[]> frames_;  // walk_outside's scratch
    pthread_t thread_{};
    bool started_ = false;
    std::atomic<bool> running_{false};
    // stop() wakes the sampler's sleep at once, so a stretched period needs no sleep slices
    // (each slice would be a wake-up, the cost the stretch saves).
    std::mutex sleep_mutex_;
    std::condition_variable sleep_cv_;
    std::atomic<uint32_t> stride_{1};
    CensusPace pace_;          // sampler thread only
    uint32_t periods_ = 1;     // sampler thread only: base periods since the last census
    uint64_t last_tick_ns_ = 0;  // sampler thread only: when the last census began
    std::atomic<uint64_t> longest_gap_ns_{0};
    std::atomic<uint64_t> ticks_{0}, missed_{0}, quiet_skips_{0}, signals_{0}, idle_{0}, idle_dropped_{0},
        probes_{0}, walks_{0}, walks_lost_{0}, passed_over_{0};
};

}  // namespace spprof
