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
                  const uint64_t* native_pcs, RootShareBase* share) {
    const uint32_t depth = frames != nullptr ? clamp(header.depth, kMaxPythonFrames) : 0;
    const uint32_t native = native_pcs != nullptr ? clamp(header.native_depth, kMaxNativeFrames) : 0;
    // Reserve only what this record needs: a full ring still takes a small record. Reserved
    // before the frames are matched: a refused record must leave the base alone.
    auto* p = static_cast<unsigned char*>(ring.reserve(sample_record_bytes(depth, native)));
    if (p == nullptr) return false;
    RawSampleHeader h = header;
    const uint32_t shared = share != nullptr ? root_share_match(frames, depth, share) : 0;
    if (share != nullptr) h.shared_root = static_cast<uint16_t>(shared);
    const uint32_t kept = depth - shared;  // the leaf-side frames
    h.depth = static_cast<uint16_t>(kept);
    h.native_depth = static_cast<uint16_t>(native);
    std::memcpy(p, &h, sizeof h);
    size_t off = sizeof h;
    if (kept != 0) {
        std::memcpy(p + off, frames, kept * sizeof(RawFrame));
        off += kept * sizeof(RawFrame);
    }
    if (native != 0) std::memcpy(p + off, native_pcs, native * sizeof(uint64_t));
    const size_t bytes = sample_record_bytes(kept, native);
    ring.commit(bytes);
    if (record_ring_wants_drain(ring, bytes, h.weight_ns)) record_request_drain();
    return true;
}

bool write_foreign_record(ThreadCtx* ctx, const RawSampleHeader& header, const RawFrame* frames,
                          const uint64_t* native_pcs) {
    if (ctx->busy_.exchange(true, std::memory_order_acquire)) return false;
    bool ok = false;
    RingBuffer* ring = ctx->ring_.get();
    if (ctx->state_.load(std::memory_order_acquire) == ThreadState::kAttached && ring != nullptr) {
        // Shares its root side with the ring's last record like the handler's (root_share.h).
        ok = write_record(*ring, header, frames, native_pcs, &ctx->share_base_);
        const uint32_t depth = frames != nullptr ? clamp(header.depth, kMaxPythonFrames) : 0;
        if (ok && depth > ctx->share_deepest_.load(std::memory_order_relaxed))
            ctx->share_deepest_.store(depth, std::memory_order_relaxed);
    }
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
