// test_root_share.cpp: records keep only the frames their thread's previous record lacked at
// its root end, whichever writer wrote them, and the drain puts the whole record back
// (capture/root_share.h, capture/record_writer.h).
#include <cstdint>
#include <cstring>
#include <vector>

#include "capture/record_writer.h"
#include "capture/root_share.h"
#include "harness.h"

using spprof::kMaxPythonFrames;
using spprof::kSampleTruncated;
using spprof::RawFrame;
using spprof::RawSampleHeader;
using spprof::root_share_decode;
using spprof::root_share_encode;
using spprof::RingBuffer;
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

// What the other writers do (the wall census, the Mach sampler, registration): the record
// copied into the ring by write_record with the ring's base. Read back as the ring holds it.
// False when the ring refused it.
bool write_apart(Writer& w, RingBuffer& ring, const std::vector<RawFrame>& frames, const std::vector<uint64_t>& pcs,
                 Stored* out) {
    RawSampleHeader h{};
    h.depth = static_cast<uint16_t>(frames.size());
    h.native_depth = static_cast<uint16_t>(pcs.size());
    if (!spprof::write_record(ring, h, frames.empty() ? nullptr : frames.data(), pcs.empty() ? nullptr : pcs.data(),
                              &w.base))
        return false;
    size_t size = 0;
    const auto* p = static_cast<const unsigned char*>(ring.peek(&size));
    std::memcpy(&out->hdr, p, sizeof out->hdr);
    const size_t body = out->hdr.depth + (out->hdr.native_depth + 1u) / 2;
    out->body.assign(body, RawFrame{});
    const size_t bytes = out->hdr.depth * sizeof(RawFrame) + out->hdr.native_depth * sizeof(uint64_t);
    if (bytes != 0) std::memcpy(out->body.data(), p + sizeof out->hdr, bytes);
    ring.pop();
    return true;
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

// A record stored `depth` frames sharing `shared`, and reads back as `frames`.
bool reads_back(Reader& r, const Stored& s, uint32_t shared, uint32_t depth, const std::vector<RawFrame>& frames) {
    return s.hdr.shared_root == shared && s.hdr.depth == depth && r.read(s) && same(r.frames(), frames);
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

TEST(root_share_short_runs_are_written_whole) {
    Writer w;
    Reader r;
    CHECK(r.read(write(w, stack(3), {})));
    CHECK(reads_back(r, write(w, stack(3, 1), {}), 0, 3, stack(3, 1)));  // 2 shared: under kMinSharedFrames
}

TEST(root_share_every_writer_of_a_ring_shares_one_base) {
    // The handler's records and a census walk's (or the Mach sampler's, or registration's) in
    // one ring: each stores what the ring's last record lacked, whoever wrote that one.
    Writer w;
    Reader r;
    RingBuffer ring(1 << 16);
    CHECK(r.read(write(w, stack(200, 4), {})));
    Stored walk;
    CHECK(write_apart(w, ring, stack(200, 6), {}, &walk));  // blocked one line on
    CHECK(reads_back(r, walk, 199, 1, stack(200, 6)));
    Stored again;
    CHECK(write_apart(w, ring, stack(200, 6), {0xAAA, 0xBBB}, &again));  // still there: nothing stored
    CHECK_EQ(again.hdr.depth, 0u);
    CHECK_EQ(again.hdr.shared_root, 200u);
    CHECK_EQ(again.hdr.native_depth, 2u);
    CHECK(r.read(again));
    CHECK(same(r.frames(), stack(200, 6)));
    CHECK(r.pcs() == (std::vector<uint64_t>{0xAAA, 0xBBB}));
    // The handler's next record shares with the walk's frames.
    CHECK(round_trip(w, r, stack(201, 1), 199));
    // A record without frames (an idle census record) leaves both bases.
    Stored idle;
    CHECK(write_apart(w, ring, {}, {}, &idle));
    CHECK(r.read(idle));
    CHECK(round_trip(w, r, stack(201, 2), 200));
}

TEST(root_share_a_record_the_ring_refuses_leaves_the_base_alone) {
    Writer w;
    Reader r;
    RingBuffer ring(4096);  // records up to half of it: 120 frames fit, one at a time
    Stored first;
    CHECK(write_apart(w, ring, stack(100, 1), {}, &first));
    CHECK(r.read(first));
    // Fill the ring, then a record it refuses: another stack entirely, never read.
    RawSampleHeader h{};
    std::vector<RawFrame> filler(100);
    h.depth = 100;
    while (spprof::write_record(ring, h, filler.data(), nullptr)) {
    }
    Stored refused;
    CHECK(!write_apart(w, ring, stack(120, 3), {}, &refused));
    size_t size = 0;
    while (ring.peek(&size) != nullptr) ring.pop();  // the drain empties it
    // The next record shares with the first, as the reader's base has it.
    Stored next;
    CHECK(write_apart(w, ring, stack(100, 2), {}, &next));
    CHECK(reads_back(r, next, 99, 1, stack(100, 2)));
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
    // A record with another root is whole: both sides are together again.
    std::vector<RawFrame> other = stack(10);
    for (RawFrame& f : other) f.code += 5000;
    CHECK(round_trip(w, r, other, 0));
    other.front().instr = 4;
    CHECK(round_trip(w, r, other, 9));
}

TEST(root_share_random_walks_read_back_whole) {
    // 20,000 records of a random walk (calls, returns, the leaf moving on, a root change now
    // and then, pcs, records without frames, census walks written by write_record in between):
    // the reader gets every record back as the writer walked it, and most are stored short.
    spprof_test::XorShift next{0x243F6A8885A308D3ull};
    Writer w;
    Reader r;
    RingBuffer ring(1 << 16);
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
            CHECK(write_apart(w, ring, frames, pcs, &s));
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
