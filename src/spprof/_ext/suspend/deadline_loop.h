// suspend/deadline_loop.h: the Mach sampler's wake-up schedule.
//
// The sampler thread sleeps to absolute deadlines (mach_wait_until on macOS), one interval
// apart, so that the time a tick takes does not push later ticks back. When a tick overran
// one or more deadlines (a slow walk, the machine was busy or asleep), the schedule does not
// fire the missed ticks back to back: it skips them, counts them, and resumes at the next
// deadline still in the future, in the original phase. Samples are weighted by measured
// elapsed time, so skipped deadlines lose no time in the profile.
//
// The clock is a template parameter (now(), sleep_until(t)) in whatever unit it likes (Mach
// ticks on macOS); the tests drive a fake clock. Sleeps are cut into slices of at most
// `max_sleep` so that a stop request is seen promptly even at a 1 s interval.
//
// A tick may return how many intervals ahead it wants the next one (the wall census stretches
// its period while it has nothing to account for): deadlines passed over that way are
// neither slept through one by one nor counted as missed. A tick returning void means 1.
//
// Portable and Python-free; tested on Linux (tests/native/test_suspend_loop.cpp).
// Called on the sampler thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace spprof {

class DeadlineSchedule {
public:
    // interval > 0, in clock units.
    explicit DeadlineSchedule(uint64_t interval) : interval_(interval ? interval : 1) {}

    // First deadline, one interval after `now`.
    uint64_t start(uint64_t now);
    // A tick that was due at next() finished at `now`: return the deadline `periods` intervals
    // on (at least 1), which is always later than `now`. Deadlines that already passed are
    // skipped and counted.
    uint64_t advance(uint64_t now, uint64_t periods = 1);

    uint64_t next() const { return next_; }
    uint64_t interval() const { return interval_; }
    uint64_t missed() const { return missed_; }  // deadlines skipped since start()

private:
    uint64_t interval_;
    uint64_t next_ = 0;
    uint64_t missed_ = 0;
};

struct LoopCounters {
    uint64_t ticks = 0;
    uint64_t missed = 0;
};

// Run until `running` is false: sleep to each deadline, then tick(deadline). `on_missed(n)`
// is told about deadlines skipped after each tick (n may be 0). tick returns void, or the
// number of intervals to the next tick. Sampler thread.
template <class Clock, class Tick, class OnMissed>
LoopCounters run_deadline_loop(Clock& clock, uint64_t interval, uint64_t max_sleep,
                               const std::atomic<bool>& running, Tick&& tick,
                               OnMissed&& on_missed) {
    LoopCounters c;
    DeadlineSchedule schedule(interval);
    if (max_sleep == 0) max_sleep = schedule.interval();
    uint64_t deadline = schedule.start(clock.now());
    while (running.load(std::memory_order_acquire)) {
        const uint64_t now = clock.now();
        if (now < deadline) {
            const uint64_t wake = deadline - now > max_sleep ? now + max_sleep : deadline;
            clock.sleep_until(wake);
            continue;  // re-check `running` after every slice
        }
        uint64_t periods = 1;
        if constexpr (std::is_void_v<decltype(tick(deadline))>) {
            tick(deadline);
        } else {
            periods = static_cast<uint64_t>(tick(deadline));
        }
        ++c.ticks;
        const uint64_t missed_before = schedule.missed();
        deadline = schedule.advance(clock.now(), periods);
        const uint64_t missed_now = schedule.missed() - missed_before;
        c.missed += missed_now;
        on_missed(missed_now);
    }
    return c;
}

}  // namespace spprof
