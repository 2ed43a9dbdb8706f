// test_suspend_loop.cpp: the sampler's deadline schedule with a fake clock (catch-up without a
// burst, phase kept, prompt stop through sleep slices) and the Mach time conversion.
#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

#include "harness.h"
#include "suspend/deadline_loop.h"
#include "suspend/time_convert.h"

using namespace spprof;

namespace {

struct FakeClock {
    uint64_t t = 1000;
    uint64_t oversleep = 0;  // mach_wait_until wakes late
    uint64_t sleeps = 0;
    uint64_t stop_at = 0;    // when t passes this, clear *running (0 = never)
    std::atomic<bool>* running = nullptr;
    uint64_t now() const { return t; }
    void sleep_until(uint64_t target) {
        ++sleeps;
        if (target > t) t = target;
        t += oversleep;
        if (stop_at != 0 && t >= stop_at && running) running->store(false);
    }
};

}  // namespace

TEST(schedule_advances_in_phase_and_skips_missed) {
    DeadlineSchedule s(10);
    CHECK_EQ(s.start(100), 110ull);
    CHECK_EQ(s.advance(112), 120ull);  // on time
    CHECK_EQ(s.missed(), 0ull);
    CHECK_EQ(s.advance(155), 160ull);  // 130, 140, 150 passed: skipped, phase kept
    CHECK_EQ(s.missed(), 3ull);
    CHECK_EQ(s.advance(170), 180ull);  // finishing exactly on a deadline skips it too
    CHECK_EQ(s.missed(), 4ull);
    CHECK_EQ(s.advance(1'000'000'170), 1'000'000'180ull);  // an hour asleep: one division
    CHECK_EQ(s.missed(), 4ull + 99'999'999ull);
}

TEST(loop_catches_up_without_burst) {
    FakeClock clock;
    std::atomic<bool> running{true};
    std::vector<uint64_t> deadlines, starts;
    uint64_t missed_reported = 0;
    const LoopCounters c = run_deadline_loop(
        clock, 10, 0, running,
        [&](uint64_t deadline) {
            deadlines.push_back(deadline);
            starts.push_back(clock.t);
            // Tick 3 takes 35 units (three and a half intervals); the rest take 2.
            clock.t += deadlines.size() == 3 ? 35 : 2;
            if (deadlines.size() == 10) running.store(false);
        },
        [&](uint64_t n) { missed_reported += n; });
    CHECK_EQ(c.ticks, 10ull);
    CHECK_EQ(c.missed, 3ull);
    CHECK_EQ(missed_reported, 3ull);
    bool in_phase = true, after_deadline = true, no_burst = true;
    for (size_t i = 0; i < deadlines.size(); ++i) {
        if ((deadlines[i] - 1000) % 10 != 0) in_phase = false;
        if (starts[i] < deadlines[i]) after_deadline = false;
        // Never two ticks for one wake-up: each tick starts at least an interval after the
        // previous one started, slow tick or not.
        if (i > 0 && starts[i] - starts[i - 1] < 10) no_burst = false;
    }
    CHECK(in_phase);
    CHECK(after_deadline);
    CHECK(no_burst);
    // The tick after the slow one is at 1070 (1040, 1050, 1060 skipped), not 1040.
    CHECK_EQ(deadlines[3], 1070ull);
}

TEST(loop_with_oversleep_keeps_deadlines) {
    FakeClock clock;
    clock.oversleep = 3;  // every wake-up is late by 3: deadlines stay absolute, no drift
    std::atomic<bool> running{true};
    std::vector<uint64_t> deadlines;
    run_deadline_loop(
        clock, 10, 0, running,
        [&](uint64_t d) {
            deadlines.push_back(d);
            if (deadlines.size() == 100) running.store(false);
        },
        [](uint64_t) {});
    CHECK_EQ(deadlines.size(), static_cast<size_t>(100));
    CHECK_EQ(deadlines.back(), 1000ull + 100 * 10);
    CHECK(clock.t < 1000 + 100 * 10 + 10);  // no accumulated lateness
}

TEST(loop_sleeps_in_slices_and_stops_promptly) {
    FakeClock clock;
    std::atomic<bool> running{true};
    clock.running = &running;
    clock.stop_at = 1000 + 250;  // stop requested a quarter into a 1000-unit interval
    uint64_t ticks = 0;
    run_deadline_loop(clock, 1000, 100, running, [&](uint64_t) { ++ticks; }, [](uint64_t) {});
    CHECK_EQ(ticks, 0ull);
    CHECK(clock.t <= 1000 + 250 + 100);  // noticed within one slice
    CHECK(clock.sleeps >= 3);
}

TEST(loop_tick_can_ask_for_a_later_deadline_without_counting_it_missed) {
    FakeClock clock;
    std::atomic<bool> running{true};
    std::vector<uint64_t> deadlines;
    uint64_t missed_reported = 0;
    const LoopCounters c = run_deadline_loop(
        clock, 10, 0, running,
        [&](uint64_t d) -> uint32_t {
            deadlines.push_back(d);
            if (deadlines.size() == 4) clock.t += 75;  // a slow tick while stretched
            if (deadlines.size() == 6) running.store(false);
            return deadlines.size() < 4 ? 4u : 1u;  // stretched, then back to every interval
        },
        [&](uint64_t n) { missed_reported += n; });
    CHECK_EQ(c.ticks, 6ull);
    CHECK_EQ(deadlines[0], 1010ull);
    CHECK_EQ(deadlines[1], 1050ull);  // 4 intervals on; the passed-over deadlines are not missed
    CHECK_EQ(deadlines[2], 1090ull);
    CHECK_EQ(deadlines[3], 1130ull);
    // Tick 4 finished at 1205: 1140 .. 1200 passed (7 missed), phase kept.
    CHECK_EQ(deadlines[4], 1210ull);
    CHECK_EQ(missed_reported, 7ull);
    CHECK_EQ(c.missed, 7ull);
}

TEST(loop_not_entered_when_not_running) {
    FakeClock clock;
    std::atomic<bool> running{false};
    uint64_t ticks = 0;
    run_deadline_loop(clock, 10, 0, running, [&](uint64_t) { ++ticks; }, [](uint64_t) {});
    CHECK_EQ(ticks, 0ull);
    CHECK_EQ(clock.sleeps, 0ull);
}

TEST(time_convert_apple_silicon_and_intel) {
    const Timebase arm{125, 3};
    const Timebase intel{1, 1};
    CHECK_EQ(mach_to_ns(3, arm), 125ull);
    CHECK_EQ(mach_to_ns(24'000'000, arm), 1'000'000'000ull);
    CHECK_EQ(ns_to_mach(1'000'000'000, arm), 24'000'000ull);
    CHECK_EQ(ns_to_mach(10'000'000, arm), 240'000ull);  // 10 ms
    CHECK_EQ(mach_to_ns(1, arm), 41ull);                 // floor
    CHECK_EQ(mach_to_ns(123456789, intel), 123456789ull);
    CHECK_EQ(ns_to_mach(123456789, intel), 123456789ull);
    CHECK_EQ(mach_to_ns(5, Timebase{0, 0}), 5ull);       // invalid timebase: identity
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
    CHECK_EQ(mach_to_ns(kMax, arm), kMax);               // saturates, never wraps
    CHECK_EQ(ns_to_mach(kMax, arm), kMax / 125 * 3 + (kMax % 125) * 3 / 125);
}

TEST(time_convert_exact_against_wide_arithmetic) {
    const Timebase bases[] = {{125, 3}, {1, 1}, {1000000000, 999999999}, {7, 1000}, {3, 125}};
    spprof_test::XorShift rng{0x9e3779b97f4a7c15ull};
    bool ok = true;
    for (const Timebase& tb : bases) {
        for (int i = 0; i < 2000; ++i) {
            const uint64_t v = rng.next() >> (i % 40);  // a spread of magnitudes
            const unsigned __int128 a = static_cast<unsigned __int128>(v) * tb.numer / tb.denom;
            const unsigned __int128 b = static_cast<unsigned __int128>(v) * tb.denom / tb.numer;
            const uint64_t ea = a > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(a);
            const uint64_t eb = b > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(b);
            if (mach_to_ns(v, tb) != ea || ns_to_mach(v, tb) != eb) ok = false;
        }
    }
    CHECK(ok);
}
