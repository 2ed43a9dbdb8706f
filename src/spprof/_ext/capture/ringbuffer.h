// ringbuffer.h: a single-producer single-consumer ring of variable-length records.
//
// Exactly one writer at a time (the producers of a thread's ring take turns through
// ThreadCtx::busy_: its own signal handler on Linux, the wall census, the Mach sampler thread
// on macOS; record_writer.h) and one reader (the drain, GIL held). The writer side is SIGNAL-SAFE and
// NO-HEAP: it never blocks, never allocates; a record that does not fit is refused and the
// caller counts it as dropped. Records are 8-byte aligned and never straddle the end of the
// buffer: when the tail room is too small a padding record fills it and the record starts
// at offset 0. The drain puts an empty ring back at offset 0 (rewind_if_empty, holding the
// producers' turn), so a thread whose records are drained as they come keeps writing over the
// same first pages: a blocked thread in wall mode, which gets an idle record every census for
// as long as it waits, no longer walks every page of its ring into the process's RSS.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace spprof {

class RingBuffer {
public:
    // Normal context. capacity is rounded up to a power of two (at least 4 KiB).
    explicit RingBuffer(size_t capacity) {
        size_t cap = 4096;
        while (cap < capacity) cap <<= 1;
        capacity_ = cap;
        mask_ = cap - 1;
        // Not value-initialised: untouched pages of an idle thread's ring stay unmapped.
        data_.reset(new unsigned char[cap]);
    }
    RingBuffer(const RingBuffer&) = delete;
    RingBuffer& operator=(const RingBuffer&) = delete;

    size_t capacity() const { return capacity_; }
    // Any thread: memory this ring has touched so far (its pages are untouched until written,
    // see the constructor): what it adds to the process's RSS.
    size_t touched_bytes() const {
        const uint64_t end = touched_end_.load(std::memory_order_relaxed);
        const uint64_t pages = (end + 4095) & ~static_cast<uint64_t>(4095);
        return pages < capacity_ ? static_cast<size_t>(pages) : capacity_;
    }

    // ---- writer side: SIGNAL-SAFE, NO-HEAP ----------------------------------------------
    // Reserve `bytes` (rounded up to 8) of contiguous space. Returns nullptr when full.
    // The writer then fills the space and calls commit() with the same size (or smaller).
    void* reserve(size_t bytes) {
        bytes = round8(bytes + kHeader);
        if (bytes > capacity_ / 2) return nullptr;
        const uint64_t head = head_.load(std::memory_order_relaxed);
        const uint64_t tail = tail_.load(std::memory_order_acquire);
        const size_t used = static_cast<size_t>(head - tail);
        const size_t offset = static_cast<size_t>(head & mask_);
        const size_t to_end = capacity_ - offset;
        const size_t pad = (to_end < bytes) ? to_end : 0;
        if (used + pad + bytes > capacity_) return nullptr;
        pending_pad_ = pad;
        const size_t start = pad ? 0 : offset;
        return data_.get() + start + kHeader;
    }

    // Publish the reserved record with its final payload size.
    void commit(size_t payload) {
        const size_t bytes = round8(payload + kHeader);
        uint64_t head = head_.load(std::memory_order_relaxed);
        if (pending_pad_) {
            note_touched(static_cast<size_t>(head & mask_) + kHeader);
            write_header(static_cast<size_t>(head & mask_), static_cast<uint32_t>(pending_pad_), true);
            head += pending_pad_;
            pending_pad_ = 0;
        }
        note_touched(static_cast<size_t>(head & mask_) + bytes);
        write_header(static_cast<size_t>(head & mask_), static_cast<uint32_t>(bytes), false);
        head_.store(head + bytes, std::memory_order_release);
    }

    // ---- reader side: the drain ---------------------------------------------------------
    // Next record's payload, or nullptr when empty. *size receives the payload size
    // (may include up to 7 bytes of alignment slack).
    const void* peek(size_t* size) {
        for (;;) {
            const uint64_t tail = tail_.load(std::memory_order_relaxed);
            const uint64_t head = head_.load(std::memory_order_acquire);
            if (tail == head) return nullptr;
            const size_t offset = static_cast<size_t>(tail & mask_);
            uint32_t word;
            std::memcpy(&word, data_.get() + offset, sizeof word);
            const uint32_t bytes = word & ~kPadFlag;
            if (word & kPadFlag) {  // skip padding at the end of the buffer
                tail_.store(tail + bytes, std::memory_order_release);
                continue;
            }
            *size = bytes - kHeader;
            last_bytes_ = bytes;
            return data_.get() + offset + kHeader;
        }
    }
    // Release the record returned by the last peek().
    void pop() {
        const uint64_t tail = tail_.load(std::memory_order_relaxed);
        tail_.store(tail + last_bytes_, std::memory_order_release);
    }

    // Bytes written and not yet drained. Either side; a snapshot.
    size_t used() const {
        return static_cast<size_t>(head_.load(std::memory_order_relaxed) - tail_.load(std::memory_order_relaxed));
    }

    // The reader, while it holds the producers' turn (ThreadCtx::busy_: no writer is between
    // reserve() and commit()): an empty ring whose next record would start at `min_offset` or
    // further is put back at offset 0. True when it was.
    // Either side, a snapshot: rewind_if_empty(min_offset) would have something to do.
    bool rewind_due(size_t min_offset) const {
        const uint64_t head = head_.load(std::memory_order_relaxed);
        return head == tail_.load(std::memory_order_relaxed) && (head & mask_) >= min_offset;
    }
    bool rewind_if_empty(size_t min_offset) {
        const uint64_t head = head_.load(std::memory_order_acquire);
        if (head != tail_.load(std::memory_order_relaxed) || (head & mask_) < min_offset) return false;
        tail_.store(0, std::memory_order_relaxed);
        head_.store(0, std::memory_order_release);
        return true;
    }

    bool empty() const {
        return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
    }

private:
    static constexpr size_t kHeader = 8;       // u32 size|flag, u32 reserved: keeps payload 8-aligned
    static constexpr uint32_t kPadFlag = 0x80000000u;
    static size_t round8(size_t n) { return (n + 7) & ~static_cast<size_t>(7); }
    // Producer: bytes up to `end` have been written (touched_bytes()).
    void note_touched(size_t end) {
        if (end > touched_end_.load(std::memory_order_relaxed)) touched_end_.store(end, std::memory_order_relaxed);
    }
    void write_header(size_t offset, uint32_t bytes, bool pad) {
        const uint32_t word = bytes | (pad ? kPadFlag : 0u);
        std::memcpy(data_.get() + offset, &word, sizeof word);
    }

    alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer only
    size_t pending_pad_ = 0;                     // producer-private between reserve and commit
    std::atomic<uint64_t> touched_end_{0};       // producer-written: end of the furthest byte written
    alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer only
    size_t last_bytes_ = 0;                      // consumer-private
    alignas(64) size_t capacity_ = 0;
    size_t mask_ = 0;
    std::unique_ptr<unsigned char[]> data_;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "ring indices must be lock-free");

}  // namespace spprof
