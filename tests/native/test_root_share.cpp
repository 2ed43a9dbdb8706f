// test_root_share.cpp: records keep only the frames their thread's previous record lacked at
// its root end, and the drain puts the whole record back (capture/root_share.h).
#include <cstdint>
#include <cstring>
#include <vector>

#include "capture/root_share.h"
#include "harness.h"

using spprof::kMaxPythonFrames;
using spprof::kSampleTruncated;
using spprof::RawFrame;
using spprof::RawSampleHeader;
using spprof::root_share_decode;
using spprof::root_share_encode;
using spprof::root_share_forget;
using spprof::RootShareBase;

namespace {

// The writer's side of one ring: a base as a ThreadCtx holds it.
struct Writer {
    std::vector<RawFrame> storage = std::vector<RawFrame>(kMaxPythonFrames);
    RootShareBase base{storage.data(), 0};
};

// A record as committed: header, then its stored frames and pcs (what the ring would hold).
struct Stored {
    RawSampleHeader hdr{};
    std::vector<RawFrame> body;  // frames, then pcs two to a RawFrame
};

// What the handler does: the whole record in the ring's space, encoded in place.
Stored write(Writer& w, const std::vector<RawFrame>& frames, const std::vector<uint64_t>& pcs, uint32_t flags = 0) {
    std::vector<RawFrame> space(kMaxPythonFrames + 64);
    if (!frames.empty()) std::memcpy(space.data(), frames.data(), frames.size() * sizeof(RawFrame));
    if (!pcs.empty()) std::memcpy(space.data() + frames.size(), pcs.data(), pcs.size() * sizeof(uint64_t));
    const auto depth = static_cast<uint32_t>(frames.size());
    const uint32_t shared = root_share_encode(space.data(), depth, static_cast<uint32_t>(pcs.size()), &w.base);
    Stored s;
    s.hdr.depth = static_cast<uint16_t>(depth - shared);
    s.hdr.shared_root = static_cast<uint16_t>(shared);
    s.hdr.native_depth = static_cast<uint16_t>(pcs.size());
    s.hdr.flags = flags;
    s.body.assign(space.begin(), space.begin() + (depth - shared) + (pcs.size() + 1) / 2);
    return s;
}

// The drain's side: the whole record back.
struct Reader {
    std::vector<RawFrame> base;
    RawSampleHeader hdr{};
    std::vector<RawFrame> out;
    bool read(const Stored& s) { return root_share_decode(s.hdr, s.body.data(), &base, &hdr, &out); }
    std::vector<RawFrame> frames() const { return std::vector<RawFrame>(out.begin(), out.begin() + hdr.depth); }
    std::vector<uint64_t> pcs() const {
        std::vector<uint64_t> p(hdr.native_depth);
        if (!p.empty()) std::memcpy(p.data(), out.data() + hdr.depth, p.size() * sizeof(uint64_t));
        return p;
    }
};

bool same(const std::vector<RawFrame>& a, const std::vector<RawFrame>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(RawFrame)) == 0);
}

// Writes `frames` (no pcs) and reads the record back: it shared `shared` frames and came back whole.
bool round_trip(Writer& w, Reader& r, const std::vector<RawFrame>& frames, uint32_t shared) {
    Stored s = write(w, frames, {});
    return s.hdr.shared_root == shared && r.read(s) && same(r.frames(), frames);
}

// `depth` frames leaf first; the root is code 1000, the leaf at offset `leaf_instr`.
std::vector<RawFrame> stack(uint32_t depth, uint32_t leaf_instr = 0) {
    std::vector<RawFrame> f;
    for (uint32_t i = depth; i-- > 0;) f.push_back(RawFrame{1000 + i, 2, 9});
    if (!f.empty()) f.front().instr = leaf_instr;
    return f;
}

}  // namespace

TEST(root_share_a_loop_deep_in_a_stack_stores_its_leaf_only) {
    Writer w;
    Reader r;
    Stored first = write(w, stack(200, 4), {});
    CHECK_EQ(first.hdr.depth, 200u);  // nothing to share yet
    CHECK_EQ(first.hdr.shared_root, 0u);
    CHECK(r.read(first));
    CHECK(same(r.frames(), stack(200, 4)));
    for (uint32_t k = 0; k < 50; ++k) {
        Stored s = write(w, stack(200, 5 + k % 3), {});
        CHECK_EQ(s.hdr.depth, 1u);
        CHECK_EQ(s.hdr.shared_root, 199u);
        CHECK(r.read(s));
        CHECK(same(r.frames(), stack(200, 5 + k % 3)));
    }
    // The same stack again: nothing stored.
    Stored again = write(w, stack(200, 5 + 49 % 3), {});  // the last record's
    CHECK_EQ(again.hdr.depth, 0u);
    CHECK_EQ(again.hdr.shared_root, 200u);
    CHECK(r.read(again));
    CHECK(same(r.frames(), stack(200, 5 + 49 % 3)));
}

TEST(root_share_native_pcs_move_down_with_the_kept_frames) {
    Writer w;
    Reader r;
    const std::vector<uint64_t> pcs = {0x1111, 0x2222, 0x3333};
    CHECK(r.read(write(w, stack(30), pcs)));
    Stored s = write(w, stack(32, 7), pcs);  // two calls deeper
    CHECK_EQ(s.hdr.shared_root, 29u);  // the old leaf's offset changed: it is stored again
    CHECK_EQ(s.hdr.depth, 3u);
    std::vector<uint64_t> stored(3);
    std::memcpy(stored.data(), s.body.data() + 3, sizeof(uint64_t) * 3);
    CHECK(stored == pcs);
    CHECK(r.read(s));
    CHECK(same(r.frames(), stack(32, 7)));
    CHECK(r.pcs() == pcs);
}

TEST(root_share_a_record_without_frames_leaves_both_bases) {
    Writer w;
    Reader r;
    CHECK(r.read(write(w, stack(50), {})));
    Stored idle = write(w, {}, {});
    CHECK_EQ(idle.hdr.depth, 0u);
    CHECK_EQ(idle.hdr.shared_root, 0u);
    CHECK(r.read(idle));
    CHECK_EQ(r.hdr.depth, 0u);
    CHECK(round_trip(w, r, stack(50, 1), 49));
}

TEST(root_share_short_runs_and_forgotten_bases_are_written_whole) {
    Writer w;
    Reader r;
    CHECK(r.read(write(w, stack(3), {})));
    Stored s = write(w, stack(3, 1), {});  // 2 shared: under kMinSharedFrames
    CHECK_EQ(s.hdr.shared_root, 0u);
    CHECK_EQ(s.hdr.depth, 3u);
    CHECK(r.read(s));
    // Another writer put a whole record in the ring: the handler's next one is whole.
    CHECK(r.read(write(w, stack(40), {})));
    root_share_forget(&w.base);
    Stored census;
    census.hdr.depth = 5;
    std::vector<RawFrame> walked = stack(5);
    census.body = walked;
    CHECK(r.read(census));
    CHECK(round_trip(w, r, stack(40, 3), 0));
}

TEST(root_share_a_missed_record_loses_the_root_never_draws_a_wrong_one) {
    Writer w;
    Reader r;
    CHECK(r.read(write(w, stack(20), {})));
    (void)write(w, stack(60), {});  // the reader never sees this one
    Stored s = write(w, stack(60, 5), {});
    CHECK_EQ(s.hdr.shared_root, 59u);
    CHECK(!r.read(s));  // the reader's base has 20 frames
    CHECK(r.hdr.flags & kSampleTruncated);
    CHECK_EQ(r.hdr.depth, 1u);
    // The reader's base is gone: a record sharing fewer frames than it had fails too.
    Stored t = write(w, stack(60, 6), {});
    CHECK(!r.read(t));
    // A whole record (after another writer's, say) puts both sides together again.
    root_share_forget(&w.base);
    CHECK(r.read(write(w, stack(10), {})));
    CHECK(round_trip(w, r, stack(10, 2), 9));
}

TEST(root_share_random_walks_read_back_whole) {
    // 20,000 records of a random walk (calls, returns, the leaf moving on, a root change now
    // and then, pcs, records without frames, census walks written whole in between): the
    // reader gets every record back as the writer walked it, and most are stored short.
    spprof_test::XorShift next{0x243F6A8885A308D3ull};
    Writer w;
    Reader r;
    std::vector<RawFrame> cur = stack(40);
    int right = 0;
    size_t stored_frames = 0, whole_frames = 0;
    for (int i = 0; i < 20000; ++i) {
        const uint32_t op = next(20);
        if (op < 5 && cur.size() < kMaxPythonFrames) {
            cur.insert(cur.begin(), RawFrame{next(50), next(6), 1});
        } else if (op < 10 && !cur.empty()) {
            cur.erase(cur.begin());
        } else if (op < 18 && !cur.empty()) {
            cur.front().instr = next(6);
        } else if (op == 18) {
            cur = stack(next(kMaxPythonFrames));
        }
        const bool census = next(40) == 0;
        const bool idle = next(30) == 0;
        std::vector<RawFrame> frames = idle ? std::vector<RawFrame>{} : cur;
        std::vector<uint64_t> pcs;
        for (uint32_t k = next(8) == 0 ? next(5) : 0; k > 0; --k) pcs.push_back(0x7000 + next(100));
        Stored s;
        if (census) {
            root_share_forget(&w.base);
            s.hdr.depth = static_cast<uint16_t>(frames.size());
            s.hdr.native_depth = static_cast<uint16_t>(pcs.size());
            s.body = frames;
            s.body.resize(frames.size() + (pcs.size() + 1) / 2);
            if (!pcs.empty()) std::memcpy(s.body.data() + frames.size(), pcs.data(), pcs.size() * sizeof(uint64_t));
        } else {
            s = write(w, frames, pcs);
        }
        stored_frames += s.hdr.depth;
        whole_frames += frames.size();
        right += r.read(s) && same(r.frames(), frames) && r.pcs() == pcs ? 1 : 0;
    }
    CHECK_EQ(right, 20000);
    CHECK(stored_frames * 4 < whole_frames);
}
