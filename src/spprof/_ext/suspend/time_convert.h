// suspend/time_convert.h: exact conversion between nanoseconds and Mach absolute-time ticks.
//
// mach_absolute_time() counts ticks of a timebase numer/denom (1/1 on Intel Macs, 125/3 on
// Apple silicon: one tick is 41.67 ns). The Mach sampler schedules its deadlines in ticks
// (mach_wait_until) and reports in nanoseconds. The conversion is split into quotient and
// remainder so that it is exact (floor) and never overflows for any uptime a machine can
// reach; a result that would not fit saturates at UINT64_MAX instead of wrapping.
//
// Portable and Python-free: the Linux build compiles and tests it with made-up timebases.
// All functions are pure, SIGNAL-SAFE and NO-HEAP; any thread may call them.
#pragma once

#include <cstdint>
#include <limits>

namespace spprof {

struct Timebase {
    uint32_t numer = 1;
    uint32_t denom = 1;
    // A timebase with a zero term would divide by zero: treat it as 1/1.
    bool valid() const { return numer != 0 && denom != 0; }
};

namespace detail {
// floor(value * mul / div) without intermediate overflow; saturates at UINT64_MAX.
inline uint64_t scale_floor(uint64_t value, uint32_t mul, uint32_t div) {
    const uint64_t q = value / div;
    const uint64_t r = value % div;  // r < div, so r * mul < 2^64
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
    if (mul != 0 && q > kMax / mul) return kMax;
    const uint64_t hi = q * mul;
    const uint64_t lo = (r * mul) / div;
    return hi > kMax - lo ? kMax : hi + lo;
}
}  // namespace detail

// Ticks -> nanoseconds.
inline uint64_t mach_to_ns(uint64_t ticks, Timebase tb) {
    if (!tb.valid()) return ticks;
    return detail::scale_floor(ticks, tb.numer, tb.denom);
}

// Nanoseconds -> ticks (floor). For deadlines this may be one tick early, which the deadline
// loop absorbs: it weights every sample by measured elapsed time, never by the nominal interval.
inline uint64_t ns_to_mach(uint64_t ns, Timebase tb) {
    if (!tb.valid()) return ns;
    return detail::scale_floor(ns, tb.denom, tb.numer);
}

// Time a Mach sample stands for: the elapsed time since the same thread's previous sample
// (the sleep oversleeps and ticks get skipped, so the nominal interval would be wrong), or the
// nominal interval for a thread's first sample or a clock that went backwards.
inline uint64_t sample_weight_ns(uint64_t now_ns, uint64_t previous_ns, uint64_t interval_ns) {
    if (previous_ns == 0 || now_ns <= previous_ns) return interval_ns;
    return now_ns - previous_ns;
}

}  // namespace spprof
