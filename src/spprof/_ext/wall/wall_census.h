// wall_census.h: what wall mode's sampler does with one thread at one census, as a pure
// function of clock readings (no OS, no Python), so tests drive it with made-up clocks.
//
// Wall time splits into CPU time and off-CPU time. A thread with a per-thread CPU timer
// samples its own CPU time (the timer's signal, as in CPU mode); the census, a wake-up every
// max(interval, 10 ms), accounts for the rest:
// - The thread's CPU clock did not move since the last census: one idle record for the
//   elapsed time, holding the last stack, provided that stack is where it blocked.
// - It moved, however little (a thread going from one blocking call to the next runs for
//   microseconds), or no stack is known: the sampler walks the thread's stack from outside
//   (kWalk, flagged idle). A walk never interrupts the thread: a signal would make the
//   blocking call it sits in fail with EINTR.
// - It ran part of the period: the off-CPU part is carried. Once a sample's worth is carried,
//   a thread now blocked is walked (flagged idle, weight = carry); a thread now runnable keeps
//   carrying (its stack now is not where it waited), for at most kCarryCensuses censuses, then
//   the carry goes to its current stack flagged runnable (it waited for a CPU, preempted on
//   that line, most of the time).
// - Its clock did not move at all, but it ran at the last visit (or was preempted then): it
//   may have waited for a CPU the whole period (a loaded machine, a CPU quota), so the state
//   is read once. Runnable: the record, on the stack it was preempted on, is flagged runnable,
//   not idle (a hash without the GIL beside three spinning processes per core had 35-45 %
//   of its wall time flagged idle on its line). A thread that stays blocked is not asked again.
// - It ran since a visit that found it blocked on its known stack (a wait it woke from in this
//   period) and runs now: the carry, that wait's end, is an idle record on the wait's stack
//   (wait_end; the drain gives it the stack of the thread's latest idle record), not carried to
//   wherever it runs (its CPU timer's stack after the wait: up to a long wait's visit gap,
//   80 ms, of a wait showed there). Found blocked again instead, it goes where it blocks now.
// A walk that cannot be trusted (the thread ran during it) gives its weight back to the carry
// (census_walk_lost): the next census tries again, so no time is lost.
// A thread without a CPU timer (timer refused) is handled as before CPU timers took part: a
// signal weighted by the elapsed time whenever it ran (its CPU time has no other sampler).
// CensusPace: while a census finds nothing to account for (every thread on its CPU the whole
// period and left to its CPU timer, none with a sample's worth carried), the next one comes
// twice as late, up to kQuietCensusMaxNs; the first census with anything to do brings the
// period back. A CPU-bound program then pays 20 wake-ups a second instead of 100. No time is
// lost: weights are elapsed times, and a thread that blocked meanwhile is walked at the next
// census.
// Long waits: a thread the census found blocked on its known stack kIdleStreakPerStep times
// in a row is visited every 2nd census, then every 4th, at most every 2^kIdleGapMaxShift-th
// (census_pass_over, census_visited): its CPU clock is not read in between, and the record
// of the next visit stands for every census it was passed over in (its weight is the elapsed
// time, its count those censuses). A clock read is a system call: with 5,000 threads
// waiting, reading each one every 10 ms kept the census thread on a CPU half the time. What
// it costs: the end of such a wait is placed to within that gap (80 ms at a 10 ms census)
// instead of one census. A thread without a CPU timer is visited at every census (the
// census is what samples its CPU).
// Ends of the span: registration hands a thread's span to the census from its first moment
// (census_adopt: a first look measures from there), and after each visit the census hands
// the span from then on back to the ctx (ThreadCtx::census_tail_from_ns_, with the CPU clock
// and the carry): a thread that ends writes it itself, whether it was passed over in a long
// wait or ended a few ms after a visit with time carried, so no thread's last stretch off CPU
// is lost.
//
// Sampler thread only. Clocks in nanoseconds.
#pragma once

#include <cstdint>

namespace spprof {

struct CensusSlot {
    uint64_t generation = 0;   // the ThreadCtx generation this slot describes (slots are reused)
    uint64_t last_cpu_ns = 0;
    uint64_t last_ns = 0;
    uint64_t carry_ns = 0;     // off-CPU time not yet in any sample
    uint32_t carried = 0;      // censuses the carry waited while the thread was runnable
    bool seen = false;
    bool stack_current = false;  // its last captured stack is where it is blocked now
    uint32_t idle_streak = 0;    // visits in a row that found it blocked on its known stack
    uint32_t passed_over = 0;    // censuses since its last visit that did not visit it
    uint64_t next_visit_ns = 0;  // visited at censuses from then on (0: every census)
    bool on_cpu_last = false;    // its last visit found it had run, or preempted: ask its state
    bool published = false;      // its last visit handed the span from then on to the ctx
    bool carry_at_wait = false;  // the carry began as it woke from a wait on its known stack
};

struct CensusInput {
    uint64_t now_ns = 0;
    uint64_t cpu_ns = 0;             // the thread's CPU clock now
    uint64_t cpu_at_capture_ns = 0;  // its CPU clock at the end of its last census capture
    bool first = false;              // registered while running: no stack recorded yet
    bool cpu_timer = false;          // its CPU time is sampled by its own timer
};

struct CensusParams {
    uint64_t sample_interval_ns = 0;  // what one sample stands for
    uint64_t census_ns = 0;           // census period (weight of a first, unseen period)
    uint64_t run_threshold_ns = 0;    // CPU progress that counts as having run
};

// kWalk: read the thread's stack from outside; kSignal: ask the thread itself (no CPU timer).
enum class CensusAction { kNothing, kIdleRecord, kWalk, kSignal };

struct CensusDecision {
    CensusAction action = CensusAction::kNothing;
    uint64_t weight_ns = 0;
    bool idle = false;      // kWalk/kSignal: flag the sample idle (blocked), not on-CPU
    bool runnable = false;  // kWalk: the thread waited for a CPU on this stack
    bool on_cpu_throughout = false;  // it ran at least 98 % of the period (or this is its first look)
    // The weight is the end of the wait it was last found blocked in (it moved since):
    // kIdleRecord, on that wait's stack; a kWalk that is lost leaves it to the carry as such.
    bool wait_end = false;
};

constexpr uint32_t kCarryCensuses = 4;

// `runnable()` (called at most once, only when needed): true when the thread is running or
// waiting for a CPU right now, false when it is blocked.
template <class Runnable>
CensusDecision census_step(CensusSlot& s, const CensusInput& in, const CensusParams& p,
                           Runnable&& runnable) {
    const bool first_look = !s.seen;
    const uint64_t elapsed = first_look ? p.census_ns : in.now_ns - s.last_ns;
    const uint64_t period_cpu = !first_look && in.cpu_ns > s.last_cpu_ns ? in.cpu_ns - s.last_cpu_ns : 0;
    // Ran? Measured from the later of our last reading and the end of its last census
    // capture: the CPU a capture costs is not the thread running.
    const uint64_t baseline = s.last_cpu_ns > in.cpu_at_capture_ns ? s.last_cpu_ns : in.cpu_at_capture_ns;
    const bool ran = in.cpu_ns > baseline + p.run_threshold_ns;
    const bool moved = !first_look && in.cpu_ns > baseline;  // may have left its blocking call
    if (first_look) s.stack_current = !in.first;
    s.seen = true;
    s.last_ns = in.now_ns;
    s.last_cpu_ns = in.cpu_ns;
    CensusDecision d;

    if (!in.cpu_timer) {
        if (in.first || ran) {
            s.stack_current = true;
            d.action = CensusAction::kSignal;
            d.weight_ns = elapsed;
            d.idle = !ran;
        } else {
            d.action = CensusAction::kIdleRecord;
            d.weight_ns = elapsed;
        }
        return d;
    }

    if (!ran) {
        // Asked only after a visit that found it on a CPU, its clock not moved at all: a
        // thread in a wait is never asked, and one that woke briefly (a loop of short naps,
        // found runnable as it wakes) blocked for most of the period.
        const bool preempted = s.on_cpu_last && !moved && runnable();
        // Moved since a visit that found it blocked (or carrying a wait's end): if the walk is
        // lost (it runs now), its weight is still that wait's end.
        const bool woke = (moved && s.stack_current && !s.on_cpu_last) || s.carry_at_wait;
        s.on_cpu_last = preempted;
        d.weight_ns = elapsed + s.carry_ns;
        s.carry_ns = 0;
        s.carried = 0;
        s.carry_at_wait = false;
        d.runnable = preempted;
        if (s.stack_current && !moved) {
            d.action = CensusAction::kIdleRecord;  // flagged runnable when preempted
        } else {
            s.stack_current = true;
            d.action = CensusAction::kWalk;
            d.idle = !preempted;
            d.wait_end = woke;
        }
        return d;
    }
    // Found blocked on its known stack last time, and it ran since: it woke from that wait
    // in this period, so the period's time off CPU is, first of all, that wait's end.
    const bool woke = !first_look && s.stack_current && !s.on_cpu_last;
    s.on_cpu_last = true;
    s.stack_current = false;
    // First look at a running thread: no earlier reading to measure its off-CPU time from.
    const uint64_t off_cpu = !first_look && elapsed > period_cpu ? elapsed - period_cpu : 0;
    if (woke && off_cpu > 0 && s.carry_ns == 0) s.carry_at_wait = true;
    s.carry_ns += off_cpu;
    d.on_cpu_throughout = off_cpu * 50 <= elapsed;
    if (s.carry_ns < p.sample_interval_ns) return d;
    if (!runnable()) {
        d.action = CensusAction::kWalk;
        d.weight_ns = s.carry_ns;
        d.idle = true;
        d.wait_end = s.carry_at_wait;  // for a lost walk only: a walk puts it where it blocks now
        s.carry_ns = 0;
        s.carried = 0;
        s.carry_at_wait = false;
        s.stack_current = true;
        return d;
    }
    if (s.carry_at_wait) {
        // Running now: the wait's end, on the wait's stack (a walk now would find where it
        // runs, and its CPU timer's last stack is where it ran after the wait).
        d.action = CensusAction::kIdleRecord;
        d.wait_end = true;
        d.weight_ns = s.carry_ns;
        s.carry_ns = 0;
        s.carried = 0;
        s.carry_at_wait = false;
        return d;
    }
    if (++s.carried < kCarryCensuses) return d;
    d.action = CensusAction::kWalk;
    d.weight_ns = s.carry_ns;
    d.runnable = true;
    s.carry_ns = 0;
    s.carried = 0;
    return d;
}

// Did this census leave the thread entirely to its CPU timer: it was on a CPU for (nearly)
// the whole period and has less than a sample's worth carried? (After census_step.) Only
// then may the next census come later: time a thread spends blocked between two censuses
// while it runs at both can only be placed on its running line (flagged runnable), so a
// stretched period is kept for threads that show no off-CPU time at all.
inline bool census_quiet(const CensusSlot& s, const CensusDecision& d, const CensusParams& p) {
    return d.action == CensusAction::kNothing && d.on_cpu_throughout && s.carry_ns < p.sample_interval_ns;
}

// Half the drain's pass period: a stretch of up to 50 ms keeps the resolution of blocked time
// that falls between censuses (above) at a few tens of ms, and saves 4 of 5 wake-ups.
constexpr uint64_t kQuietCensusMaxNs = 50'000'000;

// The census period, in base periods (census_ns): doubled after each quiet census up to the
// longest stretch under kQuietCensusMaxNs, back to 1 after any other. `stride` (the overhead
// budget's widened interval, in base periods) is a floor.
class CensusPace {
public:
    explicit CensusPace(uint64_t census_ns)
        : max_periods_(census_ns >= kQuietCensusMaxNs ? 1u : static_cast<uint32_t>(kQuietCensusMaxNs / census_ns)) {}

    uint32_t after_census(bool quiet, uint32_t stride) {
        periods_ = quiet ? (periods_ * 2 < max_periods_ ? periods_ * 2 : max_periods_) : 1u;
        return periods_ > stride ? periods_ : (stride > 0 ? stride : 1u);
    }
    uint32_t max_periods() const { return max_periods_; }

private:
    uint32_t max_periods_;
    uint32_t periods_ = 1;
};

// The census period: the sampling interval, at least 10 ms.
constexpr uint64_t kMinCensusNs = 10'000'000;
inline uint64_t census_period_ns(uint64_t interval_ns) {
    return interval_ns > kMinCensusNs ? interval_ns : kMinCensusNs;
}

constexpr uint32_t kIdleStreakPerStep = 4;  // idle visits in a row before the gap doubles
constexpr uint32_t kIdleGapMaxShift = 3;    // visited at least every 8th census

// Before the thread's clock is read: true when this census passes it over (a long wait,
// not due yet), counted in the slot.
inline bool census_pass_over(CensusSlot& s, uint64_t now_ns) {
    if (!s.seen || s.next_visit_ns == 0 || now_ns >= s.next_visit_ns) return false;
    ++s.passed_over;
    return true;
}

// After census_step, at a visit: the censuses the decision's record stands for (this one and
// those that passed the thread over since the last visit), and when the next visit is due.
// census_ns: the base census period. Half a period early, so that the census landing on the
// gap's end, give or take its jitter, visits.
inline uint32_t census_visited(CensusSlot& s, const CensusDecision& d, bool cpu_timer, uint64_t now_ns,
                               uint64_t census_ns) {
    const uint32_t censuses = s.passed_over + 1;
    s.passed_over = 0;
    // A wait's end (wait_end) is no visit that found it blocked: it runs.
    s.idle_streak =
        d.action == CensusAction::kIdleRecord && !d.runnable && !d.wait_end && cpu_timer ? s.idle_streak + 1 : 0;
    uint32_t shift = s.idle_streak / kIdleStreakPerStep;
    if (shift > kIdleGapMaxShift) shift = kIdleGapMaxShift;
    s.next_visit_ns = shift == 0 ? 0 : now_ns + (census_ns << shift) - census_ns / 2;
    return censuses;
}

// Before census_step, at a visit that took the thread's span from the ctx (its start
// `from_ns`, the CPU clock then `from_cpu_ns`): measure from there. A first look measures from
// the thread's registration instead of guessing one period. After a window's end wrote the
// span up to `from_ns` (a long wait), the visit's record stands for the censuses since then
// only.
inline void census_adopt(CensusSlot& s, uint64_t from_ns, uint64_t from_cpu_ns, bool first, uint64_t now_ns,
                         uint64_t census_ns) {
    if (!s.seen) {
        s.seen = true;
        s.stack_current = !first;
    } else if (from_ns == s.last_ns) {
        return;  // what its own last visit handed back
    } else {
        const uint64_t since = now_ns > from_ns ? now_ns - from_ns : 0;
        const uint64_t censuses = census_ns > 0 ? (since + census_ns / 2) / census_ns : 0;
        s.passed_over = censuses > 1 ? static_cast<uint32_t>(censuses - 1) : 0;
    }
    s.last_ns = from_ns;
    s.last_cpu_ns = from_cpu_ns;
}

// The walk census_step asked for (decision d) could not be trusted: its time waits in the
// carry and the next census walks again.
inline void census_walk_lost(CensusSlot& s, const CensusDecision& d) {
    s.carry_ns += d.weight_ns;
    s.stack_current = false;
    if (d.wait_end) s.carry_at_wait = true;  // still the wait's end: placed there next time
}

// After a visit: does the span handed back to the ctx start in a wait on its known stack (it
// was found blocked there, or carries that wait's end)? ThreadCtx::census_at_wait_.
inline bool census_span_at_wait(const CensusSlot& s) {
    return (s.stack_current && !s.on_cpu_last) || s.carry_at_wait;
}

}  // namespace spprof
