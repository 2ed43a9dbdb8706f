// stack_builder.cpp: records -> stacks of frame ids, with native/Python interleaving (see stack_builder.h).
#include "stack_builder.h"

#include <cstring>

namespace spprof {

StackBuilder::StackBuilder(const StackBuilderConfig& config) : config_(config) {
    stack_.reserve(kMaxPythonFrames + 1);
    memo_raw_.reserve(kMaxPythonFrames);
    memo_ids_.reserve(kMaxPythonFrames);
}

const std::vector<uint32_t>& StackBuilder::build(const RawSampleHeader& hdr, const RawFrame* frames,
                                                 FrameNamer& namer) {
    const uint32_t depth = hdr.depth <= kMaxPythonFrames ? hdr.depth : kMaxPythonFrames;
    pcs_.clear();
    if (hdr.native_depth > 0) {
        build_mixed(hdr, frames, depth, namer);
    } else {
        stack_.clear();
        if (hdr.flags & kSampleTruncated) stack_.push_back(config_.truncated_frame);
        build_python(frames, depth, namer);
    }
    // A thread caught with no Python frame at all (starting, ending, or C code between
    // two callbacks): its time is real, so it is kept under a frame that says so.
    if (stack_.empty()) stack_.push_back(config_.no_python_frame);  // pcs_ is empty then too
    return stack_;
}

void StackBuilder::build_python(const RawFrame* frames, uint32_t depth, FrameNamer& namer) {
    // How many root-side frames this record shares with the previous one (byte for byte).
    const uint32_t prev = static_cast<uint32_t>(memo_raw_.size());
    uint32_t shared = 0;
    while (shared < depth && shared < prev &&
           std::memcmp(&frames[depth - 1 - shared], &memo_raw_[prev - 1 - shared], sizeof(RawFrame)) == 0)
        ++shared;
    // Root first: the shared frames' ids from the memo, the rest from the namer.
    const size_t base = stack_.size();
    for (uint32_t j = 0; j < depth; ++j) {
        const RawFrame& raw = frames[depth - 1 - j];
        const uint32_t kept = j < shared ? memo_ids_[prev - 1 - j] : kNotKept;
        stack_.push_back(kept != kNotKept ? kept : namer.python_frame(raw));
    }
    // This record is the next one's memo (leaf first, as the ring holds it).
    memo_raw_.assign(frames, frames + depth);
    memo_ids_.resize(depth);
    for (uint32_t i = 0; i < depth; ++i) {
        const uint32_t id = stack_[base + depth - 1 - i];
        // Synthetic frames (a subinterpreter, <GC>, a thread's name) are named by more than
        // their raw words; an unknown frame may be named once its code is proven live.
        memo_ids_[i] = frames[i].code > kThreadNameFrameCode && id != config_.unknown_frame ? id : kNotKept;
    }
}

void StackBuilder::build_mixed(const RawSampleHeader& hdr, const RawFrame* frames, uint32_t depth,
                               FrameNamer& namer) {
    // Leaf to root over the native frames; at each eval-loop frame, the Python frames of that
    // eval call: from the next unused one up to and including the next entry frame (every
    // frame on 3.9/3.10, is_entry on 3.11, the frame under a C-stack shim on 3.12+). So a
    // C -> Python -> C -> Python chain reads in true call order. Result: stack_, root first.
    const auto* pcs = reinterpret_cast<const uint64_t*>(frames + hdr.depth);
    const uint32_t native_depth = hdr.native_depth <= kMaxNativeFrames ? hdr.native_depth : kMaxNativeFrames;
    native_.clear();
    native_pcs_.clear();
    // In its first and last instructions an eval call is on the native stack while the
    // thread's current frame is still (or again) its caller's: one eval call more than the
    // Python chain has, and it is the leaf-most one. Paired as is, every Python frame would
    // go to the eval call under its own, and C frames would be drawn above their callers.
    // That eval call is treated as interpreter code instead. (A torn or capped chain is short
    // of calls for other reasons: left as is.)
    bool skip_leaf_eval = false;
    if (eval_.count > 0 && !(hdr.flags & kSampleTruncated)) {
        uint32_t python_calls = 0;
        for (uint32_t i = 0; i < depth; ++i) python_calls += (frames[i].instr & kInstrEntryFlag) ? 1 : 0;
        if (depth > 0 && !(frames[depth - 1].instr & kInstrEntryFlag)) ++python_calls;  // an open group
        skip_leaf_eval = eval_calls_in(eval_, pcs, native_depth) == python_calls + 1;
    }
    uint32_t py = 0;
    size_t outermost_python = 0;  // native_ size right after the last Python frame pushed
    for (uint32_t i = 0; i < native_depth; ++i) {
        const uint64_t lookup = i == 0 ? pcs[i] : pcs[i] - 1;  // a return address points past the call
        if (eval_.count > 0 && is_eval_frame(eval_, lookup)) {
            if (config_.interpreter_frames) {
                bool interp = false;
                push_native(namer.native_frame(lookup, &interp), lookup);
            }
            if (skip_leaf_eval) {  // no Python frame of its own
                skip_leaf_eval = false;
                continue;
            }
            while (py < depth) {
                const RawFrame& f = frames[py++];
                push_native(namer.python_frame(f), 0);
                outermost_python = native_.size();
                if (f.instr & kInstrEntryFlag) break;
            }
            continue;
        }
        bool interpreter = false;
        const uint32_t id = namer.native_frame(lookup, &interpreter);
        if (interpreter && !config_.interpreter_frames) continue;  // CPython's own C frames
        push_native(id, lookup);
    }
    // Python frames the native walk did not reach (it stopped early, or no eval ranges are
    // known) go at the root end, where they belong.
    while (py < depth) {
        push_native(namer.python_frame(frames[py++]), 0);
        outermost_python = native_.size();
    }
    // Native frames rootward of the outermost Python frame are process or thread start-up
    // (_start, main, clone): folded unless interpreter frames were asked for.
    if (outermost_python > 0 && !config_.interpreter_frames) {
        native_.resize(outermost_python);
        native_pcs_.resize(outermost_python);
    }
    stack_.clear();
    if (hdr.flags & kSampleTruncated) {
        stack_.push_back(config_.truncated_frame);
        pcs_.push_back(0);
    }
    for (size_t i = native_.size(); i-- > 0;) {
        stack_.push_back(native_[i]);
        pcs_.push_back(native_pcs_[i]);
    }
}

}  // namespace spprof
