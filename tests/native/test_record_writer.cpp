// test_record_writer.cpp: the one record writer (record_writer.h): the layout it writes, the
// caps it clamps to, a full ring, the in-place writer of the signal path, the busy turn and
// attached check of foreign writes, and the drain request.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "harness.h"
#include "capture/record_writer.h"
#include "capture/thread_ctx.h"

using namespace spprof;

TEST(writer_lays_out_header_frames_and_native_pcs) {
    RingBuffer ring(4096);
    RawSampleHeader h{};
    h.timestamp_ns = 111;
    h.weight_ns = 10'000'000;
    h.native_tid = 0xABCDEF;
    h.thread_serial = 3;
    h.flags = kSampleOnCpu;
    h.depth = 2;
    h.native_depth = 3;
    RawFrame frames[2] = {{0x1000, 4, 77}, {0x2000, 8 | kInstrEntryFlag, 88}};
    uint64_t pcs[3] = {0x10, 0x20, 0x30};
    CHECK(write_record(ring, h, frames, pcs));
    size_t size = 0;
    const auto* p = static_cast<const unsigned char*>(ring.peek(&size));
    CHECK(p != nullptr);
    CHECK(size >= sample_record_bytes(2, 3));
    RawSampleHeader got;
    std::memcpy(&got, p, sizeof got);
    CHECK_EQ(got.native_tid, 0xABCDEFull);
    CHECK_EQ(got.thread_serial, 3u);
    CHECK_EQ(got.depth, 2);
    CHECK_EQ(got.native_depth, 3);
    RawFrame f1;
    std::memcpy(&f1, p + sizeof got + sizeof(RawFrame), sizeof f1);
    CHECK_EQ(f1.code, 0x2000ull);
    CHECK_EQ(f1.instr, 8u | kInstrEntryFlag);
    uint64_t pc2;
    std::memcpy(&pc2, p + sizeof got + 2 * sizeof(RawFrame) + 2 * 8, sizeof pc2);
    CHECK_EQ(pc2, 0x30ull);
    ring.pop();
    CHECK(ring.empty());
}

TEST(writer_refuses_when_ring_full) {
    RingBuffer ring(4096);
    RawSampleHeader h{};
    h.depth = 100;  // 40 + 1600 bytes: two fit in 4 KiB, the third is refused
    std::vector<RawFrame> frames(100);
    int written = 0;
    while (write_record(ring, h, frames.data(), nullptr) && written < 10) ++written;
    CHECK_EQ(written, 2);
    // Depths above the record caps are clamped, never overrun the caller's buffers.
    RingBuffer big(1 << 16);
    h.depth = 0;
    h.native_depth = 0xFFFF;
    std::vector<uint64_t> pcs(kMaxNativeFrames);
    CHECK(write_record(big, h, nullptr, pcs.data()));
    size_t size = 0;
    const void* p = big.peek(&size);
    RawSampleHeader got;
    std::memcpy(&got, p, sizeof got);
    CHECK_EQ(got.native_depth, static_cast<uint16_t>(kMaxNativeFrames));
}

TEST(writer_in_place_publishes_only_the_kept_depths) {
    RingBuffer ring(1 << 16);
    RecordWriter w(&ring);
    CHECK(w.open());
    RawFrame* f = w.frames();
    f[0] = RawFrame{0x1000, 1, 2};
    f[1] = RawFrame{0x2000, 3, 4};
    auto* pcs = reinterpret_cast<uint64_t*>(f + 2);
    pcs[0] = 0xAA;
    RawSampleHeader h{};
    h.depth = 2;
    h.native_depth = 1;
    h.thread_serial = 7;
    CHECK(w.commit(h));
    CHECK(!w.commit(h));  // one commit per open
    size_t size = 0;
    const auto* p = static_cast<const unsigned char*>(ring.peek(&size));
    CHECK(p != nullptr);
    CHECK(size >= sample_record_bytes(2, 1) && size < sample_record_bytes(2, 1) + 8);
    RawSampleHeader got;
    std::memcpy(&got, p, sizeof got);
    CHECK_EQ(got.thread_serial, 7u);
    uint64_t pc;
    std::memcpy(&pc, p + sizeof got + 2 * sizeof(RawFrame), sizeof pc);
    CHECK_EQ(pc, 0xAAull);
    ring.pop();
    // Abandoned: nothing published.
    CHECK(w.open());
    w.abandon();
    CHECK(ring.empty());
    // No ring (a retired thread): open refuses.
    RecordWriter none(nullptr);
    CHECK(!none.open());
}

TEST(writer_in_place_refuses_when_the_largest_record_does_not_fit) {
    RingBuffer ring(4096);  // smaller than twice the largest record
    RecordWriter w(&ring);
    CHECK(!w.open());
    RawSampleHeader h{};
    CHECK(!w.commit(h));
}

TEST(foreign_write_takes_the_turn_and_needs_an_attached_thread) {
    ThreadCtx ctx(3, 1, nullptr, 1234, 1234, std::make_unique<RingBuffer>(1 << 16));
    RawSampleHeader h{};
    h.thread_serial = 3;
    CHECK(write_foreign_record(&ctx, h, nullptr));
    CHECK(!ctx.busy_.load());  // the turn is given back
    ctx.busy_.store(true);     // the thread's own handler is writing
    CHECK(!write_foreign_record(&ctx, h, nullptr));
    ctx.busy_.store(false);
    ctx.state_.store(ThreadState::kDetached);
    CHECK(!write_foreign_record(&ctx, h, nullptr));
    size_t size = 0;
    CHECK(ctx.ring_->peek(&size) != nullptr);
    ctx.ring_->pop();
    CHECK(ctx.ring_->empty());  // only the first write landed
}

TEST(foreign_writes_share_their_root_side_with_the_rings_last_record) {
    // The census walking a thread blocked 50 calls deep: its second walk stores nothing but
    // the count of frames the ring's last record holds (root_share.h).
    ThreadCtx ctx(3, 1, nullptr, 1234, 1234, std::make_unique<RingBuffer>(1 << 16));
    std::vector<RawFrame> frames;
    for (uint64_t i = 0; i < 50; ++i) frames.push_back(RawFrame{0x5000 + i, 2, 7});
    RawSampleHeader h{};
    h.depth = 50;
    CHECK(write_foreign_record(&ctx, h, frames.data()));
    CHECK(write_foreign_record(&ctx, h, frames.data()));
    CHECK_EQ(ctx.share_deepest_.load(), 50u);  // counted in the thread's memory
    size_t size = 0;
    RawSampleHeader got;
    std::memcpy(&got, ctx.ring_->peek(&size), sizeof got);
    CHECK_EQ(got.depth, 50);
    CHECK_EQ(got.shared_root, 0);
    ctx.ring_->pop();
    std::memcpy(&got, ctx.ring_->peek(&size), sizeof got);
    CHECK_EQ(got.depth, 0);
    CHECK_EQ(got.shared_root, 50);
    CHECK_EQ(size, sample_record_bytes(0, 0));
}

TEST(a_ring_without_weights_asks_for_a_drain_once_over_a_quarter_full) {
    (void)record_take_drain_request();
    RingBuffer ring(1 << 16);
    std::vector<RawFrame> frames(100);
    RawSampleHeader h{};
    h.depth = 100;
    CHECK(write_record(ring, h, frames.data(), nullptr));
    CHECK(!record_take_drain_request());  // 1.6 KiB of 64 KiB
    while (ring.used() <= ring.capacity() / 4) CHECK(write_record(ring, h, frames.data(), nullptr));
    CHECK(record_take_drain_request());
    CHECK(!record_take_drain_request());  // taken
}

namespace {

// Records of `depth` frames weighing `weight_ns` each, written into a fresh 256 KiB ring
// until one asks for a drain: how many were written then.
size_t records_until_a_drain_is_asked(uint32_t depth, uint64_t weight_ns) {
    (void)record_take_drain_request();
    RingBuffer ring(1 << 18);
    std::vector<RawFrame> frames(depth);
    RawSampleHeader h{};
    h.depth = static_cast<uint16_t>(depth);
    h.weight_ns = weight_ns;
    for (size_t n = 1; write_record(ring, h, frames.data(), nullptr); ++n)
        if (record_take_drain_request()) return n;
    return 0;
}

}  // namespace

TEST(a_ring_asks_for_a_drain_when_it_would_fill_within_the_headroom) {
    // In the ring a record takes its bytes and an 8-byte header. 200-frame records (3,248
    // bytes) at 4 ms: 80 fit, 320 ms; the ring asks once the room left is under 200 ms of them
    // (162,400 bytes), at the 31st record, not at a quarter full (the 21st) as before.
    CHECK_EQ(records_until_a_drain_is_asked(200, 4000000), 31u);
    // At 1 ms the ring holds 80 ms of them: the first record asks.
    CHECK_EQ(records_until_a_drain_is_asked(200, 1000000), 1u);
    // 20-frame records (376 bytes in the ring) at 10 ms: half full comes first, at the 349th.
    CHECK_EQ(records_until_a_drain_is_asked(20, 10000000), 349u);
    // A weight over a second counts as one: still asked at half full.
    CHECK_EQ(records_until_a_drain_is_asked(20, 60000000000ull), 349u);
}
