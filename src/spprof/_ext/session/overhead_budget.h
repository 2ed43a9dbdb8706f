// overhead_budget.h: the overhead budget: from spprof's measured cost to the next sampling interval.
//
// With max_overhead_pct > 0 the drain closes a window about every 500 ms and compares what
// spprof cost the program in it (time inside captures, signal deliveries at their calibrated
// cost, the drain's GIL time) with the process's CPU time (or the elapsed time if the program
// mostly waited). Over budget: the interval widens in proportion (plus a margin); well under:
// it narrows back towards the requested one. Never below the requested interval, never past
// 100 times it (or 1 s). This class is the arithmetic only (PURE: no clock, no platform call,
// unit-tested in tests/native/test_overhead_budget.cpp); the session reads the measurements
// and applies the interval it returns. Owned by the session; used by one thread at a time
// (start(), then the drain thread).
#pragma once

#include <cstdint>

namespace spprof {

// The overhead budget's view of the last window (stats()).
struct BudgetState {
    uint64_t signal_cost_ns = 0;       // calibrated cost of one signal delivery
    uint64_t effective_interval_ns = 0;
    uint64_t interval_changes = 0;
    double last_overhead_pct = 0;      // measured over the last window
};

// Cumulative measurements since the session started, read at the end of a window.
struct OverheadReading {
    uint64_t now_ns = 0;          // monotonic clock
    uint64_t capture_ns = 0;      // time spent inside captures
    uint64_t signals = 0;         // sampling signals delivered
    uint64_t drain_ns = 0;        // time the drain held the GIL
    uint64_t process_cpu_ns = 0;  // the process's CPU time
};

class OverheadBudget {
public:
    static constexpr uint64_t kWindowNs = 500'000'000;  // long enough to average, short enough to react

    // The interval the session was asked for; the effective interval starts there.
    void reset(uint64_t requested_interval_ns);
    // The budget is on: `max_pct` > 0, one signal delivery costs `signal_cost_ns`; the first
    // window starts at `now_ns` with the process at `process_cpu_ns` (the capture, signal and
    // drain counters were just reset to 0).
    void begin(double max_pct, uint64_t signal_cost_ns, uint64_t now_ns, uint64_t process_cpu_ns);
    // True when the current window has lasted kWindowNs at `now_ns`.
    bool window_over(uint64_t now_ns) const { return now_ns - window_.now_ns >= kWindowNs; }
    // Closes the window at `r` (window_over() held) and opens the next. Returns the interval
    // to use from now on: effective_interval_ns() when nothing changes.
    uint64_t close_window(const OverheadReading& r);
    // The session set the interval close_window() returned.
    void applied(uint64_t interval_ns);

    uint64_t effective_interval_ns() const { return state_.effective_interval_ns; }
    const BudgetState& state() const { return state_; }

private:
    uint64_t requested_ns_ = 0;
    double max_pct_ = 0;
    OverheadReading window_;  // the readings at the start of the current window
    BudgetState state_;
};

}  // namespace spprof
