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
    uint64_t wait_end_weight = 0;  // of idle_record_weight: records on the stack of the wait it woke from
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
            (d.runnable ? runnable_weight : idle_record_weight) += d.weight_ns;
            if (d.wait_end) wait_end_weight += d.weight_ns;
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

TEST(census_thread_preempted_for_whole_periods_is_runnable_not_idle) {
    // A loaded machine (or a CPU quota): the thread runs, then waits for a CPU through whole
    // censuses. Its clock does not move, as if it blocked: it used to get idle records.
    Sim s;
    for (int i = 0; i < 3; ++i) s.period(10 * kMs);
    CensusDecision d = s.period(0, true);
    CHECK(d.action == CensusAction::kWalk);  // where it was preempted: its timer's stack is older
    CHECK(d.runnable);
    CHECK(!d.idle);
    for (int i = 0; i < 12; ++i) {
        d = s.period(0, true);
        CHECK(d.action == CensusAction::kIdleRecord);
        CHECK(d.runnable);
        spprof::census_visited(s.slot, d, true, s.now, 10 * kMs);
        CHECK_EQ(s.slot.next_visit_ns, 0u);  // no long wait: visited at every census
    }
    s.period(10 * kMs);
    CHECK_EQ(s.runnable_weight, 130 * kMs);
    CHECK_EQ(s.idle_record_weight + s.idle_signal_weight, 0u);
    CHECK_EQ(s.total(), s.now);
}

TEST(census_thread_that_woke_briefly_is_idle_even_if_found_runnable) {
    // A loop of short naps: it ran at the last visit, then ran a few microseconds in this
    // period, under the run threshold, and the census finds it just woken. It blocked for
    // nearly all of the period: idle, and not asked.
    Sim s;
    for (int i = 0; i < 3; ++i) s.period(10 * kMs);
    const CensusDecision d = s.period(50'000, true);
    CHECK(d.action == CensusAction::kWalk);
    CHECK(d.idle);
    CHECK(!d.runnable);
    CHECK_EQ(s.probes, 0);
}

TEST(census_thread_that_blocks_is_asked_its_state_once) {
    Sim s;
    for (int i = 0; i < 3; ++i) s.period(10 * kMs);
    const CensusDecision d = s.period(0);  // ran at the last visit: asked, found blocked
    CHECK(d.action == CensusAction::kWalk);
    CHECK(d.idle);
    CHECK(!d.runnable);
    for (int i = 0; i < 20; ++i) CHECK(s.period(0).action == CensusAction::kIdleRecord);
    CHECK_EQ(s.probes, 1);
    CHECK_EQ(s.idle_records, 20);
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

// A thread found blocked on its known stack wakes and runs 3 ms of the next period, and runs
// at the census: the 7 ms off CPU are that wait's end, on the wait's stack (wait_end), not
// carried to wherever it runs (its CPU timer's stack after the wait). No idle streak from it.
TEST(census_end_of_a_wait_goes_to_the_wait_when_the_thread_runs_now) {
    Sim s;
    s.slot.seen = true;
    s.slot.stack_current = true;
    for (int i = 0; i < 3; ++i) s.period(0);
    CHECK(spprof::census_span_at_wait(s.slot));  // a thread that ends now: at the wait
    const CensusDecision d = s.period(3 * kMs, true);
    CHECK(d.action == CensusAction::kIdleRecord);
    CHECK(d.wait_end);
    CHECK(!d.runnable);
    CHECK_EQ(d.weight_ns, 7 * kMs);
    spprof::census_visited(s.slot, d, true, s.now, 10 * kMs);
    CHECK_EQ(s.slot.idle_streak, 0u);
    CHECK(!spprof::census_span_at_wait(s.slot));  // it runs: its span is on its last stack
    CHECK_EQ(s.probes, 1);
    CHECK_EQ(s.total(), s.now);
}

// Found blocked again at the census (it woke and blocked elsewhere): walked where it is now.
TEST(census_end_of_a_wait_goes_where_it_blocks_now_when_found_blocked) {
    Sim s;
    s.slot.seen = true;
    s.slot.stack_current = true;
    s.period(0);
    const CensusDecision d = s.period(3 * kMs, false);
    CHECK(d.action == CensusAction::kWalk);
    CHECK(d.idle);
    CHECK_EQ(d.weight_ns, 7 * kMs);
    CHECK_EQ(s.wait_end_weight, 0u);
}

// Less than a sample's worth off CPU as it woke: carried, still the wait's end; a thread that
// ends then writes it on the wait's stack (census_span_at_wait), and a census that finds it
// running later places it there with what it was preempted since.
TEST(census_small_end_of_a_wait_is_carried_as_the_wait_s_end) {
    Sim s;
    s.slot.seen = true;
    s.slot.stack_current = true;
    s.period(0);
    CHECK(s.period(9'500'000, true).action == CensusAction::kNothing);  // 0.5 ms off CPU
    CHECK(spprof::census_span_at_wait(s.slot));
    const CensusDecision d = s.period(9 * kMs, true);  // 1 ms more: a sample's worth
    CHECK(d.action == CensusAction::kIdleRecord);
    CHECK(d.wait_end);
    CHECK_EQ(d.weight_ns, 1'500'000u);
    CHECK(!spprof::census_span_at_wait(s.slot));
    // A thread that was running at its last visit carries its preemption the usual way.
    CHECK(s.period(8 * kMs, true).action == CensusAction::kNothing);
    CHECK(!spprof::census_span_at_wait(s.slot));
    CHECK_EQ(s.total() + s.slot.carry_ns, s.now);
}

// It woke and ran a few microseconds (moved, not ran), and the walk is lost (it runs during
// it): the walk's weight is still the wait's end, placed there at the next census.
TEST(census_lost_walk_of_a_thread_that_woke_keeps_the_wait_s_end) {
    Sim s;
    s.slot.seen = true;
    s.slot.stack_current = true;
    s.period(0);
    s.lose_walks = true;
    CensusDecision d = s.period(50'000, true);
    CHECK(d.action == CensusAction::kWalk);
    CHECK(d.wait_end);
    CHECK(spprof::census_span_at_wait(s.slot));  // a thread that ends now: at the wait
    s.lose_walks = false;
    d = s.period(10 * kMs, true);
    CHECK(d.action == CensusAction::kIdleRecord);
    CHECK(d.wait_end);
    CHECK_EQ(d.weight_ns, 10 * kMs);  // the lost walk's 10 ms; this period it ran throughout
    CHECK_EQ(s.total(), s.now + 50'000);  // the 50 us it ran are in the idle period too, as ever
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

TEST(census_pace_stretches_while_quiet_and_snaps_back) {
    spprof::CensusPace pace(10 * kMs);
    CHECK_EQ(pace.max_periods(), 5u);
    CHECK_EQ(pace.after_census(true, 1), 2u);
    CHECK_EQ(pace.after_census(true, 1), 4u);
    CHECK_EQ(pace.after_census(true, 1), 5u);  // 50 ms, never past it
    CHECK_EQ(pace.after_census(true, 1), 5u);
    CHECK_EQ(pace.after_census(false, 1), 1u);  // anything to account for: back at once
    CHECK_EQ(pace.after_census(true, 3), 3u);   // the budget's stride is a floor
    CHECK_EQ(pace.after_census(true, 3), 4u);
    CHECK_EQ(pace.after_census(false, 3), 3u);
    CHECK_EQ(pace.after_census(false, 0), 1u);
    spprof::CensusPace slow(50 * kMs);  // interval 50 ms or more: nothing to stretch
    CHECK_EQ(slow.after_census(true, 1), 1u);
    spprof::CensusPace odd(20 * kMs);
    CHECK_EQ(odd.after_census(true, 1), 2u);
    CHECK_EQ(odd.after_census(true, 1), 2u);  // 40 ms
}

// The census driven as the sampler drives it: the period just elapsed is base x periods.
struct PacedSim {
    Sim s;
    spprof::CensusPace pace{10 * kMs};
    const uint64_t base = 10 * kMs;
    uint32_t periods = 1;
    int censuses = 0;
    CensusDecision census(uint64_t run, bool runnable_at_census = false) {
        s.p.census_ns = base * periods;
        const CensusDecision d = s.period(run, runnable_at_census);
        ++censuses;
        periods = pace.after_census(spprof::census_quiet(s.slot, d, s.p), 1);
        return d;
    }
    uint64_t period_ns() const { return base * periods; }
};

// A busy thread under a stretched census, then it blocks: the stretch ends at the first census
// that sees it, the walk gets the whole off-CPU time, and every nanosecond is still counted.
TEST(census_stretched_period_loses_no_time_when_a_thread_blocks) {
    PacedSim ps;
    for (int i = 0; i < 20; ++i) ps.census(ps.period_ns());  // busy the whole time
    CHECK_EQ(ps.periods, 5u);
    CHECK_EQ(ps.s.total(), ps.s.now);
    const uint64_t before = ps.s.now;
    CensusDecision d = ps.census(2 * kMs);  // runs 2 ms of the next 50 ms, then blocks
    CHECK(d.action == CensusAction::kWalk);
    CHECK(d.idle);
    CHECK_EQ(d.weight_ns, 48 * kMs);
    CHECK_EQ(ps.periods, 1u);  // back to 10 ms at once
    CHECK_EQ(ps.s.now - before, 50 * kMs);
    d = ps.census(0);
    CHECK(d.action == CensusAction::kIdleRecord);
    CHECK_EQ(d.weight_ns, 10 * kMs);
    CHECK_EQ(ps.periods, 1u);  // a blocked thread keeps the census at its base period
    CHECK_EQ(ps.s.total(), ps.s.now);
}

// A thread that is off its CPU for part of a period (it waited for a CPU, or blocked briefly)
// keeps the census at its base period even with less than a sample's worth carried.
TEST(census_thread_off_cpu_for_part_of_the_period_is_not_quiet) {
    PacedSim ps;
    ps.s.p.sample_interval_ns = 10 * kMs;
    for (int i = 0; i < 5; ++i) ps.census(ps.period_ns());
    CHECK_EQ(ps.periods, 5u);
    ps.census(ps.period_ns() - 5 * kMs, /*runnable_at_census=*/true);  // 5 of 50 ms off CPU
    CHECK_EQ(ps.periods, 1u);
    ps.census(9'900'000, true);  // 0.1 of 10 ms off CPU: 1 %, quiet again (carry 5.1 ms)
    CHECK_EQ(ps.periods, 2u);
    ps.census(20 * kMs - 5 * kMs, true);  // carry now 10.1 ms: a sample's worth, not quiet
    CHECK_EQ(ps.periods, 1u);
}

// A thread with a sample's worth carried is not quiet, however it ran this period.
TEST(census_carry_due_is_not_quiet) {
    Sim s;
    s.period(10 * kMs);
    const CensusDecision d = s.period(4 * kMs, /*runnable_at_census=*/true);  // 6 ms carried
    CHECK(d.action == CensusAction::kNothing);
    CHECK(!spprof::census_quiet(s.slot, d, s.p));
    Sim q;
    q.p.sample_interval_ns = 10 * kMs;
    q.period(10 * kMs);
    const CensusDecision e = q.period(9'900'000, true);  // 0.1 ms carried, under a sample's worth
    CHECK(e.action == CensusAction::kNothing);
    CHECK(spprof::census_quiet(q.slot, e, q.p));
}

// The sampler's loop over one thread with long-wait visits (census_pass_over before its clock
// is read, census_visited after the decision), as wall_sampler.cpp drives them: clock reads,
// records written and the censuses they stand for.
struct VisitSim {
    Sim s;
    int clock_reads = 0, records = 0;
    uint64_t censuses = 0;  // the samples the records stand for
    // One census of `base` ms in which the thread runs `run`.
    void census(uint64_t run) {
        s.now += s.p.census_ns;
        s.cpu += run;
        if (s.timer) s.cpu_weight += run;
        if (spprof::census_pass_over(s.slot, s.now)) return;
        ++clock_reads;
        s.now -= s.p.census_ns;  // Sim::period adds it again
        s.cpu -= run;
        if (s.timer) s.cpu_weight -= run;
        const CensusDecision d = s.period(run);
        const uint32_t n = spprof::census_visited(s.slot, d, s.timer, s.now, s.p.census_ns);
        if (d.action == CensusAction::kIdleRecord || d.action == CensusAction::kWalk ||
            d.action == CensusAction::kSignal) {
            ++records;
            censuses += n;
        }
    }
};

// A thread blocked for 10 s: its clock is read about an eighth as often, every census is in
// a record's count, every nanosecond in a weight.
TEST(census_long_wait_is_visited_less_often_and_counts_every_census) {
    VisitSim v;
    v.s.slot.seen = true;
    v.s.slot.stack_current = true;
    for (int i = 0; i < 1000; ++i) v.census(0);
    CHECK(v.clock_reads < 1000 / 8 + 20);
    CHECK(v.clock_reads > 1000 / 8);
    // Every census up to the last visit is in a record (the rest waits for the next visit).
    CHECK(v.censuses + v.s.slot.passed_over == 1000);
    CHECK_EQ(v.s.total() + v.s.slot.passed_over * v.s.p.census_ns, v.s.now);
    CHECK_EQ(v.s.walks, 0);
}

// The first visit after the thread ran ends the long gaps at once: the census after it visits
// again, and the wait's end was placed within one gap (80 ms) of where it happened.
TEST(census_thread_that_runs_again_is_visited_every_census_from_then_on) {
    VisitSim v;
    v.s.slot.seen = true;
    v.s.slot.stack_current = true;
    for (int i = 0; i < 200; ++i) v.census(0);
    CHECK(v.s.slot.next_visit_ns > v.s.now);  // in a long gap
    int waited = 0;
    const int reads = v.clock_reads;
    while (v.clock_reads == reads) {  // it runs 2 ms of every census from now on
        v.census(2 * kMs);
        ++waited;
    }
    CHECK(waited <= 8);
    CHECK_EQ(v.s.slot.next_visit_ns, 0u);
    v.census(2 * kMs);
    CHECK_EQ(v.clock_reads, reads + 2);  // the very next census
    CHECK_EQ(v.s.total() + v.s.slot.carry_ns, v.s.now);
}

// A thread whose CPU time only the census samples (no CPU timer) is never passed over.
TEST(census_thread_without_cpu_timer_is_visited_every_census) {
    VisitSim v;
    v.s.timer = false;
    v.s.slot.seen = true;
    v.s.slot.stack_current = true;
    for (int i = 0; i < 100; ++i) v.census(0);
    CHECK_EQ(v.clock_reads, 100);
    CHECK_EQ(v.censuses, 100u);
}

// A thread registered 3 ms before the census's first look: that look measures 3 ms from its
// registration (the span the session handed out), not one census period.
TEST(census_first_look_measures_from_the_registration) {
    Sim s;
    s.now = 100 * kMs;
    s.cpu = 5 * kMs;
    const uint64_t registered = s.now + 7 * kMs;  // Sim::period advances 10 ms: 3 ms before it
    spprof::census_adopt(s.slot, registered, s.cpu, false, s.now + s.p.census_ns, s.p.census_ns);
    const CensusDecision d = s.period(0);
    CHECK(d.action == CensusAction::kIdleRecord);  // its registration recorded where it blocked
    CHECK_EQ(d.weight_ns, 3 * kMs);
    CHECK_EQ(s.total(), 3 * kMs);
}

// The census's own hand-back changes nothing; a window's end that wrote a long wait up to
// 30 ms before this visit leaves the visit 30 ms and three censuses to stand for.
TEST(census_visit_after_a_window_end_stands_for_the_censuses_since_then) {
    VisitSim v;
    v.s.slot.seen = true;
    v.s.slot.stack_current = true;
    for (int i = 0; i < 200; ++i) v.census(0);
    CHECK(v.s.slot.passed_over > 3);
    const uint32_t before = v.s.slot.passed_over;
    spprof::census_adopt(v.s.slot, v.s.slot.last_ns, v.s.cpu, false, v.s.now, v.s.p.census_ns);
    CHECK_EQ(v.s.slot.passed_over, before);
    const uint64_t settled = v.s.now - 30 * kMs;
    spprof::census_adopt(v.s.slot, settled, v.s.cpu, false, v.s.now, v.s.p.census_ns);
    CHECK_EQ(v.s.slot.passed_over, 2u);  // with the visit's own census: three
    CHECK_EQ(v.s.slot.last_ns, settled);
    v.s.now -= v.s.p.census_ns;  // the visit happens now
    const CensusDecision d = v.s.period(0);
    CHECK(d.action == CensusAction::kIdleRecord);
    CHECK_EQ(d.weight_ns, 30 * kMs);
    CHECK_EQ(spprof::census_visited(v.s.slot, d, true, v.s.now, v.s.p.census_ns), 3u);
}
