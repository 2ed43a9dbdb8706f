// overhead_budget.cpp: the overhead budget's arithmetic (see overhead_budget.h).
#include "overhead_budget.h"

namespace spprof {

void OverheadBudget::reset(uint64_t requested_interval_ns) {
    requested_ns_ = requested_interval_ns;
    state_.effective_interval_ns = requested_interval_ns;
}

void OverheadBudget::begin(double max_pct, uint64_t signal_cost_ns, uint64_t now_ns, uint64_t process_cpu_ns) {
    max_pct_ = max_pct;
    state_.signal_cost_ns = signal_cost_ns;
    window_ = OverheadReading{};
    window_.now_ns = now_ns;
    window_.process_cpu_ns = process_cpu_ns;
}

uint64_t OverheadBudget::close_window(const OverheadReading& r) {
    const double cost = static_cast<double>(r.capture_ns - window_.capture_ns) +
                        static_cast<double>(r.signals - window_.signals) * static_cast<double>(state_.signal_cost_ns) +
                        static_cast<double>(r.drain_ns - window_.drain_ns);
    const double elapsed = static_cast<double>(r.now_ns - window_.now_ns);
    const double used = static_cast<double>(r.process_cpu_ns - window_.process_cpu_ns);
    const double pct = 100.0 * cost / (used > elapsed ? used : elapsed);
    state_.last_overhead_pct = pct;
    window_ = r;

    const uint64_t current = state_.effective_interval_ns;
    uint64_t next = current;
    if (pct > max_pct_) {
        next = static_cast<uint64_t>(static_cast<double>(current) * (pct / max_pct_) * 1.25);
    } else if (pct < max_pct_ / 3 && current > requested_ns_) {
        next = current * 2 / 3;
    }
    // Never below the requested interval; never past 100 times it (or 1 s): a profile that
    // coarse says little, and the drain's own fixed cost is not reduced by widening further.
    const uint64_t widest = requested_ns_ * 100 < 1'000'000'000ull ? requested_ns_ * 100 : 1'000'000'000ull;
    if (next < requested_ns_) next = requested_ns_;
    if (next > widest) next = widest;
    return next;
}

void OverheadBudget::applied(uint64_t interval_ns) {
    state_.effective_interval_ns = interval_ns;
    ++state_.interval_changes;
}

}  // namespace spprof
