// wall_sampler.cpp: see wall_sampler.h.
// Python.h before any system header, as Python requires: 3.15's pyconfig.h defines
// _XOPEN_SOURCE 800, which clashes with the 700 a system header has already set.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "wall_sampler.h"

#include <chrono>
#include <cstring>

#include "../framewalker.h"
#include "../log.h"
#include "../own_threads.h"
#include "../platform/platform.h"
#include "../sampler_round.h"
#include "../capture/record_writer.h"
#include "../capture/sample_record.h"
#include "../signal_handler.h"
#include "../suspend/cached_reader.h"
#include "../suspend/deadline_loop.h"
#include "../capture/thread_table.h"
#include "wall_census.h"

namespace spprof {

namespace {

// Census period floor: each wake-up costs the sampler ~30 us in a VM; threads that run are
// sampled by their own CPU timers, so the census needs only to account for blocked time.
// Sleep slices: stop() wakes the sleep itself; this only bounds a sleep that missed it.
constexpr uint64_t kMaxSleepNs = 1'000'000'000;
// A thread counts as having run when its CPU clock moved by more than 1 % of the census period
// and
// at least this much: a signal handler's return path and a woken-then-reblocked syscall cost a
// few microseconds, which is being idle, not running.
constexpr uint64_t kMinRunNs = 20'000;

struct SafeReadFetch {
    bool operator()(uintptr_t addr, void* out, size_t n) const { return platform_read_no_fault(addr, out, n); }
};

}  // namespace

// Another thread's memory, read a line at a time by reads that cannot fault: the census
// thread walks a stack that its owner may change (it woke up) or free (it ended) meanwhile.
struct WallSampler::OutsideReader : CachedReader<SafeReadFetch> {};

WallSampler::WallSampler(ThreadTable* table, uint64_t interval_ns)
    : table_(table),
      census_ns_(census_period_ns(interval_ns)),
      run_threshold_ns_(census_ns_ / 100 > kMinRunNs ? census_ns_ / 100 : kMinRunNs),
      sample_interval_ns_(interval_ns),
      reader_(new OutsideReader()),
      frames_(new RawFrame[kMaxPythonFrames]),
      pace_(census_ns_) {}

WallSampler::~WallSampler() { stop(); }

Error WallSampler::start() {
    running_.store(true, std::memory_order_release);
    const int rc = own_thread_create(&thread_, &WallSampler::thread_main, this);
    if (rc != 0) {
        running_.store(false);
        return Error::os("could not start the wall-clock sampler thread", rc);
    }
    started_ = true;
    return Error::none();
}

void WallSampler::stop() {
    if (!started_) return;
    {
        std::lock_guard<std::mutex> lock(sleep_mutex_);
        running_.store(false, std::memory_order_release);
    }
    sleep_cv_.notify_all();
    pthread_join(thread_, nullptr);
    started_ = false;
    log_debug("wall sampler stopped: %llu censuses (%llu missed, %llu passed over while quiet), %llu signals, "
              "%llu idle records, %llu state probes, %llu walks (%llu lost)",
              static_cast<unsigned long long>(ticks()), static_cast<unsigned long long>(missed_ticks()),
              static_cast<unsigned long long>(quiet_skips()),
              static_cast<unsigned long long>(signals_sent()), static_cast<unsigned long long>(idle_records()),
              static_cast<unsigned long long>(state_probes()), static_cast<unsigned long long>(walks()),
              static_cast<unsigned long long>(walks_lost()));
}

// The sampler's clock: monotonic time, and a sleep that stop() cuts short.
struct WallSampler::WakeableClock {
    WallSampler* self;
    uint64_t now() const { return platform_monotonic_ns(); }
    void sleep_until(uint64_t t) const {
        const uint64_t n = now();
        if (t <= n) return;
        std::unique_lock<std::mutex> lock(self->sleep_mutex_);
        self->sleep_cv_.wait_for(lock, std::chrono::nanoseconds(t - n),
                                 [this] { return !self->running_.load(std::memory_order_acquire); });
    }
};

void* WallSampler::thread_main(void* arg) {
    OwnThreadScope own;  // never sampled; its CPU time is spprof's in the balance
    // Its /proc reads (is a thread runnable?) open each thread's stat file once: in a table of
    // its own, that takes none of the program's numbers. Its log is muted (no stderr there).
    OwnFdTableScope table;
    auto* self = static_cast<WallSampler*>(arg);
    WakeableClock clock{self};
    run_deadline_loop(
        clock, self->census_ns_, kMaxSleepNs, self->running_,
        [self](uint64_t) {
            const uint64_t t = platform_monotonic_ns();
            if (self->last_tick_ns_ != 0 && t - self->last_tick_ns_ > self->longest_gap_ns())
                self->longest_gap_ns_.store(t - self->last_tick_ns_, std::memory_order_relaxed);
            self->last_tick_ns_ = t;
            const uint32_t periods = self->tick();
            self->ticks_.fetch_add(1, std::memory_order_relaxed);
            sampler_round_done();
            return periods;
        },
        [self](uint64_t missed) { self->missed_.fetch_add(missed, std::memory_order_relaxed); });
    // stop(): long waits passed over since their last visit get their time up to now (the
    // threads are still attached; the drain that follows reads these records).
    capture_gate_enter();
    self->tick_threads(self->census_ns_, true);
    capture_gate_leave();
    return nullptr;
}

uint32_t WallSampler::tick() {
    // Inside the capture gate while ctxs are in use: the session frees a retired ctx only
    // once the gate was seen empty (thread_table.h).
    capture_gate_enter();
    const bool quiet = tick_threads(census_ns_ * periods_);
    capture_gate_leave();
    const uint32_t stride = stride_.load(std::memory_order_relaxed);
    periods_ = pace_.after_census(quiet, stride);
    // Deadlines passed over because nothing needed a census (the budget's stride aside).
    const uint32_t floor = stride > 1 ? stride : 1;
    if (periods_ > floor) quiet_skips_.fetch_add(periods_ - floor, std::memory_order_relaxed);
    return periods_;
}

bool WallSampler::tick_threads(uint64_t period_ns, bool last) {
    const uint32_t n = table_->published();
    if (slots_.size() < n) slots_.resize(n);
    CensusParams params;
    params.sample_interval_ns = sample_interval_ns_.load(std::memory_order_relaxed);
    params.census_ns = period_ns;
    params.run_threshold_ns = run_threshold_ns_;
    bool quiet = true;
    const uint64_t census_now = platform_monotonic_ns();
    for (uint32_t serial = 0; serial < n; ++serial) {
        ThreadCtx* ctx = table_->by_serial(serial);
        if (ctx == nullptr || ctx->state_.load(std::memory_order_acquire) != ThreadState::kAttached)
            continue;
        // A thread without a Python state has no stack to read from outside: its CPU timer
        // samples it while it runs. One that blocks the sampling signal is left alone: its
        // time off the timer is not idle time.
        if (ctx->native_only() || ctx->signal_blocked_.load(std::memory_order_acquire)) continue;
        // Registered, its timer not armed yet: visited once that is settled (ThreadCtx).
        if (!ctx->timer_settled_.load(std::memory_order_acquire)) continue;
        if (slots_[serial].generation != ctx->generation_) {  // a new thread in a reused slot
            slots_[serial] = CensusSlot{};
            slots_[serial].generation = ctx->generation_;
        }
        CensusSlot& slot = slots_[serial];
        if (last ? slot.passed_over == 0 : census_pass_over(slot, census_now)) {
            if (!last) passed_over_.fetch_add(1, std::memory_order_relaxed);
            quiet = false;  // a blocked thread: the census keeps its period
            continue;
        }
        // The thread's span since the census's last visit (since its registration at a first
        // look, or since a window's end wrote a long wait up to then): the census's to account
        // for while it holds it. Zero while the thread as it ends, or a window's end, writes it.
        // While the census holds it the ctx says so (kCensusTailHeld): a thread that ends then
        // waits for the visit to hand it back rather than leave its span out. A thread without
        // a CPU timer keeps no span (the census samples all its time): taken, not held.
        const bool cpu_timer = ctx->cpu_timer_armed_.load(std::memory_order_acquire);
        // Disarmed as it ends, or retired (ThreadCtx::census_let_go cleared the
        // flag before the timer went): not one whose timer was refused. It writes its own
        // last stretch; taking its span here lost it.
        if (!cpu_timer && !ctx->timer_settled_.load(std::memory_order_acquire)) continue;
        uint64_t from = 0;
        if (!cpu_timer) {
            from = ctx->census_tail_from_ns_.exchange(0, std::memory_order_acq_rel);
        } else {
            from = ctx->census_tail_from_ns_.load(std::memory_order_acquire);
            if (from != 0 && !ctx->census_tail_from_ns_.compare_exchange_strong(from, kCensusTailHeld,
                                                                                std::memory_order_acq_rel))
                from = 0;  // the thread as it ends, or a window's end, took it meanwhile
        }
        if (from == 0 && slot.published) continue;
        const uint64_t from_cpu = ctx->census_cpu_ns_.load(std::memory_order_relaxed);
        CensusInput in;
        if (!platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &in.cpu_ns)) {  // gone
            if (from != 0) ctx->census_tail_from_ns_.store(from, std::memory_order_release);
            continue;
        }
        ctx->census_cpu_ns_.store(in.cpu_ns, std::memory_order_relaxed);
        in.now_ns = platform_monotonic_ns();
        in.cpu_at_capture_ns = ctx->last_cpu_ns_.load(std::memory_order_relaxed);
        in.first = ctx->needs_first_sample_.exchange(false, std::memory_order_acq_rel);
        in.cpu_timer = cpu_timer;
        if (from != 0) census_adopt(slot, from, from_cpu, in.first, census_now, census_ns_);
        const CensusDecision d = census_step(slot, in, params, [&] {
            probes_.fetch_add(1, std::memory_order_relaxed);
            return platform_thread_runnable(ctx->native_tid_) != 0;
        });
        quiet = quiet && census_quiet(slot, d, params);
        uint32_t censuses = census_visited(slot, d, in.cpu_timer, in.now_ns, census_ns_);
        if (last && censuses > 1) --censuses;  // stop() is no census: only those it was passed over in
        account(ctx, slot, d, in, censuses);
        // Handed back after the record (one writer of the thread's foreign records at a time),
        // census_cpu_ns_ and the carry first: the span from now on, for whoever comes next.
        slot.published = in.cpu_timer;
        if (in.cpu_timer) {
            ctx->census_carry_ns_.store(slot.carry_ns, std::memory_order_relaxed);
            ctx->census_long_wait_.store(slot.next_visit_ns != 0, std::memory_order_relaxed);
            ctx->census_at_wait_.store(census_span_at_wait(slot), std::memory_order_relaxed);
            ctx->census_tail_from_ns_.store(in.now_ns, std::memory_order_release);
        }
    }
    return quiet;
}

void WallSampler::account(ThreadCtx* ctx, CensusSlot& slot, const CensusDecision& d, const CensusInput& in,
                          uint32_t censuses) {
    if (d.action == CensusAction::kWalk) {
        const uint32_t flags = d.runnable ? kSampleRunnable : kSampleIdle;
        if (walk_outside(ctx, in.cpu_ns, in.now_ns, d.weight_ns, flags, censuses)) return;
        // A runnable thread that ran during the walk is on the line its CPU timer last
        // sampled: its wait goes there (depth 0), not to wherever it blocks next.
        if (d.runnable && write_census_record(ctx, in.now_ns, d.weight_ns, kSampleRunnable, censuses)) return;
        census_walk_lost(slot, d);
        return;
    }
    if (d.action == CensusAction::kSignal) {
        ctx->pending_idle_.store(d.idle, std::memory_order_relaxed);
        ctx->pending_weight_ns_.fetch_add(d.weight_ns > 0 ? d.weight_ns : 1, std::memory_order_acq_rel);
        if (platform_signal_thread(ctx->native_tid_, ctx->serial_)) signals_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    // Not written (the thread's own capture holds its ring, or the ring is full): the time
    // waits in the carry for the next visit, or for the thread as it ends, like a lost walk.
    const uint32_t idle_flags = d.runnable ? kSampleRunnable : (d.wait_end ? kSampleIdle | kSampleAtWait : kSampleIdle);
    if (d.action == CensusAction::kIdleRecord &&
        !write_census_record(ctx, in.now_ns, d.weight_ns, idle_flags, censuses))
        census_walk_lost(slot, d);
}

bool WallSampler::write_census_record(ThreadCtx* ctx, uint64_t now_ns, uint64_t weight_ns, uint32_t flags,
                                      uint32_t censuses) {
    if (!put_record(ctx, now_ns, weight_ns, flags, nullptr, 0, censuses)) return false;
    idle_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool WallSampler::walk_outside(ThreadCtx* ctx, uint64_t cpu_before_ns, uint64_t now_ns, uint64_t weight_ns,
                               uint32_t flags, uint32_t censuses) {
    OutsideReader& reader = *reader_;
    reader.reset();
    RawFrame* const frames = frames_.get();
    const WalkResult w = walk_python_stack(reader, reinterpret_cast<uintptr_t>(ctx->tstate_), frames, kMaxPythonFrames);
    // The thread did not run while we read (its CPU clock, in nanoseconds, did not move), so
    // nothing it owns changed under the walk and every code object it names was alive.
    uint64_t cpu_after = 0;
    if (!platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &cpu_after) || cpu_after != cpu_before_ns) {
        walks_lost_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    const uint32_t all = flags | (w.truncated || w.error ? kSampleTruncated : 0u);
    if (!put_record(ctx, now_ns, weight_ns, all, frames, w.depth, censuses)) return false;
    walks_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool WallSampler::put_record(ThreadCtx* ctx, uint64_t now_ns, uint64_t weight_ns, uint32_t flags,
                             const RawFrame* frames, uint32_t depth, uint32_t censuses) {
    RawSampleHeader hdr{};
    hdr.timestamp_ns = now_ns;
    hdr.weight_ns = weight_ns;
    hdr.native_tid = ctx->native_tid_;
    hdr.thread_serial = ctx->serial_;
    hdr.flags = flags;
    hdr.depth = static_cast<uint16_t>(depth);
    hdr.censuses = censuses > 1 ? censuses : 0;
    if (!write_foreign_record(ctx, hdr, frames)) {
        idle_dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    capture_count_idle();
    return true;
}

}  // namespace spprof
