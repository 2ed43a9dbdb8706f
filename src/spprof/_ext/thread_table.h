// thread_table.h: the session's sampled threads, readable from a signal handler.
//
// Two lock-free indexes over ThreadCtx objects that live until the session ends:
//  - by serial (the value a per-thread timer carries): a two-level array whose chunks are
//    allocated in normal context and published with release stores;
//  - by kernel tid (for the process-wide timer, whose signal carries no value): an
//    open-addressing table with bounded probing.
// Writers: the session, GIL held (one writer at a time). Readers: any thread, including
// signal handlers (SIGNAL-SAFE, NO-HEAP: atomic loads and bounded loops only).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "thread_ctx.h"

namespace spprof {

class ThreadTable {
public:
    // 256 chunks of 256 slots: 65,536 threads per session, far beyond what a process runs
    // at once, while an idle session costs two kilobytes of chunk pointers.
    static constexpr uint32_t kChunkBits = 8;
    static constexpr uint32_t kChunkSize = 1u << kChunkBits;
    static constexpr uint32_t kChunks = 256;
    static constexpr uint32_t kMaxThreads = kChunkSize * kChunks;
    // tid index: power of two, at most half full in practice; probing is bounded by it.
    static constexpr uint32_t kTidSlots = 1u << 14;

    ThreadTable() {
        for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
        for (auto& s : tid_slots_) s.store(0, std::memory_order_relaxed);
    }
    ThreadTable(const ThreadTable&) = delete;
    ThreadTable& operator=(const ThreadTable&) = delete;

    // Normal context, GIL held. Takes ownership; returns the ctx or nullptr when full.
    ThreadCtx* add(std::unique_ptr<ThreadCtx> ctx) {
        const uint32_t serial = ctx->serial_;
        if (serial >= kMaxThreads) return nullptr;
        auto& chunk = chunks_[serial >> kChunkBits];
        Chunk* c = chunk.load(std::memory_order_relaxed);
        if (c == nullptr) {
            owned_chunks_.emplace_back(new Chunk());
            c = owned_chunks_.back().get();
            chunk.store(c, std::memory_order_release);
        }
        ThreadCtx* raw = ctx.get();
        owned_.push_back(std::move(ctx));
        c->slots[serial & (kChunkSize - 1)].store(raw, std::memory_order_release);
        index_tid(raw->native_tid_, serial);
        published_.store(serial + 1, std::memory_order_release);
        return raw;
    }

    uint32_t next_serial() const { return static_cast<uint32_t>(owned_.size()); }
    // Any thread: serials below this are published (by_serial may still see a gap if add()
    // failed, so callers check for nullptr).
    uint32_t published() const { return published_.load(std::memory_order_acquire); }
    size_t size() const { return owned_.size(); }
    ThreadCtx* at(size_t i) const { return owned_[i].get(); }  // normal context

    // SIGNAL-SAFE
    ThreadCtx* by_serial(uint32_t serial) const {
        if (serial >= kMaxThreads) return nullptr;
        const Chunk* c = chunks_[serial >> kChunkBits].load(std::memory_order_acquire);
        if (c == nullptr) return nullptr;
        return c->slots[serial & (kChunkSize - 1)].load(std::memory_order_acquire);
    }

    // SIGNAL-SAFE. The most recent thread registered with this tid.
    ThreadCtx* by_tid(uint64_t tid) const {
        const uint32_t start = hash(tid);
        for (uint32_t i = 0; i < kTidSlots; ++i) {
            const uint64_t v = tid_slots_[(start + i) & (kTidSlots - 1)].load(std::memory_order_acquire);
            if (v == 0) return nullptr;
            if ((v >> 32) == (tid & 0xFFFFFFFFu)) return by_serial(static_cast<uint32_t>(v));
        }
        return nullptr;
    }

private:
    struct Chunk {
        Chunk() {
            for (auto& s : slots) s.store(nullptr, std::memory_order_relaxed);
        }
        std::atomic<ThreadCtx*> slots[kChunkSize];
    };

    static uint32_t hash(uint64_t tid) {
        return static_cast<uint32_t>((tid * 0x9E3779B97F4A7C15ull) >> 40) & (kTidSlots - 1);
    }
    // A reused tid overwrites its slot: the newest thread with that tid wins.
    void index_tid(uint64_t tid, uint32_t serial) {
        const uint64_t value = ((tid & 0xFFFFFFFFu) << 32) | serial;
        const uint32_t start = hash(tid);
        for (uint32_t i = 0; i < kTidSlots; ++i) {
            auto& slot = tid_slots_[(start + i) & (kTidSlots - 1)];
            const uint64_t v = slot.load(std::memory_order_relaxed);
            if (v == 0 || (v >> 32) == (tid & 0xFFFFFFFFu)) {
                slot.store(value, std::memory_order_release);
                return;
            }
        }
    }

    std::atomic<uint32_t> published_{0};
    std::atomic<Chunk*> chunks_[kChunks];
    std::atomic<uint64_t> tid_slots_[kTidSlots];
    std::vector<std::unique_ptr<Chunk>> owned_chunks_;
    std::vector<std::unique_ptr<ThreadCtx>> owned_;
};

static_assert(std::atomic<ThreadCtx*>::is_always_lock_free, "read from the signal handler");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "read from the signal handler");

}  // namespace spprof
