// root_share.h: a record keeps only the Python frames its thread's previous record did not
// have at its root end.
//
// Consecutive samples of a thread share most of their stack: a loop 200 calls deep differs
// from its last sample in the leaf frame or two. Written whole, each record was 3.2 KB that
// the drain read back from another CPU's cache (half of its time per record) and that filled
// the ring, so the drain took the GIL more often. Now the writer compares its frames with the
// thread's last ones (its "base", kept root first) and commits only the frames that differ,
// leaf first as always, with `hdr.shared_root` saying how many root-side frames of the base
// complete them. The drain keeps the same base per thread and rebuilds the whole record.
//
// The rule both sides follow, record by record, in ring order: a record with frames (stored or
// shared) makes its whole frame list the base; a record without frames leaves the base as it
// is. The writer may share only while its base is the drain's: every committed record goes
// through root_share_match, whoever writes it (the thread's handler, the wall census's walks,
// the Mach sampler, registration: one at a time, each holding the ThreadCtx's busy_, so ring
// order is the order the base saw). A record the ring refuses is never matched: the space is
// reserved first.
//
// Writer half: SIGNAL-SAFE, NO-HEAP, bounded loops. Reader half: the drain, normal context.
// Pure; tested in tests/native/test_root_share.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "sample_record.h"

namespace spprof {

// A writer's base: its thread's last frames, root first. Storage of kMaxPythonFrames frames
// allocated with the ThreadCtx (touched only as deep as the thread's stacks go).
struct RootShareBase {
    RawFrame* frames = nullptr;
    uint32_t len = 0;
};

// Shorter runs are written whole: not worth a record's bookkeeping.
constexpr uint32_t kMinSharedFrames = 4;

// ---- writer side: SIGNAL-SAFE, NO-HEAP --------------------------------------------------
// `frames`: the `depth` frames, leaf first, of a record whose ring space is reserved. Returns
// how many root-side frames equal the base's (the record stores depth - shared, its leaf-side
// frames; 0 when the stack is the last one). The base becomes this record's frames either way.
inline uint32_t root_share_match(const RawFrame* frames, uint32_t depth, RootShareBase* base) {
    if (depth == 0) return 0;  // a record without frames leaves the base as it is
    if (base->frames == nullptr || depth > kMaxPythonFrames) {
        base->len = 0;
        return 0;
    }
    uint32_t shared = 0;
    const uint32_t most = depth < base->len ? depth : base->len;
    while (shared < most && std::memcmp(&frames[depth - 1 - shared], &base->frames[shared], sizeof(RawFrame)) == 0)
        ++shared;
    if (shared < kMinSharedFrames) shared = 0;
    // The base: its shared root part stays, the rest is this record's, root first.
    for (uint32_t j = shared; j < depth; ++j) base->frames[j] = frames[depth - 1 - j];
    base->len = depth;
    return shared;
}

// The signal handler's form, in the ring's space itself: `frames` holds `depth` frames leaf
// first, then `native_depth` pcs (uint64_t). root_share_match, then the pcs move down over the
// shared frames, so the record is laid out as stored.
inline uint32_t root_share_encode(RawFrame* frames, uint32_t depth, uint32_t native_depth, RootShareBase* base) {
    const uint32_t shared = root_share_match(frames, depth, base);
    if (shared != 0 && native_depth != 0)
        std::memmove(frames + (depth - shared), frames + depth, native_depth * sizeof(uint64_t));
    return shared;
}

// ---- reader side: the drain ------------------------------------------------------------
// One record as read from the ring (`hdr`, its stored frames and pcs after them) -> the whole
// record into `out` (header with the whole depth and shared_root 0, then frames leaf first,
// then pcs), the base updated. False when the record shares more frames than the base holds
// (a record missed: never by design): `out` then holds the stored frames only, flagged
// kSampleTruncated (the root side is lost), and the base is emptied, so that every record
// sharing from the writer's base, which this side no longer has, fails the same way until a
// whole record comes: a wrong root is never drawn.
inline bool root_share_decode(const RawSampleHeader& hdr, const RawFrame* stored, std::vector<RawFrame>* base,
                              RawSampleHeader* out_hdr, std::vector<RawFrame>* out) {
    *out_hdr = hdr;
    out_hdr->shared_root = 0;
    const uint32_t kept = hdr.depth;
    uint32_t shared = hdr.shared_root;
    bool whole = true;
    if (shared > base->size()) {
        shared = 0;
        whole = false;
        out_hdr->flags |= kSampleTruncated;
    }
    const uint32_t depth = kept + shared;
    const uint32_t native_depth = hdr.native_depth;
    // Frames leaf first, then the pcs, in RawFrame-sized units (a pc is 8 bytes: two per unit).
    out->resize(depth + (native_depth + 1) / 2);
    RawFrame* f = out->data();
    if (kept != 0) std::memcpy(f, stored, kept * sizeof(RawFrame));
    for (uint32_t i = kept; i < depth; ++i) f[i] = (*base)[depth - 1 - i];
    if (native_depth != 0) std::memcpy(f + depth, stored + kept, native_depth * sizeof(uint64_t));
    if (!whole) {
        base->clear();
    } else if (depth != 0) {
        base->resize(depth);
        for (uint32_t j = shared; j < depth; ++j) (*base)[j] = f[depth - 1 - j];
    }
    out_hdr->depth = static_cast<uint16_t>(depth);
    return whole;
}

}  // namespace spprof
