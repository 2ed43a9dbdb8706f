// test_ringbuffer.cpp: the SPSC ring: wrap-around, refusal when full, and one producer thread
// against one consumer thread with every record checked.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#include "harness.h"
#include "capture/ringbuffer.h"

using spprof::RingBuffer;

static bool push(RingBuffer& rb, uint64_t value, size_t words) {
    auto* p = static_cast<uint64_t*>(rb.reserve(words * 8));
    if (!p) return false;
    for (size_t i = 0; i < words; ++i) p[i] = value + i;
    rb.commit(words * 8);
    return true;
}

TEST(ring_rounds_capacity_to_power_of_two) {
    RingBuffer rb(5000);
    CHECK_EQ(rb.capacity(), static_cast<size_t>(8192));
    CHECK(rb.empty());
}

TEST(ring_refuses_when_full_and_recovers) {
    RingBuffer rb(4096);
    int pushed = 0;
    while (push(rb, pushed, 31)) ++pushed;  // 256-byte records incl. header
    CHECK_EQ(pushed, 16);
    size_t size = 0;
    const void* rec = rb.peek(&size);
    CHECK(rec != nullptr);
    CHECK_EQ(size, static_cast<size_t>(31 * 8));
    CHECK_EQ(static_cast<const uint64_t*>(rec)[0], static_cast<uint64_t>(0));
    rb.pop();
    CHECK(push(rb, 1000, 31));   // room again after one pop
    CHECK(!push(rb, 2000, 31));
}

TEST(ring_wraps_with_padding_and_preserves_order) {
    RingBuffer rb(4096);
    uint64_t next_in = 0, next_out = 0;
    for (int round = 0; round < 1000; ++round) {
        const size_t words = 1 + (round * 7) % 60;  // sizes that do not divide the capacity
        while (!push(rb, next_in * 1000, words)) {
            size_t size = 0;
            const auto* rec = static_cast<const uint64_t*>(rb.peek(&size));
            CHECK(rec != nullptr);
            if (!rec) return;
            CHECK_EQ(rec[0], next_out * 1000);
            ++next_out;
            rb.pop();
        }
        ++next_in;
    }
    size_t size = 0;
    while (const auto* rec = static_cast<const uint64_t*>(rb.peek(&size))) {
        CHECK_EQ(rec[0], next_out * 1000);
        ++next_out;
        rb.pop();
    }
    CHECK_EQ(next_out, next_in);
}

TEST(ring_rejects_record_larger_than_half) {
    RingBuffer rb(4096);
    CHECK(rb.reserve(2100) == nullptr);
    CHECK(rb.reserve(1000) != nullptr);
}

TEST(ring_one_producer_one_consumer_threads) {
    RingBuffer rb(1 << 14);
    constexpr uint64_t kCount = 200000;
    std::atomic<bool> done{false};
    uint64_t dropped = 0;
    std::thread producer([&] {
        for (uint64_t i = 0; i < kCount; ++i) {
            const size_t words = 2 + i % 13;
            if (!push(rb, i, words)) ++dropped;
        }
        done.store(true, std::memory_order_release);
    });
    uint64_t received = 0, last = 0;
    bool ordered = true, intact = true;
    for (;;) {
        size_t size = 0;
        const auto* rec = static_cast<const uint64_t*>(rb.peek(&size));
        if (!rec) {
            if (done.load(std::memory_order_acquire) && rb.empty()) break;
            std::this_thread::yield();
            continue;
        }
        const uint64_t v = rec[0];
        const size_t words = size / 8;
        for (size_t w = 0; w < words; ++w) intact &= (rec[w] == v + w);
        if (received > 0 && v <= last) ordered = false;
        last = v;
        ++received;
        rb.pop();
    }
    producer.join();
    CHECK(ordered);
    CHECK(intact);
    CHECK_EQ(received + dropped, kCount);
}

// A thread whose records are drained as they come (a blocked thread's idle record every wall
// census) keeps writing over its first page once the drain rewinds the empty ring: 100,000
// records and the ring has touched one page, not its 256 KiB. Without the rewind the head
// walks the whole ring and touched_bytes() reaches the capacity.
TEST(ring_rewound_when_drained_touches_one_page) {
    RingBuffer rb(256 * 1024);
    uint64_t rewinds = 0;
    for (uint64_t i = 0; i < 100000; ++i) {
        CHECK(push(rb, i, 5));  // a 48-byte record, as an idle record is
        size_t size = 0;
        const auto* rec = static_cast<const uint64_t*>(rb.peek(&size));
        CHECK(rec != nullptr);
        if (!rec) return;
        CHECK_EQ(rec[0], i);
        rb.pop();
        if (rb.rewind_if_empty(4096)) ++rewinds;
    }
    CHECK(rewinds > 1000);
    CHECK(rb.touched_bytes() <= static_cast<size_t>(8192));
    CHECK(rb.empty());
}

// Not empty, or not far enough in: the ring stays where it is and nothing is lost.
TEST(ring_rewind_only_when_empty_and_past_the_offset) {
    RingBuffer rb(64 * 1024);
    for (uint64_t i = 0; i < 200; ++i) CHECK(push(rb, i, 5));  // 200 x 48 bytes: past 4 KiB
    CHECK(!rb.rewind_if_empty(4096));                          // not empty
    size_t size = 0;
    for (uint64_t i = 0; i < 200; ++i) {
        const auto* rec = static_cast<const uint64_t*>(rb.peek(&size));
        CHECK(rec != nullptr);
        if (!rec) return;
        CHECK_EQ(rec[0], i);
        rb.pop();
    }
    CHECK(!rb.rewind_if_empty(16384));  // 9,600 bytes in: not past 16 KiB
    CHECK(rb.rewind_if_empty(4096));
    CHECK(push(rb, 7, 5));
    const auto* rec = static_cast<const uint64_t*>(rb.peek(&size));
    CHECK(rec != nullptr && rec[0] == 7);
    CHECK_EQ(rb.touched_bytes(), static_cast<size_t>(12288));  // what was written before: 3 pages
}
