// wall_sampler.h: wall-clock mode's census thread, for platforms where a sample is taken by
// the thread itself in a signal handler (Linux).
//
// Threads that run are sampled by their own per-thread CPU timers, exactly as in CPU mode
// (no wake-up of ours per sample). Every max(interval, 10 ms), to absolute deadlines (no
// drift; censuses missed under load are skipped, not replayed), the census reads each
// attached thread's CPU clock and accounts for the time it spent off CPU (wall_census.h): a
// blocked thread is NOT signalled (no EINTR in the application) once its blocking stack is
// known; the census writes an idle record into its ring, and the drain gives that record the
// thread's last stack. A thread is signalled (platform_signal_thread) only to learn where it
// blocked, or for off-CPU time it spent runnable.
//
// Threads: start()/stop() from the session (GIL held); everything else on the sampler thread,
// which never touches Python. It reads the ThreadTable lock-free; ThreadCtx objects outlive
// it (the session stops the sampler before it frees anything).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "error.h"
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
    // Overhead budget: the sample interval widened to `interval_ns`; the census acts on every
    // k-th wake-up only, k = interval / census period (wake-ups stay on the base schedule, so
    // nothing drifts). Any thread.
    void set_interval(uint64_t interval_ns) {
        sample_interval_ns_.store(interval_ns, std::memory_order_relaxed);
        const uint64_t k = (interval_ns + census_ns_ / 2) / census_ns_;
        stride_.store(k < 1 ? 1u : static_cast<uint32_t>(k), std::memory_order_relaxed);
    }

    uint64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }
    uint64_t missed_ticks() const { return missed_.load(std::memory_order_relaxed); }
    uint64_t signals_sent() const { return signals_.load(std::memory_order_relaxed); }
    uint64_t idle_records() const { return idle_.load(std::memory_order_relaxed); }
    uint64_t idle_dropped() const { return idle_dropped_.load(std::memory_order_relaxed); }
    uint64_t state_probes() const { return probes_.load(std::memory_order_relaxed); }

private:
    static void* thread_main(void* arg);
    void tick();

    ThreadTable* const table_;
    const uint64_t census_ns_;
    const uint64_t run_threshold_ns_;  // CPU progress that counts as having run
    std::atomic<uint64_t> sample_interval_ns_;  // what one sample stands for
    std::vector<CensusSlot> slots_;  // sampler thread only
    pthread_t thread_{};
    bool started_ = false;
    std::atomic<bool> running_{false};
    std::atomic<uint32_t> stride_{1};
    uint64_t tick_index_ = 0;  // sampler thread only
    std::atomic<uint64_t> ticks_{0}, missed_{0}, signals_{0}, idle_{0}, idle_dropped_{0}, probes_{0};
};

// Sampler thread (or a registering thread, GIL held): writes a record into ctx's ring without
// being ctx's thread, taking the ring's turn through ctx->busy_. The record is `hdr` followed
// by hdr.depth frames. False (and nothing written) when the ring is busy, full or retired.
bool write_foreign_record(ThreadCtx* ctx, const struct RawSampleHeader& hdr,
                          const struct RawFrame* frames);

}  // namespace spprof
