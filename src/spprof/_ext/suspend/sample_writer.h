// suspend/sample_writer.h: turns one sampled thread into a ring record.
//
// Record layout (sample_record.h): RawSampleHeader, then header.depth RawFrame leaf first,
// then header.native_depth uint64_t return addresses leaf first. The Mach sampler calls this
// after the thread was resumed, so it may take its time, but it still does not allocate: the
// ring's writer side never blocks, and a record that does not fit is refused and counted as
// dropped by the caller.
//
// Portable and Python-free; tested on Linux against the real RingBuffer
// (tests/native/test_suspend_writer.cpp). Sampler thread only (the ring's single writer).
#pragma once

#include <cstdint>

#include "../ringbuffer.h"
#include "../sample_record.h"

namespace spprof {

// Bytes one record takes in the ring payload.
inline size_t sample_record_bytes(uint32_t depth, uint32_t native_depth) {
    return sizeof(RawSampleHeader) + depth * sizeof(RawFrame) + native_depth * sizeof(uint64_t);
}

// Write header + frames + native PCs; false when the ring refused the record. depth and
// native_depth in `header` must not exceed kMaxPythonFrames / kMaxNativeFrames.
bool write_sample_record(RingBuffer& ring, const RawSampleHeader& header, const RawFrame* frames,
                         const uint64_t* native_pcs);

// Time a sample stands for: the elapsed time since the same thread's previous sample (the
// sleep oversleeps and ticks get skipped, so the nominal interval would be wrong), or the
// nominal interval for a thread's first sample or a clock that went backwards.
inline uint64_t sample_weight_ns(uint64_t now_ns, uint64_t previous_ns, uint64_t interval_ns) {
    if (previous_ns == 0 || now_ns <= previous_ns) return interval_ns;
    return now_ns - previous_ns;
}

}  // namespace spprof
