// record_writer.h: the one writer of sample records (sample_record.h) into a RingBuffer.
//
// Every producer of records goes through here: the Linux signal handler (signal_handler.cpp,
// which walks straight into the ring's space with RecordWriter), the wall census
// (wall_sampler.cpp) and session registration (write_foreign_record), and the Mach sampler
// (platform/darwin_mach.cpp, write_foreign_record after the thread was resumed).
//
// Record layout: RawSampleHeader, then header.depth RawFrame leaf first, then
// header.native_depth uint64_t return addresses leaf first. Depths above kMaxPythonFrames /
// kMaxNativeFrames are clamped, never written past.
//
// SIGNAL-SAFE, NO-HEAP: no allocation, no lock, no logging; a record that does not fit is
// refused (the caller counts the drop). Portable and Python-free: tests/native/test_record_writer.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ringbuffer.h"
#include "root_share.h"
#include "sample_record.h"

namespace spprof {

struct ThreadCtx;

// Bytes one record takes in the ring payload.
inline size_t sample_record_bytes(uint32_t depth, uint32_t native_depth) {
    return sizeof(RawSampleHeader) + depth * sizeof(RawFrame) + native_depth * sizeof(uint64_t);
}

// The largest record: the space RecordWriter::open() reserves.
constexpr size_t kMaxRecordBytes = sizeof(RawSampleHeader) + kMaxPythonFrames * sizeof(RawFrame) +
                                   kMaxNativeFrames * sizeof(uint64_t);

// Whether a writer that just wrote a record of `record_bytes` standing for `weight_ns` asks the
// drain to run now: when its ring would fill within kDrainHeadroomNs at that record's rate, or
// is over half full. A pass takes the GIL from the program (two hand-offs, each a thread
// wake-up, ~60 us on a virtual machine): asking at a quarter full, as before, made a thread of
// 200-frame stacks at 250 Hz ask every 80 ms, where it has room for 320. A record without a
// weight (a registration's) asks at a quarter full, as before.
constexpr uint64_t kDrainHeadroomNs = 200000000;
inline bool record_ring_wants_drain(const RingBuffer& ring, size_t record_bytes, uint64_t weight_ns) {
    const size_t used = ring.used(), capacity = ring.capacity();
    if (used > capacity / 2) return true;
    if (weight_ns == 0 || record_bytes == 0) return used > capacity / 4;
    // Room left, in records at this rate, against the headroom in records (no overflow: room
    // and record sizes are below 2^32; a weight over 1 s counts as 1 s, which only asks sooner).
    const uint64_t weight = weight_ns < 1000000000ull ? weight_ns : 1000000000ull;
    return static_cast<uint64_t>(capacity - used) * weight < static_cast<uint64_t>(record_bytes) * kDrainHeadroomNs;
}
void record_request_drain();

// A record built in place: open() reserves room for the largest record, the caller writes
// frames (and native pcs right after the frames it keeps) into frames(), then commit() writes
// the header and publishes header.depth frames and header.native_depth pcs. The ring's single
// writer only, between open() and commit() or abandon().
class RecordWriter {
public:
    explicit RecordWriter(RingBuffer* ring) : ring_(ring) {}  // null: open() fails
    RecordWriter(const RecordWriter&) = delete;
    RecordWriter& operator=(const RecordWriter&) = delete;

    // False when the ring is full or missing (nothing reserved). Inline, like commit(): the
    // signal handler calls both once per capture.
    bool open() {
        space_ = ring_ != nullptr ? ring_->reserve(kMaxRecordBytes) : nullptr;
        frames_ = space_ != nullptr ? reinterpret_cast<RawFrame*>(static_cast<RawSampleHeader*>(space_) + 1) : nullptr;
        return space_ != nullptr;
    }
    // Room for kMaxPythonFrames frames followed by kMaxNativeFrames pcs. After open() only.
    RawFrame* frames() const { return frames_; }
    // Publishes the record; returns false (and publishes nothing) when not open. The
    // header's depths are clamped to the record caps.
    bool commit(const RawSampleHeader& header) {
        if (space_ == nullptr) return false;
        RawSampleHeader h = header;
        if (h.depth > kMaxPythonFrames) h.depth = static_cast<uint16_t>(kMaxPythonFrames);
        if (h.native_depth > kMaxNativeFrames) h.native_depth = static_cast<uint16_t>(kMaxNativeFrames);
        std::memcpy(space_, &h, sizeof h);
        const size_t bytes = sample_record_bytes(h.depth, h.native_depth);
        ring_->commit(bytes);
        space_ = nullptr;
        frames_ = nullptr;
        if (record_ring_wants_drain(*ring_, bytes, h.weight_ns)) record_request_drain();
        return true;
    }
    // Gives the reserved space back unwritten (nothing is published).
    void abandon() { space_ = nullptr, frames_ = nullptr; }

private:
    RingBuffer* const ring_;
    void* space_ = nullptr;
    RawFrame* frames_ = nullptr;
};

// The record `header` + frames + native pcs, copied into `ring`. False when it did not fit.
// frames / native_pcs may be null when the header's depth / native_depth is 0. With `share`
// (the ring's writer base, root_share.h), only the frames the ring's last record lacked at
// its root end are stored and header.shared_root says how many complete them; without it, the
// header is written as given.
bool write_record(RingBuffer& ring, const RawSampleHeader& header, const RawFrame* frames,
                  const uint64_t* native_pcs, RootShareBase* share = nullptr);

// A record for ctx's ring written by a thread that is not ctx's own (the wall census, the
// Mach sampler, registration): takes the ring's turn through ctx->busy_, and writes only
// while ctx is attached, sharing its root side with the ring's last record as the handler's
// records do. False (nothing written) when the ring is busy, full or retired.
bool write_foreign_record(ThreadCtx* ctx, const RawSampleHeader& header, const RawFrame* frames,
                          const uint64_t* native_pcs = nullptr);

// The drain, after it emptied ctx's ring: puts the ring back at offset 0 when it is empty and
// its writers have moved kRingRewindBytes or more into it, taking the ring's turn through
// ctx->busy_ (a writer that meets it then drops and counts, as against the census; it is held
// for a few loads and stores). So a ring touches the pages one drain period's records need,
// not its whole capacity. False when the ring was busy, not empty or not far enough in.
// A few idle records: rewinding every ring that holds more keeps a blocked thread's records
// (one per census, a drain pass every 250 ms) inside the first page.
constexpr size_t kRingRewindBytes = 512;
bool rewind_drained_ring(ThreadCtx* ctx);

// Drain thread: true once since the last call if a record asked for a drain
// (record_ring_wants_drain: the drain, which otherwise takes the GIL only every few periods,
// should run now).
bool record_take_drain_request();

}  // namespace spprof
