// test_fp_walk.cpp: validate_frame_pointer boundaries, pointer-authentication stripping,
// read_frame_record, and walk_frame_pointers over real frame-record chains built in a buffer.
#include <cstdint>
#include <cstring>

#include "harness.h"
#include "unwind/fp_walk.h"

using namespace spprof;

TEST(fp_validate_boundaries) {
    const uintptr_t lo = 0x7000'0000'0000, hi = 0x7000'0001'0000;
    CHECK(validate_frame_pointer(lo, lo, hi));                    // first byte of the stack
    CHECK(validate_frame_pointer(hi - 16, lo, hi));               // last record that fits
    CHECK(!validate_frame_pointer(hi - 8, lo, hi));               // record would cross hi
    CHECK(!validate_frame_pointer(hi, lo, hi));                   // one past the end
    CHECK(!validate_frame_pointer(lo - 8, lo, hi));               // below the stack
    CHECK(!validate_frame_pointer(lo + 0x8001, lo, hi));          // misaligned
    CHECK(!validate_frame_pointer(lo + 4, lo, hi));               // 4-aligned is not enough
    CHECK(validate_frame_pointer(lo + 8, lo, hi));                // 8-aligned is
    CHECK(!validate_frame_pointer(0, 0, hi));                     // null never valid
    CHECK(!validate_frame_pointer(lo + 64, hi, lo));              // inverted bounds
    CHECK(!validate_frame_pointer(lo, lo, lo + 8));               // stack smaller than a record
    CHECK(!validate_frame_pointer(UINTPTR_MAX - 7, lo, UINTPTR_MAX));  // no wrap-around
}

TEST(fp_strip_pointer_auth) {
    // One mask per target (platform/address_space.h): 47 bits on macOS arm64, 48 on Linux
    // arm64, none on x86_64.
#if defined(__aarch64__) && defined(__linux__)
    CHECK_EQ(kPointerAuthStripMask, (uint64_t{1} << 48) - 1);
    CHECK_EQ(strip_pointer_auth(0x002a'aaaa'aaaa'3f00ull), 0x0000'aaaa'aaaa'3f00ull);  // PIE base kept
#elif defined(__x86_64__)
    CHECK_EQ(kPointerAuthStripMask, ~uint64_t{0});
    CHECK_EQ(strip_pointer_auth(0x002a'0001'0000'3f00ull), 0x002a'0001'0000'3f00ull);
#endif
    CHECK_EQ(strip_pointer_auth(0x0000'0001'0000'3f00ull), 0x0000'0001'0000'3f00ull);
    CHECK_EQ(strip_pointer_auth(0x0000'7fff'fe00'0000ull), 0x0000'7fff'fe00'0000ull);  // top of macOS user VA
    CHECK_EQ(strip_pointer_auth(0), 0ull);
}

namespace {

// A fake stack: `frames` records placed `gap` words apart from the low end upwards, each
// {saved fp -> next record, return address}. The last record's saved fp is 0.
struct FakeStack {
    alignas(16) uint64_t words[512] = {};
    uintptr_t lo() const { return reinterpret_cast<uintptr_t>(&words[0]); }
    uintptr_t hi() const { return reinterpret_cast<uintptr_t>(&words[512]); }
    uintptr_t addr(size_t w) const { return reinterpret_cast<uintptr_t>(&words[w]); }
    // Returns the address of the first (leaf) record.
    uintptr_t build(size_t frames, size_t gap, uint64_t ret_base, uint64_t pac = 0) {
        for (size_t i = 0; i < frames; ++i) {
            const size_t w = 4 + i * gap;
            words[w] = i + 1 < frames ? addr(w + gap) : 0;
            words[w + 1] = (ret_base + i) | pac;
        }
        return addr(4);
    }
};

}  // namespace

TEST(fp_walk_full_chain) {
    FakeStack s;
    RegisterContext regs;
    regs.pc = 0x1000;
    regs.fp = s.build(10, 6, 0x2000);
    uint64_t out[32] = {};
    const UnwindStatus w = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out, 32);
    CHECK_EQ(w.depth, 11u);
    CHECK(!w.truncated);
    CHECK(w.stop == UnwindStop::kBottom);
    CHECK_EQ(out[0], 0x1000ull);
    for (uint32_t i = 0; i < 10; ++i) CHECK_EQ(out[1 + i], 0x2000ull + i);  // leaf first
}

TEST(fp_walk_strips_every_return_address) {
    FakeStack s;
    RegisterContext regs;
    const uint64_t pac = 0x00ab'0000'0000'0000ull;
    regs.pc = 0x1000 | pac;  // the thread layer strips; the walk strips again
    regs.fp = s.build(5, 4, 0x1'0000'2000ull, pac);
    uint64_t out[16] = {};
    const UnwindStatus w = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out, 16);
    CHECK_EQ(w.depth, 6u);
    CHECK_EQ(w.fp_steps, 5u);
    CHECK_EQ(out[0], strip_pointer_auth(0x1000 | pac));
    for (uint32_t i = 0; i < 5; ++i) CHECK_EQ(out[1 + i], strip_pointer_auth((0x1'0000'2000ull + i) | pac));
}

TEST(fp_walk_depth_cap_sets_truncated) {
    FakeStack s;
    RegisterContext regs;
    regs.pc = 0x1000;
    regs.fp = s.build(20, 4, 0x2000);
    uint64_t out[8] = {};
    const UnwindStatus w = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out, 8);
    CHECK_EQ(w.depth, 8u);
    CHECK(w.truncated);
    CHECK(w.stop == UnwindStop::kDepthCap);
    CHECK_EQ(out[7], 0x2000ull + 6);
    // Exactly enough room: not truncated.
    uint64_t out2[21] = {};
    const UnwindStatus w2 = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out2, 21);
    CHECK_EQ(w2.depth, 21u);
    CHECK(!w2.truncated);
}

TEST(fp_walk_stops_on_non_rising_chain) {
    FakeStack s;
    RegisterContext regs;
    regs.pc = 0x1000;
    regs.fp = s.build(6, 4, 0x2000);
    // Record 3 points back at record 1: a cycle.
    s.words[4 + 3 * 4] = s.addr(4 + 1 * 4);
    uint64_t out[64] = {};
    const UnwindStatus w = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out, 64);
    CHECK(w.stop == UnwindStop::kNotRising);
    CHECK_EQ(w.depth, 5u);  // pc + records 0..3
    // A record pointing at itself.
    FakeStack t;
    regs.fp = t.build(2, 4, 0x3000);
    t.words[4] = t.addr(4);
    const UnwindStatus w2 = walk_frame_pointers(StackReader{}, regs, StackBounds{t.lo(), t.hi()}, out, 64);
    CHECK(w2.stop == UnwindStop::kNotRising);
    CHECK_EQ(w2.depth, 2u);
}

TEST(fp_walk_stops_at_frame_outside_stack_or_misaligned) {
    FakeStack s;
    RegisterContext regs;
    regs.pc = 0x1000;
    regs.fp = s.build(6, 4, 0x2000);
    s.words[4 + 2 * 4] = s.hi() + 64;  // record 2 points above the stack
    uint64_t out[64] = {};
    UnwindStatus w = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out, 64);
    CHECK(w.stop == UnwindStop::kNoCfi);
    CHECK_EQ(w.depth, 4u);
    s.words[4 + 2 * 4] = s.addr(4 + 3 * 4) + 4;  // misaligned
    w = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out, 64);
    CHECK(w.stop == UnwindStop::kNoCfi);
    CHECK_EQ(w.depth, 4u);
    // A frame pointer that starts outside (code without frame pointers): pc only.
    regs.fp = 0x10;
    w = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out, 64);
    CHECK(w.stop == UnwindStop::kNoCfi);
    CHECK_EQ(w.depth, 1u);
}

TEST(fp_walk_unknown_bounds_and_zero_return) {
    FakeStack s;
    RegisterContext regs;
    regs.pc = 0x1000;
    regs.fp = s.build(4, 4, 0x2000);
    uint64_t out[8] = {};
    UnwindStatus w = walk_frame_pointers(StackReader{}, regs, StackBounds{}, out, 8);
    CHECK(w.stop == UnwindStop::kNoSnapshot);
    CHECK_EQ(w.depth, 1u);
    s.words[4 + 1 * 4 + 1] = 0;  // record 1's return address is 0: bottom
    w = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out, 8);
    CHECK(w.stop == UnwindStop::kBottom);
    CHECK_EQ(w.depth, 2u);
    w = walk_frame_pointers(StackReader{}, regs, StackBounds{s.lo(), s.hi()}, out, 0);
    CHECK_EQ(w.depth, 0u);
    CHECK(w.truncated);
}

namespace {

// A reader over the fake stack that counts its reads and refuses one address: the walk must
// read only through it and end where it fails.
struct CountingReader {
    uintptr_t refuse = 0;
    mutable uint32_t reads = 0;
    bool read(uintptr_t addr, void* out, size_t n) const {
        ++reads;
        if (addr == refuse) return false;
        std::memcpy(out, reinterpret_cast<const void*>(addr), n);
        return true;
    }
};

}  // namespace

TEST(fp_walk_reads_through_its_reader) {
    FakeStack s;
    RegisterContext regs;
    regs.pc = 0x1000;
    regs.fp = s.build(6, 4, 0x2000);
    uint64_t out[16] = {};
    CountingReader r;
    UnwindStatus w = walk_frame_pointers(r, regs, StackBounds{s.lo(), s.hi()}, out, 16);
    CHECK_EQ(w.depth, 7u);
    CHECK_EQ(r.reads, 6u);  // one read per record
    r.reads = 0;
    r.refuse = s.addr(4 + 3 * 4);  // record 3 unreadable
    w = walk_frame_pointers(r, regs, StackBounds{s.lo(), s.hi()}, out, 16);
    CHECK(w.stop == UnwindStop::kNoCfi);
    CHECK_EQ(w.depth, 4u);  // pc + records 0..2
}

TEST(fp_read_frame_record_floor) {
    FakeStack s;
    const uintptr_t fp = s.build(2, 4, 0x2000);
    const StackBounds b{s.lo(), s.hi()};
    FrameRecord rec;
    CHECK(read_frame_record(StackReader{}, fp, fp, b, &rec));  // at the floor: allowed
    CHECK_EQ(rec.ret, 0x2000ull);
    CHECK_EQ(rec.caller_fp, static_cast<uint64_t>(s.addr(8)));
    CHECK(!read_frame_record(StackReader{}, fp, fp + 1, b, &rec));  // below the floor
    CHECK(!read_frame_record(StackReader{}, 0, 0, b, &rec));         // null
}
