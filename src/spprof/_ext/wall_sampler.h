// wall_sampler.h: wall-clock mode's sampler thread, for platforms where a sample is taken by
// the thread itself in a signal handler (Linux).
//
// Every interval, to absolute deadlines (no drift; ticks missed under load are skipped, not
// replayed back to back), the sampler reads each attached thread's CPU clock. A thread whose
// clock advanced since the previous tick ran: it is sent a sample request
// (platform_signal_thread) and captures its own stack, weighted by the wall time since its
// previous tick. A thread whose clock did not advance is blocked: it is NOT signalled (no
// EINTR in the application); the sampler writes an idle record into its ring instead, and the
// drain gives that record the thread's last stack.
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
    // Overhead budget: act on every k-th tick only, k = interval / the base interval (ticks
    // stay on the base schedule, so nothing drifts). Any thread.
    void set_interval(uint64_t interval_ns) {
        const uint64_t k = (interval_ns + interval_ns_ / 2) / interval_ns_;
        stride_.store(k < 1 ? 1u : static_cast<uint32_t>(k), std::memory_order_relaxed);
    }

    uint64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }
    uint64_t missed_ticks() const { return missed_.load(std::memory_order_relaxed); }
    uint64_t signals_sent() const { return signals_.load(std::memory_order_relaxed); }
    uint64_t idle_records() const { return idle_.load(std::memory_order_relaxed); }
    uint64_t idle_dropped() const { return idle_dropped_.load(std::memory_order_relaxed); }

private:
    struct Slot {
        uint64_t last_cpu_ns = 0;
        uint64_t last_tick_ns = 0;
        bool seen = false;
    };
    static void* thread_main(void* arg);
    void tick();

    ThreadTable* const table_;
    const uint64_t interval_ns_;
    const uint64_t run_threshold_ns_;  // CPU progress that counts as having run
    std::vector<Slot> slots_;  // sampler thread only
    pthread_t thread_{};
    bool started_ = false;
    std::atomic<bool> running_{false};
    std::atomic<uint32_t> stride_{1};
    uint64_t tick_index_ = 0;  // sampler thread only
    std::atomic<uint64_t> ticks_{0}, missed_{0}, signals_{0}, idle_{0}, idle_dropped_{0};
};

// Sampler thread (or a registering thread, GIL held): writes a record into ctx's ring without
// being ctx's thread, taking the ring's turn through ctx->busy_. The record is `hdr` followed
// by hdr.depth frames. False (and nothing written) when the ring is busy, full or retired.
bool write_foreign_record(ThreadCtx* ctx, const struct RawSampleHeader& hdr,
                          const struct RawFrame* frames);

}  // namespace spprof
