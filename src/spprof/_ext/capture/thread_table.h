// thread_table.h: the session's live sampled threads, readable from a signal handler.
//
// Two lock-free indexes over the ThreadCtx objects of the threads alive now:
//  - by slot (the value a per-thread timer carries, ThreadCtx::serial_): a two-level array
//    whose chunks are allocated in normal context and published with release stores;
//  - by kernel tid (for the process-wide timer, whose signal carries no value): an
//    open-addressing table with bounded probing and tombstones for ended threads.
// A session may see any number of threads over its life; at most kMaxThreads at once. When a
// thread ends, retire() unpublishes its ctx and keeps it in quarantine: a reader that found it
// just before (a handler in flight, the wall census's tick) still reads valid memory, and
// finds it detached. Those readers hold the capture gate (capture_gate.h) while they use a
// ctx, so once the gate is seen empty after the unpublishing (both sequentially consistent:
// the store-buffering argument of capture_gate.h), none can still hold it: collect() frees it
// and gives its slot back for a new thread. (The Mach sampler keeps its own list of ctxs, but
// holds the gate for its cycle and uses one only while it is still published here.)
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
    // 64 chunks of 256 slots: 16,384 threads alive at once; an idle session costs half a
    // kilobyte of chunk pointers and the 256 KiB tid index.
    static constexpr uint32_t kChunkBits = 8;
    static constexpr uint32_t kChunkSize = 1u << kChunkBits;
    static constexpr uint32_t kChunks = 64;
    static constexpr uint32_t kMaxThreads = kChunkSize * kChunks;
    // tid index: twice the live maximum, so probing stays short; bounded by it in any case.
    static constexpr uint32_t kTidSlots = 2 * kMaxThreads;
    static constexpr uint32_t kNoSlot = 0xFFFFFFFFu;

    ThreadTable() : tid_slots_(new std::atomic<uint64_t>[kTidSlots]) {
        for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
        for (uint32_t i = 0; i < kTidSlots; ++i) tid_slots_[i].store(kEmpty, std::memory_order_relaxed);
    }
    ThreadTable(const ThreadTable&) = delete;
    ThreadTable& operator=(const ThreadTable&) = delete;

    // Normal context, GIL held. The slot the next thread gets (a freed one first), or kNoSlot
    // when kMaxThreads are alive or in quarantine.
    uint32_t take_slot() {
        if (!free_slots_.empty()) {
            const uint32_t slot = free_slots_.back();
            free_slots_.pop_back();
            return slot;
        }
        if (by_slot_.size() >= kMaxThreads) return kNoSlot;
        by_slot_.emplace_back();
        return static_cast<uint32_t>(by_slot_.size() - 1);
    }

    // Normal context, GIL held: a slot from take_slot() that was not used after all.
    void give_back(uint32_t slot) { free_slots_.push_back(slot); }

    // Normal context, GIL held. Publishes ctx (built with serial_ = a slot from take_slot()).
    ThreadCtx* add(std::unique_ptr<ThreadCtx> ctx) {
        const uint32_t slot = ctx->serial_;
        auto& chunk = chunks_[slot >> kChunkBits];
        Chunk* c = chunk.load(std::memory_order_relaxed);
        if (c == nullptr) {
            owned_chunks_.emplace_back(new Chunk());
            c = owned_chunks_.back().get();
            chunk.store(c, std::memory_order_release);
        }
        ThreadCtx* raw = ctx.get();
        by_slot_[slot] = std::move(ctx);
        ++live_;
        c->slots[slot & (kChunkSize - 1)].store(raw, std::memory_order_release);
        index_tid(raw->native_tid_, slot);
        if (slot + 1 > published_.load(std::memory_order_relaxed))
            published_.store(slot + 1, std::memory_order_release);
        return raw;
    }

    // Normal context, GIL held, after the thread's timer is gone and its ring drained and
    // released: no new lookup finds ctx; it stays in memory until collect() frees it.
    void retire(ThreadCtx* ctx) {
        const uint32_t slot = ctx->serial_;
        if (slot >= by_slot_.size() || by_slot_[slot].get() != ctx) return;
        unindex_tid(ctx->native_tid_, slot);
        Chunk* c = chunks_[slot >> kChunkBits].load(std::memory_order_relaxed);
        c->slots[slot & (kChunkSize - 1)].store(nullptr, std::memory_order_seq_cst);  // before the gate check
        quarantine_.push_back(std::move(by_slot_[slot]));
        --live_;
    }

    // Normal context, GIL held. `gate_empty`: the capture gate was seen empty after every
    // retire() so far. Frees what no reader can hold any more and gives its slots back.
    // Returns how many were freed.
    size_t collect(bool gate_empty) {
        if (!gate_empty) return 0;
        const size_t freed = quarantine_.size();
        for (auto& ctx : quarantine_) free_slots_.push_back(ctx->serial_);
        quarantine_.clear();
        if (tombstones_ > kTidSlots / 4) rebuild_tid_index();
        return freed;
    }

    // Normal context: slots [0, slot_count()) may hold a live ctx (at() is nullptr if not).
    size_t slot_count() const { return by_slot_.size(); }
    ThreadCtx* at(size_t slot) const { return by_slot_[slot].get(); }
    size_t live() const { return live_; }
    size_t quarantined() const { return quarantine_.size(); }
    // Normal context: the table's own memory (ctx objects alive or in quarantine, chunks, the
    // tid index); rings and the frames a ctx keeps for root sharing are counted by their owner.
    size_t memory_bytes() const {
        return (live_ + quarantine_.size()) * sizeof(ThreadCtx) + owned_chunks_.size() * sizeof(Chunk) +
               kTidSlots * sizeof(uint64_t) + by_slot_.capacity() * sizeof(by_slot_[0]) +
               quarantine_.capacity() * sizeof(std::unique_ptr<ThreadCtx>) + free_slots_.capacity() * sizeof(uint32_t);
    }

    // Any thread: slots below this have been used (by_serial may return nullptr for any).
    uint32_t published() const { return published_.load(std::memory_order_acquire); }

    // SIGNAL-SAFE
    ThreadCtx* by_serial(uint32_t slot) const {
        if (slot >= kMaxThreads) return nullptr;
        const Chunk* c = chunks_[slot >> kChunkBits].load(std::memory_order_acquire);
        if (c == nullptr) return nullptr;
        // seq_cst, not acquire: the other half of retire()'s store / gate check (see above).
        return c->slots[slot & (kChunkSize - 1)].load(std::memory_order_seq_cst);
    }

    // SIGNAL-SAFE. The live thread registered with this tid.
    ThreadCtx* by_tid(uint64_t tid) const {
        const uint32_t start = hash(tid);
        for (uint32_t i = 0; i < kTidSlots; ++i) {
            const uint64_t v = tid_slots_[(start + i) & (kTidSlots - 1)].load(std::memory_order_acquire);
            if (v == kEmpty) return nullptr;
            if (v != kTombstone && (v >> 32) == (tid & 0xFFFFFFFFu)) return by_serial(static_cast<uint32_t>(v));
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
    static constexpr uint64_t kEmpty = 0;
    static constexpr uint64_t kTombstone = ~0ull;

    static uint32_t hash(uint64_t tid) {
        return static_cast<uint32_t>((tid * 0x9E3779B97F4A7C15ull) >> 40) & (kTidSlots - 1);
    }
    static uint64_t entry(uint64_t tid, uint32_t slot) { return ((tid & 0xFFFFFFFFu) << 32) | slot; }

    // A reused tid overwrites its entry: the newest thread with that tid wins.
    void index_tid(uint64_t tid, uint32_t slot) {
        const uint32_t start = hash(tid);
        uint32_t free_at = kTidSlots;
        for (uint32_t i = 0; i < kTidSlots; ++i) {
            const uint32_t at = (start + i) & (kTidSlots - 1);
            const uint64_t v = tid_slots_[at].load(std::memory_order_relaxed);
            if (v == kTombstone) {
                if (free_at == kTidSlots) free_at = at;
                continue;
            }
            if (v == kEmpty) {
                if (free_at == kTidSlots) free_at = at;
                break;
            }
            if ((v >> 32) == (tid & 0xFFFFFFFFu)) {
                tid_slots_[at].store(entry(tid, slot), std::memory_order_release);
                return;
            }
        }
        if (free_at == kTidSlots) return;  // cannot happen: the index is twice the live maximum
        if (tid_slots_[free_at].load(std::memory_order_relaxed) == kTombstone) --tombstones_;
        tid_slots_[free_at].store(entry(tid, slot), std::memory_order_release);
    }

    void unindex_tid(uint64_t tid, uint32_t slot) {
        const uint32_t start = hash(tid);
        for (uint32_t i = 0; i < kTidSlots; ++i) {
            auto& s = tid_slots_[(start + i) & (kTidSlots - 1)];
            const uint64_t v = s.load(std::memory_order_relaxed);
            if (v == kEmpty) return;
            if (v == entry(tid, slot)) {
                s.store(kTombstone, std::memory_order_release);
                ++tombstones_;
                return;
            }
        }
    }

    // Tombstones lengthen probes: rebuilt from the live threads once a quarter of the index
    // is tombstones. A handler probing meanwhile may miss its thread (one sample, counted as
    // no_thread); it never reads out of bounds.
    void rebuild_tid_index() {
        for (uint32_t i = 0; i < kTidSlots; ++i) tid_slots_[i].store(kEmpty, std::memory_order_release);
        tombstones_ = 0;
        for (const auto& ctx : by_slot_)
            if (ctx) index_tid(ctx->native_tid_, ctx->serial_);
    }

    std::atomic<uint32_t> published_{0};
    std::atomic<Chunk*> chunks_[kChunks];
    std::unique_ptr<std::atomic<uint64_t>[]> tid_slots_;
    uint32_t tombstones_ = 0;
    size_t live_ = 0;
    std::vector<std::unique_ptr<Chunk>> owned_chunks_;
    std::vector<std::unique_ptr<ThreadCtx>> by_slot_;  // by slot; null when free or quarantined
    std::vector<std::unique_ptr<ThreadCtx>> quarantine_;
    std::vector<uint32_t> free_slots_;
};

static_assert(std::atomic<ThreadCtx*>::is_always_lock_free, "read from the signal handler");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "read from the signal handler");

}  // namespace spprof
