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

StackBuilder builder(bool interpreter_frames = false, bool with_eval = true) {
    StackBuilder b(StackBuilderConfig{kTruncated, kNoPython, interpreter_frames});
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
