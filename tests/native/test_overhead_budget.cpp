// test_overhead_budget.cpp: the overhead budget's arithmetic: windows, widening in proportion,
// narrowing back, and the bounds (never below the requested interval, never past 100x or 1 s).
#include <cstdint>

#include "harness.h"
#include "session/overhead_budget.h"

using spprof::OverheadBudget;
using spprof::OverheadReading;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kWindow = OverheadBudget::kWindowNs;

// A budget of `pct` at a requested interval of `interval`, started at t = 1 s with the process
// at 0 CPU; each signal costs 1 µs.
OverheadBudget budget(double pct, uint64_t interval = 1 * kMs) {
    OverheadBudget b;
    b.reset(interval);
    b.begin(pct, 1000, 1'000'000'000ull, 0);
    return b;
}

// A window of one second of wall time, the process busy `cpu` of it, spprof costing `cost`
// (all of it inside captures).
OverheadReading reading(uint64_t at, uint64_t cost, uint64_t cpu) {
    OverheadReading r;
    r.now_ns = at;
    r.capture_ns = cost;
    r.process_cpu_ns = cpu;
    return r;
}

}  // namespace

TEST(overhead_budget_starts_at_requested_interval) {
    OverheadBudget b = budget(1.0, 5 * kMs);
    CHECK_EQ(b.effective_interval_ns(), 5 * kMs);
    CHECK_EQ(b.state().signal_cost_ns, 1000u);
    CHECK_EQ(b.state().interval_changes, 0u);
}

TEST(overhead_budget_window_length) {
    OverheadBudget b = budget(1.0);
    CHECK(!b.window_over(1'000'000'000ull + kWindow - 1));
    CHECK(b.window_over(1'000'000'000ull + kWindow));
}

TEST(overhead_budget_widens_in_proportion_with_margin) {
    OverheadBudget b = budget(1.0);
    // 4 % over one second of CPU against a 1 % budget: 4x, plus 25 %.
    const uint64_t next = b.close_window(reading(2'000'000'000ull, 40 * kMs, 1'000'000'000ull));
    CHECK(b.state().last_overhead_pct > 3.99 && b.state().last_overhead_pct < 4.01);
    CHECK_EQ(next, 5 * kMs);
    CHECK_EQ(b.effective_interval_ns(), 1 * kMs);  // until applied
    b.applied(next);
    CHECK_EQ(b.effective_interval_ns(), 5 * kMs);
    CHECK_EQ(b.state().interval_changes, 1u);
}

TEST(overhead_budget_counts_signals_and_drain) {
    OverheadBudget b = budget(1.0);
    OverheadReading r = reading(2'000'000'000ull, 0, 1'000'000'000ull);
    r.signals = 5000;       // 5 ms at 1 µs each
    r.drain_ns = 5 * kMs;
    b.close_window(r);
    CHECK(b.state().last_overhead_pct > 0.99 && b.state().last_overhead_pct < 1.01);
}

TEST(overhead_budget_uses_elapsed_time_when_the_program_waits) {
    OverheadBudget b = budget(1.0);
    // 5 ms of cost while the process used 10 ms of CPU in a one-second window: 0.5 % of the
    // elapsed second, not 50 % of the CPU.
    const uint64_t next = b.close_window(reading(2'000'000'000ull, 5 * kMs, 10 * kMs));
    CHECK(b.state().last_overhead_pct > 0.49 && b.state().last_overhead_pct < 0.51);
    CHECK_EQ(next, 1 * kMs);
}

TEST(overhead_budget_narrows_back_but_not_below_requested) {
    OverheadBudget b = budget(3.0);
    b.applied(9 * kMs);
    // Well under (under a third of the budget): two thirds of the current interval.
    uint64_t next = b.close_window(reading(2'000'000'000ull, 1 * kMs, 1'000'000'000ull));
    CHECK_EQ(next, 6 * kMs);
    b.applied(next);
    next = b.close_window(reading(3'000'000'000ull, 2 * kMs, 2'000'000'000ull));
    CHECK_EQ(next, 4 * kMs);
    b.applied(next);
    next = b.close_window(reading(4'000'000'000ull, 3 * kMs, 3'000'000'000ull));
    CHECK_EQ(next, 2666666u);
    b.applied(next);
    next = b.close_window(reading(5'000'000'000ull, 4 * kMs, 4'000'000'000ull));
    CHECK_EQ(next, 1777777u);
    b.applied(next);
    next = b.close_window(reading(6'000'000'000ull, 5 * kMs, 5'000'000'000ull));
    CHECK_EQ(next, 1185184u);
    b.applied(next);
    next = b.close_window(reading(7'000'000'000ull, 6 * kMs, 6'000'000'000ull));
    CHECK_EQ(next, 1 * kMs);  // 0.79 ms would be 2/3, but never below the requested 1 ms
    b.applied(next);
    // At the requested interval and under budget: unchanged.
    next = b.close_window(reading(8'000'000'000ull, 7 * kMs, 7'000'000'000ull));
    CHECK_EQ(next, 1 * kMs);
}

TEST(overhead_budget_between_a_third_and_the_budget_holds) {
    OverheadBudget b = budget(3.0);
    b.applied(9 * kMs);
    const uint64_t next = b.close_window(reading(2'000'000'000ull, 20 * kMs, 1'000'000'000ull));  // 2 %
    CHECK_EQ(next, 9 * kMs);
}

TEST(overhead_budget_caps_at_100x_or_one_second) {
    OverheadBudget b = budget(0.01);  // 1 ms requested: at most 100 ms
    uint64_t next = b.close_window(reading(2'000'000'000ull, 500 * kMs, 1'000'000'000ull));
    CHECK_EQ(next, 100 * kMs);
    OverheadBudget c = budget(0.01, 50 * kMs);  // 100x would be 5 s: at most 1 s
    next = c.close_window(reading(2'000'000'000ull, 500 * kMs, 1'000'000'000ull));
    CHECK_EQ(next, 1'000'000'000ull);
}

TEST(overhead_budget_windows_are_deltas) {
    OverheadBudget b = budget(1.0);
    b.close_window(reading(2'000'000'000ull, 40 * kMs, 1'000'000'000ull));  // 4 %
    // The next window adds 5 ms of cost over another second of CPU: 0.5 %, not 4.5 %.
    b.close_window(reading(3'000'000'000ull, 45 * kMs, 2'000'000'000ull));
    CHECK(b.state().last_overhead_pct > 0.49 && b.state().last_overhead_pct < 0.51);
}
