// stack_builder.h: one decoded record (header, raw Python frames, native pcs) -> a stack of frame ids.
//
// The drain hands every record that needs a stack to build(): the Python frames, leaf first
// in the record, become frame ids root first; with native frames (native mode) the two are
// interleaved in true call order: at each native frame inside the eval loop, the Python
// frames of that eval call. Frame ids come from a FrameNamer (the resolver in the extension,
// a fake in tests). A record without native frames asks the namer only for the frames it does
// not share, from the root, with the previous such record: consecutive records of a deep stack
// differ near the leaf, and naming 200 frames was most of the drain's cost per record. A raw
// frame (code, offset, fingerprint) names one frame for the namer's life (the resolver keeps
// the code objects it named alive), except the namer's unknown frame and the synthetic codes,
// which are asked again. PURE: no Python API, no globals, no clock; unit-tested in
// tests/native/test_stack_builder.cpp. Drain thread or stop(), GIL held (for the namer).
#pragma once

#include <cstdint>
#include <vector>

#include "../capture/sample_record.h"
#include "../unwind/eval_ranges.h"

namespace spprof {

// Names frames for the builder: returns interned frame ids.
class FrameNamer {
public:
    // A raw Python frame.
    virtual uint32_t python_frame(const RawFrame& raw) = 0;
    // Native address `pc` (already pc - 1 for a return address). *interpreter: the frame is
    // in the interpreter itself, folded away unless interpreter frames were asked for.
    virtual uint32_t native_frame(uint64_t pc, bool* interpreter) = 0;

protected:
    ~FrameNamer() = default;
};

struct StackBuilderConfig {
    uint32_t truncated_frame = 0;  // id standing for the lost root side of a deep or torn stack
    uint32_t no_python_frame = 0;  // id of the one frame of a sample without any frame
    bool interpreter_frames = false;  // keep CPython's own C frames (native mode)
    uint32_t unknown_frame = 0;       // the namer's id for a frame it could not name: asked again
};

class StackBuilder {
public:
    explicit StackBuilder(const StackBuilderConfig& config);

    // Native mode: where the eval loop lives (set once at start). Without ranges, Python
    // frames sit above the native ones.
    void set_eval_ranges(const EvalRanges& ranges) { eval_ = ranges; }
    const EvalRanges& eval_ranges() const { return eval_; }

    // The stack of one record, root first, never empty. `frames` holds hdr.depth RawFrames
    // (at most kMaxPythonFrames are used), then hdr.native_depth native pcs (at most
    // kMaxNativeFrames), both leaf first. The result lives until the next call.
    const std::vector<uint32_t>& build(const RawSampleHeader& hdr, const RawFrame* frames, FrameNamer& namer);
    // The addresses of the last build's frames, beside them (root first): a native frame's pc
    // as the namer was asked for it (a caller's return address - 1: inside its call), 0 for
    // any other frame. Empty when the record had no native frames.
    const std::vector<uint64_t>& pcs() const { return pcs_; }

private:
    void build_mixed(const RawSampleHeader& hdr, const RawFrame* frames, uint32_t depth, FrameNamer& namer);
    void build_python(const RawFrame* frames, uint32_t depth, FrameNamer& namer);

    StackBuilderConfig config_;
    EvalRanges eval_;
    std::vector<uint32_t> stack_;   // the result, root first
    std::vector<uint32_t> native_;  // leaf-first frame ids while interleaving
    std::vector<uint64_t> native_pcs_;  // beside native_: each one's pc (0: a Python frame)
    std::vector<uint64_t> pcs_;         // the result's addresses (pcs())
    void push_native(uint32_t id, uint64_t pc) {
        native_.push_back(id);
        native_pcs_.push_back(pc);
    }
    // The previous record without native frames: its frames and their ids, leaf first
    // (kNotKept where the namer must be asked again).
    static constexpr uint32_t kNotKept = 0xFFFFFFFFu;
    std::vector<RawFrame> memo_raw_;
    std::vector<uint32_t> memo_ids_;
};

}  // namespace spprof
