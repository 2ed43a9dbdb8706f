// test_wall_census.cpp: wall mode's per-thread census decisions over made-up clocks: blocked
// time becomes idle records on the blocking stack, a thread is signalled only to learn where
// it blocked, off-CPU time of a thread that also ran is carried until it can be placed, and
// every nanosecond of wall time ends up in exactly one sample.
#include <cstdint>

#include "harness.h"
#include "wall/wall_census.h"

using spprof::census_step;
using spprof::CensusAction;
using spprof::CensusDecision;
using spprof::CensusInput;
using spprof::CensusParams;
using spprof::CensusSlot;

namespace {

constexpr uint64_t kMs = 1'000'000;

CensusParams params() {
    CensusParams p;
    p.sample_interval_ns = 1 * kMs;
    p.census_ns = 10 * kMs;
    p.run_threshold_ns = 100'000;
    return p;
}

// One simulated thread: wall clock, CPU clock, the CPU samples its timer would have taken and
// the census's decisions, with the weights of everything summed.
struct Sim {
    CensusSlot slot;
    CensusParams p = params();
    uint64_t now = 0, cpu = 0, cpu_at_capture = 0;
    bool timer = true, first = false;
    bool runnable_now = false;
    int probes = 0;
    uint64_t cpu_weight = 0, idle_record_weight = 0, idle_signal_weight = 0, oncpu_signal_weight = 0;
    uint64_t runnable_weight = 0;
    int signals = 0, walks = 0, idle_records = 0;
    bool lose_walks = false;  // the thread runs during every walk: none can be trusted

    // The thread runs `run` then blocks for the rest of the census period.
    CensusDecision period(uint64_t run, bool runnable_at_census = false) {
        now += p.census_ns;
        cpu += run;
        if (timer) cpu_weight += run;  // the CPU timer's samples carry the CPU time
        runnable_now = runnable_at_census;
        CensusInput in;
        in.now_ns = now;
        in.cpu_ns = cpu;
        in.cpu_at_capture_ns = cpu_at_capture;
        in.first = first;
        in.cpu_timer = timer;
        first = false;
        const CensusDecision d = census_step(slot, in, p, [this] {
            ++probes;
            return runnable_now;
        });
        if (d.action == CensusAction::kWalk && lose_walks) {
            spprof::census_walk_lost(slot, d);
        } else if (d.action == CensusAction::kWalk) {
            ++walks;  // costs the thread nothing: no CPU baseline moves
            (d.runnable ? runnable_weight : idle_signal_weight) += d.weight_ns;
        } else if (d.action == CensusAction::kSignal) {
            ++signals;
            (d.idle ? idle_signal_weight : oncpu_signal_weight) += d.weight_ns;
            cpu_at_capture = cpu;  // the handler records its CPU clock after the capture
        } else if (d.action == CensusAction::kIdleRecord) {
            ++idle_records;
            idle_record_weight += d.weight_ns;
        }
        return d;
    }
    uint64_t total() const {
        return cpu_weight + idle_record_weight + idle_signal_weight + oncpu_signal_weight + runnable_weight;
    }
};

}  // namespace

TEST(census_blocked_thread_with_known_stack_gets_idle_records_and_no_walk) {
    Sim s;
    s.slot.seen = true;  // registered by another thread: its stack was recorded then
    s.slot.stack_current = true;
    for (int i = 0; i < 100; ++i) {
        const CensusDecision d = s.period(0);
        CHECK(d.action == CensusAction::kIdleRecord);
        CHECK_EQ(d.weight_ns, 10 * kMs);
    }
    CHECK_EQ(s.signals, 0);
    CHECK_EQ(s.walks, 0);
    CHECK_EQ(s.probes, 0);
}

TEST(census_first_sample_of_a_thread_that_registered_itself_and_blocked) {
    Sim s;
    s.first = true;
    CensusDecision d = s.period(0);
    CHECK(d.action == CensusAction::kWalk);  // its stack is unknown: read it once
    CHECK(d.idle);
    CHECK_EQ(d.weight_ns, 10 * kMs);
    d = s.period(0);
    CHECK(d.action == CensusAction::kIdleRecord);
}

TEST(census_busy_thread_is_left_to_its_timer) {
    Sim s;
    for (int i = 0; i < 50; ++i) {
        const CensusDecision d = s.period(10 * kMs);
        CHECK(d.action == CensusAction::kNothing);
    }
    CHECK_EQ(s.signals, 0);
    CHECK_EQ(s.probes, 0);
    CHECK_EQ(s.total(), s.now);
}

TEST(census_thread_that_stops_running_is_walked_where_it_blocked_once) {
    Sim s;
    for (int i = 0; i < 5; ++i) s.period(10 * kMs);  // busy, its timer samples it
    s.period(9 * kMs);  // ran 9 ms then blocked: 1 ms carried, found blocked
    CHECK_EQ(s.walks, 1);
    CHECK_EQ(s.idle_signal_weight, 1 * kMs);
    for (int i = 0; i < 20; ++i) s.period(0);  // blocked: idle records, no more walks
    CHECK_EQ(s.walks, 1);
    CHECK_EQ(s.signals, 0);
    CHECK_EQ(s.idle_records, 20);
    CHECK_EQ(s.idle_record_weight, 200 * kMs);
}

TEST(census_thread_blocking_right_after_a_census_is_still_walked_for_its_stack) {
    Sim s;
    for (int i = 0; i < 3; ++i) s.period(10 * kMs);
    // ran 50 us into the period (under the run threshold), then blocked: its last stack is
    // from its CPU timer, i.e. where it ran, so it must be read once.
    CensusDecision d = s.period(50'000);
    CHECK(d.action == CensusAction::kWalk);
    CHECK(d.idle);
    d = s.period(0);
    CHECK(d.action == CensusAction::kIdleRecord);
}

TEST(census_off_cpu_time_of_a_runnable_thread_is_carried_then_given_on_cpu) {
    Sim s;
    s.period(10 * kMs);
    // preempted 3 ms of every 10: runnable at every census
    for (uint32_t i = 0; i < spprof::kCarryCensuses - 1; ++i) {
        const CensusDecision d = s.period(7 * kMs, true);
        CHECK(d.action == CensusAction::kNothing);
    }
    const CensusDecision d = s.period(7 * kMs, true);
    CHECK(d.action == CensusAction::kWalk);
    CHECK(!d.idle);
    CHECK(d.runnable);
    CHECK_EQ(d.weight_ns, 3 * kMs * spprof::kCarryCensuses);
}

TEST(census_carry_goes_to_the_blocking_stack_when_found_blocked) {
    Sim s;
    s.period(10 * kMs);
    s.period(5 * kMs, true);  // half blocked, but running at the census: carry 5 ms
    CHECK_EQ(s.signals, 0);
    const CensusDecision d = s.period(5 * kMs, false);  // blocked at this census
    CHECK(d.action == CensusAction::kWalk);
    CHECK(d.idle);
    CHECK_EQ(d.weight_ns, 10 * kMs);
}

TEST(census_accounts_for_every_nanosecond_of_a_mixed_thread) {
    Sim s;
    s.period(10 * kMs);
    const uint64_t runs[] = {10, 0, 0, 3, 7, 10, 2, 0, 9, 10, 1, 0, 0, 0, 4};
    for (int round = 0; round < 20; ++round) {
        int k = 0;
        for (uint64_t r : runs) s.period(r * kMs, (k++ + round) % 3 == 0);
    }
    s.period(0);  // blocked at the end: whatever is carried is placed
    s.period(0);
    CHECK_EQ(s.total(), s.now);
}

TEST(census_thread_without_cpu_timer_is_signalled_whenever_it_ran) {
    Sim s;
    s.timer = false;
    s.slot.seen = true;
    s.slot.stack_current = true;
    CensusDecision d = s.period(4 * kMs);
    CHECK(d.action == CensusAction::kSignal);
    CHECK(!d.idle);
    CHECK_EQ(d.weight_ns, 10 * kMs);
    d = s.period(0);
    CHECK(d.action == CensusAction::kIdleRecord);
    CHECK_EQ(d.weight_ns, 10 * kMs);
    CHECK_EQ(s.total(), s.now);
}

TEST(census_capture_cost_does_not_count_as_running) {
    Sim s;
    s.first = true;
    s.period(0);  // signalled for its first stack
    // the capture itself cost 300 us of the thread's CPU (a slow build), after the census
    s.cpu += 300'000;
    s.cpu_at_capture = s.cpu;
    const CensusDecision d = s.period(0);
    CHECK(d.action == CensusAction::kIdleRecord);
}

TEST(census_thread_moving_between_blocking_calls_is_walked_at_each_move) {
    // sleep in f1, a few microseconds of Python, sleep in f2, ...: every census where its CPU
    // clock moved at all (far under the run threshold) reads its stack again; one where it did
    // not reuses it. Nothing is ever signalled.
    Sim s;
    s.slot.seen = true;
    s.slot.stack_current = true;
    for (int i = 0; i < 30; ++i) {
        const CensusDecision d = s.period(i % 3 == 0 ? 5'000 : 0);
        CHECK(d.action == (i % 3 == 0 ? CensusAction::kWalk : CensusAction::kIdleRecord));
        if (d.action == CensusAction::kWalk) CHECK(d.idle);
        CHECK_EQ(d.weight_ns, 10 * kMs);
    }
    CHECK_EQ(s.walks, 10);
    CHECK_EQ(s.signals, 0);
    CHECK_EQ(s.idle_signal_weight + s.idle_record_weight, s.now);  // every period, once
}

TEST(census_walk_that_cannot_be_trusted_keeps_its_time_for_the_next_one) {
    Sim s;
    s.slot.seen = true;
    s.slot.stack_current = true;
    s.lose_walks = true;
    s.period(5'000);  // moved: walked, but the walk is lost
    s.period(0);      // not moved, yet its stack is not known: walked again, lost again
    CHECK_EQ(s.walks, 0);
    s.lose_walks = false;
    const CensusDecision d = s.period(0);
    CHECK(d.action == CensusAction::kWalk);
    CHECK_EQ(d.weight_ns, 30 * kMs);  // all three periods, on the stack finally read
    CHECK_EQ(s.idle_record_weight, 0u);
}
