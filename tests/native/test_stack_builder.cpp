// test_stack_builder.cpp: records -> stacks of frame ids: Python frames root first, the
// truncation and no-frame markers, and native/Python interleaving at eval-loop frames.
#include <cstdint>
#include <cstring>
#include <vector>

#include "harness.h"
#include "session/stack_builder.h"

using spprof::EvalRanges;
using spprof::FrameNamer;
using spprof::kInstrEntryFlag;
using spprof::kSampleTruncated;
using spprof::RawFrame;
using spprof::RawSampleHeader;
using spprof::StackBuilder;
using spprof::StackBuilderConfig;

namespace {

constexpr uint32_t kTruncated = 1;
constexpr uint32_t kNoPython = 2;
// Made-up ids: a Python frame's id is 1000 + its code pointer; a native frame's 5000 + pc.
// Native pcs at or above kInterpLo are "inside the interpreter".
constexpr uint64_t kInterpLo = 900;
constexpr uint64_t kEvalLo = 100, kEvalHi = 200;  // the eval loop's one range

class FakeNamer final : public FrameNamer {
public:
    uint32_t python_frame(const RawFrame& raw) override { return 1000 + static_cast<uint32_t>(raw.code); }
    uint32_t native_frame(uint64_t pc, bool* interpreter) override {
        *interpreter = pc >= kInterpLo;
        native_pcs.push_back(pc);
        return 5000 + static_cast<uint32_t>(pc);
    }
    std::vector<uint64_t> native_pcs;  // what was looked up, in order
};

// A record in memory as the ring holds it: header, frames (leaf first), native pcs (leaf first).
struct Record {
    RawSampleHeader hdr{};
    std::vector<unsigned char> body;

    Record(const std::vector<RawFrame>& frames, const std::vector<uint64_t>& pcs, uint32_t flags = 0) {
        hdr.depth = static_cast<uint16_t>(frames.size());
        hdr.native_depth = static_cast<uint16_t>(pcs.size());
        hdr.flags = flags;
        body.resize(frames.size() * sizeof(RawFrame) + pcs.size() * sizeof(uint64_t));
        if (!frames.empty()) std::memcpy(body.data(), frames.data(), frames.size() * sizeof(RawFrame));
        if (!pcs.empty())
            std::memcpy(body.data() + frames.size() * sizeof(RawFrame), pcs.data(), pcs.size() * sizeof(uint64_t));
    }
    const RawFrame* frames() const { return reinterpret_cast<const RawFrame*>(body.data()); }
};

RawFrame py(uint64_t code, bool entry = false) { return RawFrame{code, entry ? kInstrEntryFlag : 0u, 0}; }

// The namer's unknown frame is 0 (CountingNamer below): asked again, never kept.
StackBuilder builder(bool interpreter_frames = false, bool with_eval = true) {
    StackBuilder b(StackBuilderConfig{kTruncated, kNoPython, interpreter_frames, 0});
    if (with_eval) {
        EvalRanges r;
        r.count = 1;
        r.lo[0] = kEvalLo;
        r.hi[0] = kEvalHi;
        b.set_eval_ranges(r);
    }
    return b;
}

bool same(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) { return a == b; }

}  // namespace

TEST(stack_builder_python_frames_root_first) {
    FakeNamer n;
    StackBuilder b = builder();
    Record r({py(3), py(2), py(1)}, {});  // leaf 3, root 1
    CHECK(same(b.build(r.hdr, r.frames(), n), {1001, 1002, 1003}));
    CHECK(n.native_pcs.empty());
}

TEST(stack_builder_truncated_marker_at_root) {
    FakeNamer n;
    StackBuilder b = builder();
    Record r({py(2), py(1)}, {}, kSampleTruncated);
    CHECK(same(b.build(r.hdr, r.frames(), n), {kTruncated, 1001, 1002}));
}

TEST(stack_builder_no_frame_is_one_marker) {
    FakeNamer n;
    StackBuilder b = builder();
    Record r({}, {});
    CHECK(same(b.build(r.hdr, r.frames(), n), {kNoPython}));
    // Truncated with no frame is still a stack: the marker alone.
    Record t({}, {}, kSampleTruncated);
    CHECK(same(b.build(t.hdr, t.frames(), n), {kTruncated}));
}

TEST(stack_builder_depth_capped_at_max_python_frames) {
    FakeNamer n;
    StackBuilder b = builder();
    std::vector<RawFrame> frames;
    for (uint32_t i = 0; i < spprof::kMaxPythonFrames + 10; ++i) frames.push_back(py(i));
    Record r(frames, {});
    const std::vector<uint32_t>& s = b.build(r.hdr, r.frames(), n);
    CHECK_EQ(s.size(), static_cast<size_t>(spprof::kMaxPythonFrames));
    CHECK_EQ(s.front(), 1000u + spprof::kMaxPythonFrames - 1);  // the root side is cut
    CHECK_EQ(s.back(), 1000u);
}

TEST(stack_builder_interleaves_at_eval_frames) {
    // C leaf (10) -> eval (150: Python 3 and 2, 2 the entry) -> C (20) -> eval (160: Python 1)
    // -> start-up (30). Read root first: Python 1, C 20, Python 2, Python 3, C 10; the
    // start-up frame rootward of the outermost Python frame is folded.
    FakeNamer n;
    StackBuilder b = builder();
    Record r({py(3), py(2, true), py(1, true)}, {10, 151, 21, 161, 31});
    CHECK(same(b.build(r.hdr, r.frames(), n), {1001, 5020, 1002, 1003, 5010}));
    // The leaf pc as is, return addresses minus one.
    CHECK(n.native_pcs == std::vector<uint64_t>({10, 20, 30}));
}

TEST(stack_builder_keeps_each_native_frame_s_address_beside_it) {
    // The interleaved stack of the test above: each native frame's pc as the namer was asked
    // for it (pprof's locations), 0 beside the Python frames; the folded start-up frame's pc
    // goes with it. A Python-only record has no addresses.
    FakeNamer n;
    StackBuilder b = builder();
    Record r({py(3), py(2, true), py(1, true)}, {10, 151, 21, 161, 31});
    b.build(r.hdr, r.frames(), n);
    CHECK(b.pcs() == std::vector<uint64_t>({0, 20, 0, 0, 10}));
    Record t({py(1, true)}, {10, 151}, kSampleTruncated);
    CHECK(same(b.build(t.hdr, t.frames(), n), {kTruncated, 1001, 5010}));
    CHECK(b.pcs() == std::vector<uint64_t>({0, 0, 10}));
    Record p({py(2), py(1)}, {});
    b.build(p.hdr, p.frames(), n);
    CHECK(b.pcs().empty());
    // Interpreter frames kept: theirs too, the eval frame's included.
    StackBuilder keep = builder(true);
    Record k({py(1, true)}, {901, 151, 31});
    CHECK(same(keep.build(k.hdr, k.frames(), n), {5030, 1001, 5150, 5901}));
    CHECK(keep.pcs() == std::vector<uint64_t>({30, 0, 150, 901}));
}

TEST(stack_builder_drops_interpreter_frames_unless_asked) {
    FakeNamer n;
    StackBuilder b = builder();
    Record r({py(1, true)}, {901, 151, 31});  // leaf inside the interpreter
    CHECK(same(b.build(r.hdr, r.frames(), n), {1001}));

    FakeNamer m;
    StackBuilder keep = builder(true);
    // Kept: the interpreter frame, the eval frame itself, and the start-up frame at the root.
    CHECK(same(keep.build(r.hdr, r.frames(), m), {5030, 1001, 5150, 5901}));
}

TEST(stack_builder_python_frames_not_reached_go_to_root) {
    // No eval ranges known: every Python frame sits rootward of the native ones.
    FakeNamer n;
    StackBuilder b = builder(false, false);
    Record r({py(2), py(1)}, {10, 21});
    CHECK(same(b.build(r.hdr, r.frames(), n), {1001, 1002, 5020, 5010}));
}

TEST(stack_builder_mixed_truncated_marker_and_native_cap) {
    FakeNamer n;
    StackBuilder b = builder();
    std::vector<uint64_t> pcs;
    for (uint32_t i = 0; i < spprof::kMaxNativeFrames + 5; ++i) pcs.push_back(300 + i);
    Record r({py(1)}, pcs, kSampleTruncated);
    const std::vector<uint32_t>& s = b.build(r.hdr, r.frames(), n);
    CHECK_EQ(n.native_pcs.size(), static_cast<size_t>(spprof::kMaxNativeFrames));
    CHECK_EQ(s.size(), static_cast<size_t>(spprof::kMaxNativeFrames) + 2);  // marker, Python 1, the native frames
    CHECK_EQ(s[0], kTruncated);
    CHECK_EQ(s[1], 1001u);
    CHECK_EQ(s.back(), 5300u);
}

TEST(stack_builder_eval_call_entering_or_leaving_is_interpreter_code) {
    // Python 2 (called from C 20) returned; its eval call (151) is still on the native stack
    // and the thread's frame is Python 1's again: 3 eval calls, 2 Python calls. The leaf-most
    // eval call is the extra one; C 20 stays above Python 1, not above Python 0.
    FakeNamer n;
    StackBuilder b = builder();
    Record r({py(1, true), py(0, true)}, {151, 21, 161, 171, 31});
    CHECK(same(b.build(r.hdr, r.frames(), n), {1000, 1001, 5020}));
    // Kept as interpreter code when asked for: the eval frame itself, no Python frame in it.
    FakeNamer m;
    StackBuilder keep = builder(true);
    CHECK(same(keep.build(r.hdr, r.frames(), m), {5030, 1000, 5170, 1001, 5160, 5020, 5151}));
    // A torn chain is short of calls for other reasons: paired as is.
    FakeNamer t;
    Record torn({py(1, true), py(0, true)}, {151, 21, 161, 171, 31}, kSampleTruncated);
    CHECK(same(b.build(torn.hdr, torn.frames(), t), {kTruncated, 1000, 5020, 1001}));
}

namespace {

// Names Python frames by code and offset, counting what it is asked; a code in `unknown` is
// not named (the resolver's kUnknownFrame, 0, configured below).
class CountingNamer final : public FrameNamer {
public:
    uint32_t python_frame(const RawFrame& raw) override {
        ++asked;
        for (uint64_t u : unknown)
            if (raw.code == u) return 0;
        return 1000 + static_cast<uint32_t>(raw.code) * 64 + raw.instr;
    }
    uint32_t native_frame(uint64_t pc, bool* interpreter) override {
        *interpreter = false;
        return 500000 + static_cast<uint32_t>(pc);
    }
    int asked = 0;
    std::vector<uint64_t> unknown;
};

// A stack of `depth` frames, leaf first: codes 10.. from the root, the leaf at offset `leaf_instr`.
std::vector<RawFrame> deep(uint32_t depth, uint32_t leaf_instr = 0) {
    std::vector<RawFrame> f;
    for (uint32_t i = depth; i-- > 0;) f.push_back(RawFrame{10 + i, 0, 7});
    f.front().instr = leaf_instr;
    return f;
}

}  // namespace

TEST(stack_builder_a_record_sharing_its_root_side_names_only_the_rest) {
    CountingNamer n;
    StackBuilder b = builder();
    Record first(deep(200, 3), {});
    const std::vector<uint32_t> whole = b.build(first.hdr, first.frames(), n);
    CHECK_EQ(n.asked, 200);
    // The same record again: nothing asked, the same stack.
    n.asked = 0;
    CHECK(same(b.build(first.hdr, first.frames(), n), whole));
    CHECK_EQ(n.asked, 0);
    // The leaf moved on in its function: one frame asked.
    Record moved(deep(200, 5), {});
    const std::vector<uint32_t>& m = b.build(moved.hdr, moved.frames(), n);
    CHECK_EQ(n.asked, 1);
    CHECK_EQ(m.back(), 1000u + (10 + 199) * 64 + 5);
    CHECK(std::equal(m.begin(), m.end() - 1, whole.begin()));
    // Two calls deeper: the two new frames and the caller whose offset changed are asked.
    n.asked = 0;
    std::vector<RawFrame> deeper = deep(202, 0);
    Record d(deeper, {});
    CHECK_EQ(b.build(d.hdr, d.frames(), n).size(), 202u);
    CHECK_EQ(n.asked, 3);
    // Back up to depth 150: every frame shared, nothing asked.
    n.asked = 0;
    std::vector<RawFrame> up(deeper.end() - 150, deeper.end());
    Record u(up, {});
    const std::vector<uint32_t>& us = b.build(u.hdr, u.frames(), n);
    CHECK_EQ(n.asked, 0);
    CHECK(std::equal(us.begin(), us.end(), whole.begin()));
    // Another root: nothing is shared, every frame asked.
    n.asked = 0;
    std::vector<RawFrame> other = deep(150);
    other.back().code = 9;
    Record o(other, {});
    b.build(o.hdr, o.frames(), n);
    CHECK_EQ(n.asked, 150);
}

TEST(stack_builder_asks_again_for_unknown_and_synthetic_frames) {
    CountingNamer n;
    n.unknown = {50};
    StackBuilder b = builder();
    std::vector<RawFrame> f = deep(60);
    f.insert(f.begin(), RawFrame{spprof::kThreadNameFrameCode, 0, 0});  // a thread's name at the leaf
    f.push_back(RawFrame{spprof::kGcFrameCode, 0, 0});                  // synthetic at the root
    Record r(f, {});
    b.build(r.hdr, r.frames(), n);
    CHECK_EQ(n.asked, 62);
    // Once its code is named (proven live), the unknown frame gets its name.
    n.asked = 0;
    n.unknown.clear();
    const std::vector<uint32_t>& s = b.build(r.hdr, r.frames(), n);
    CHECK_EQ(n.asked, 3);  // the <GC> root, the frame of code 50, the thread's name
    CHECK_EQ(s[1 + 40], 1000u + 50 * 64);  // code 50: after <GC> and codes 10-49
}

TEST(stack_builder_memo_keeps_the_truncated_marker_apart) {
    CountingNamer n;
    StackBuilder b = builder();
    Record plain(deep(20), {});
    Record cut(deep(20), {}, kSampleTruncated);
    const std::vector<uint32_t> p = b.build(plain.hdr, plain.frames(), n);
    const std::vector<uint32_t>& c = b.build(cut.hdr, cut.frames(), n);
    CHECK_EQ(n.asked, 20);
    CHECK_EQ(c.size(), 21u);
    CHECK_EQ(c[0], kTruncated);
    CHECK(std::equal(c.begin() + 1, c.end(), p.begin()));
    CHECK(same(b.build(plain.hdr, plain.frames(), n), p));
    CHECK_EQ(n.asked, 20);
}

TEST(stack_builder_with_memo_builds_what_a_fresh_builder_builds) {
    // 5,000 records of a random walk (calls, returns, the leaf moving on, a few unknown codes,
    // now and then a record with native frames, a truncated one, one without frames): each
    // stack equals what a builder that never saw a record before builds from it.
    spprof_test::XorShift next{0x9E3779B97F4A7C15ull};
    CountingNamer n;
    n.unknown = {17, 23};
    StackBuilder b = builder();
    std::vector<RawFrame> stack = deep(30);  // leaf first
    int checked = 0;
    for (int i = 0; i < 5000; ++i) {
        const uint32_t op = next(10);
        if (op < 3 && stack.size() < 300) {
            stack.insert(stack.begin(), RawFrame{4 + next(40), next(8), next(2)});
        } else if (op < 6 && stack.size() > 1) {
            stack.erase(stack.begin());
        } else if (!stack.empty()) {
            stack.front().instr = next(8) | (next(4) == 0 ? kInstrEntryFlag : 0u);
        }
        std::vector<uint64_t> pcs;
        if (next(20) == 0) pcs = {150, 40, 160};
        const uint32_t flags = next(15) == 0 ? kSampleTruncated : 0u;
        Record r(next(50) == 0 ? std::vector<RawFrame>{} : stack, pcs, flags);
        const std::vector<uint32_t> got = b.build(r.hdr, r.frames(), n);
        StackBuilder fresh = builder();
        CountingNamer m;
        m.unknown = n.unknown;
        checked += same(got, fresh.build(r.hdr, r.frames(), m)) ? 1 : 0;
    }
    CHECK_EQ(checked, 5000);
}
