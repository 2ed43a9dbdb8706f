// record_writer.cpp: the one record writer (see record_writer.h). SIGNAL-SAFE, NO-HEAP.
#include "record_writer.h"

#include <atomic>
#include <cstring>

#include "thread_ctx.h"

namespace spprof {
namespace {

// Set by a writer whose ring wants a drain (record_ring_wants_drain); taken by the drain thread.
std::atomic<bool> g_drain_wanted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from signal handlers");

inline uint32_t clamp(uint32_t v, uint32_t cap) { return v <= cap ? v : cap; }

}  // namespace

void record_request_drain() { g_drain_wanted.store(true, std::memory_order_relaxed); }

bool write_record(RingBuffer& ring, const RawSampleHeader& header, const RawFrame* frames,
                  const uint64_t* native_pcs) {
    const uint32_t depth = frames != nullptr ? clamp(header.depth, kMaxPythonFrames) : 0;
    const uint32_t native = native_pcs != nullptr ? clamp(header.native_depth, kMaxNativeFrames) : 0;
    // Reserve only what this record needs: a full ring still takes a small record.
    auto* p = static_cast<unsigned char*>(ring.reserve(sample_record_bytes(depth, native)));
    if (p == nullptr) return false;
    RawSampleHeader h = header;
    h.depth = static_cast<uint16_t>(depth);
    h.native_depth = static_cast<uint16_t>(native);
    std::memcpy(p, &h, sizeof h);
    size_t off = sizeof h;
    if (depth != 0) {
        std::memcpy(p + off, frames, depth * sizeof(RawFrame));
        off += depth * sizeof(RawFrame);
    }
    if (native != 0) std::memcpy(p + off, native_pcs, native * sizeof(uint64_t));
    const size_t bytes = sample_record_bytes(depth, native);
    ring.commit(bytes);
    if (record_ring_wants_drain(ring, bytes, h.weight_ns)) record_request_drain();
    return true;
}

bool write_foreign_record(ThreadCtx* ctx, const RawSampleHeader& header, const RawFrame* frames,
                          const uint64_t* native_pcs) {
    if (ctx->busy_.exchange(true, std::memory_order_acquire)) return false;
    bool ok = false;
    RingBuffer* ring = ctx->ring_.get();
    // Written whole: the thread's handler writes its next record whole too (root_share.h).
    RawSampleHeader h = header;
    h.shared_root = 0;
    if (h.depth != 0) root_share_forget(&ctx->share_base_);
    if (ctx->state_.load(std::memory_order_acquire) == ThreadState::kAttached && ring != nullptr)
        ok = write_record(*ring, h, frames, native_pcs);
    ctx->busy_.store(false, std::memory_order_release);
    return ok;
}

bool rewind_drained_ring(ThreadCtx* ctx) {
    RingBuffer* ring = ctx->ring_.get();
    if (ring == nullptr || !ring->rewind_due(kRingRewindBytes)) return false;
    if (ctx->busy_.exchange(true, std::memory_order_acquire)) return false;
    const bool rewound = ring->rewind_if_empty(kRingRewindBytes);
    ctx->busy_.store(false, std::memory_order_release);
    return rewound;
}

bool record_take_drain_request() { return g_drain_wanted.exchange(false, std::memory_order_relaxed); }

}  // namespace spprof
