// stack_store.h: interned stacks and the compact sample log of a session.
//
// A stack is a root-first sequence of frame ids, stored once, with (native mode) the address
// each native frame was sampled at: two samples in one function at two addresses are two
// stacks of the same frames, so outputs that merge by function (every one but pprof's
// locations) see one row. A sample is 24 bytes naming its
// stack, thread, time and weight. Memory therefore grows with the number of distinct stacks
// plus a small fixed cost per sample, and the session's memory limit is enforced here. A
// blocked thread's run of idle samples on one stack is folded into one row (fold_into), so
// a wait costs one row however long it lasts, in the store, in the profile stop() returns
// (copy_rows, folds), in the exit dump's file and in every output (a writer draws a wait as
// one span): a folded sample costs no memory and memory_bytes() does not count it.
// Threads: the drain only, GIL held.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spprof {

struct SampleRow {
    uint64_t timestamp_ns;
    uint64_t weight_ns;
    uint32_t stack;
    uint32_t thread_and_flags;  // serial in the low 24 bits, SampleFlags in the high 8
};
static_assert(sizeof(SampleRow) == 24, "exported as packed bytes");

constexpr uint32_t kSerialBits = 24;
constexpr uint32_t kSerialMask = (1u << kSerialBits) - 1;

class StackStore {
public:
    // Returns the id of the stack made of frames[0..n) (root first), at addresses pcs[0..n)
    // beside them (0 for a frame without one; null: none has one).
    uint32_t intern(const uint32_t* frames, uint32_t n, const uint64_t* pcs = nullptr);
    size_t stack_count() const { return offsets_.size(); }
    // Frames of stack `id`: [begin, end) into pool().
    uint32_t begin(uint32_t id) const { return offsets_[id]; }
    uint32_t end(uint32_t id) const { return id + 1 < offsets_.size() ? offsets_[id + 1] : static_cast<uint32_t>(pool_.size()); }
    const std::vector<uint32_t>& pool() const { return pool_; }
    // The addresses beside stack `id`'s frames ([begin, end) into them), or null when no
    // stack of this store has any (pc_pool_ is only made for the first stack with one).
    const uint64_t* pcs(uint32_t id) const { return with_pcs_ ? pc_pool_.data() + begin(id) : nullptr; }

    // The sample log: fixed-size blocks, so growth never copies or doubles the footprint.
    static constexpr size_t kRowsPerBlock = 4096;  // 96 KiB a block: small steps against the limit
    void add_sample(const SampleRow& row) {
        if (rows_ % kRowsPerBlock == 0) blocks_.emplace_back(new SampleRow[kRowsPerBlock]);
        blocks_.back()[rows_ % kRowsPerBlock] = row;
        ++rows_;
    }
    // Samples the store stands for: its rows, each folded row counted as the samples it holds.
    size_t sample_count() const { return rows_ + folded_extra_; }
    const SampleRow& sample(size_t i) const { return blocks_[i / kRowsPerBlock][i % kRowsPerBlock]; }
    // Copies every sample, in order, into out (sample_count() rows): a folded row comes out as
    // the samples it holds (see fold_into), cut as a window cuts it. Nothing exports this any
    // more (stop(), windows and the exit dump keep rows with their counts): it is the native
    // tests' reference for the cut (piece) that windows and _rows.pieces make.
    void copy_samples(SampleRow* out) const;
    // Copies the rows as held, in order, into out (row_count() rows): a folded row once, with
    // its whole wait's weight and span; folds() says how many samples it holds. stop() exports
    // these, so a wait folded into one row stays one row in the profile (Python expands it
    // only where a writer reads samples one by one).
    void copy_rows(SampleRow* out) const;
    // Each row holding more than one sample: (row index, samples it holds), by row index.
    std::vector<std::pair<size_t, uint64_t>> folds() const;
    // Appends to out the samples copy_samples() would give whose time is in [t0_ns, t1_ns]
    // and whose thread record id `keep_thread(id)` accepts (a window on the session). A folded
    // row's samples in the window stay one row, spanning them, and (out index, how many) goes
    // to `folds`: a window over a minute of 5,000 blocked threads is 5,000 rows, not 30 M.
    // Rows are read from first_row_for(t0_ns) on, plus the folded rows before it (their time
    // moves on with their wait), in row order: a window's cost follows the rows since its
    // start, not the session's length.
    template <class KeepThread>
    void copy_samples_between(uint64_t t0_ns, uint64_t t1_ns, KeepThread keep_thread, std::vector<SampleRow>* out,
                              std::vector<std::pair<size_t, uint64_t>>* folds) const {
        const size_t first = first_row_for(t0_ns);
        if (first > 0 && !folded_.empty()) {
            std::vector<size_t> early;
            for (const auto& kv : folded_)
                if (kv.first < first) early.push_back(kv.first);
            std::sort(early.begin(), early.end());
            for (const size_t i : early) copy_row_between(i, t0_ns, t1_ns, keep_thread, out, folds);
        }
        for (size_t i = first; i < rows_; ++i) copy_row_between(i, t0_ns, t1_ns, keep_thread, out, folds);
    }
    // Time marks, for windows: the drain notes (now, rows held) before each pass, at most one
    // mark per kRowsPerMark rows. Every row is stamped no later than it is added, so the rows
    // before a mark are all older than the mark, except folded rows (handled apart).
    static constexpr size_t kRowsPerMark = 1024;
    void mark_time(uint64_t now_ns) {
        const size_t since = marks_.empty() ? rows_ : rows_ - marks_.back().rows;
        if (since >= kRowsPerMark) marks_.push_back(TimeMark{now_ns, rows_});
    }
    // The first row a window starting at t0_ns can need (0: scan from the start). Marks are
    // trusted only kMarkSlackNs before t0, against any skew between the clocks of a mark and
    // of a sample.
    static constexpr uint64_t kMarkSlackNs = 50000000;
    size_t first_row_for(uint64_t t0_ns) const {
        if (t0_ns <= kMarkSlackNs) return 0;
        const uint64_t before = t0_ns - kMarkSlackNs;
        // The last mark stamped before `before` (marks are in time order).
        const auto it = std::partition_point(marks_.begin(), marks_.end(),
                                             [before](const TimeMark& m) { return m.time_ns < before; });
        return it == marks_.begin() ? 0 : std::prev(it)->rows;
    }
    size_t mark_count() const { return marks_.size(); }

    // Rows held (a folded row is one), and the samples folded into rows that held one already.
    size_t row_count() const { return rows_; }
    size_t folded_samples() const { return folded_extra_; }
    // Folds one more sample into row `i` (a blocked thread's idle sample on the stack of its
    // previous idle row, wall mode: sample_drain.h): the row's weight grows by weight_ns and
    // its time moves to timestamp_ns, so the row spans the whole wait; the store keeps how
    // many samples the row holds. copy_samples() gives them back as that many samples, evenly
    // spaced over the row's span and sharing its weight (the remainder on the last), so every
    // count, weight and span an output shows is what the separate rows showed. No memory:
    // a count in the row's entry of folded_.
    // `count`: samples folded in at once (a census record that stands for several censuses).
    void fold_into(size_t i, uint64_t timestamp_ns, uint64_t weight_ns, uint64_t count = 1);

    size_t memory_bytes() const {
        return pool_.capacity() * 4 + pc_pool_.capacity() * 8 + offsets_.capacity() * 4 + index_.size() * 48 + marks_.capacity() * sizeof(TimeMark) +
               blocks_.size() * kRowsPerBlock * sizeof(SampleRow) + folded_.size() * kFoldedNodeBytes;
    }

private:
    struct TimeMark {
        uint64_t time_ns;
        size_t rows;
    };
    template <class KeepThread>
    void copy_row_between(size_t i, uint64_t t0_ns, uint64_t t1_ns, KeepThread& keep_thread,
                          std::vector<SampleRow>* out, std::vector<std::pair<size_t, uint64_t>>* folds) const {
        const SampleRow& row = sample(i);
        if (!keep_thread(row.thread_and_flags & kSerialMask)) return;
        const auto it = folded_.empty() ? folded_.end() : folded_.find(i);
        const uint64_t n = it == folded_.end() ? 1 : it->second + 1;
        if (n == 1) {
            if (row.timestamp_ns >= t0_ns && row.timestamp_ns <= t1_ns) out->push_back(row);
            return;
        }
        // A wait folded for minutes holds thousands of samples and a window wants some: the
        // pieces' times grow with k, so start just before t0 and stop past t1. Those inside
        // become one row ending at the last of them and weighing what they weigh.
        SampleRow span = row;
        span.weight_ns = 0;
        uint64_t inside = 0;
        for (uint64_t k = first_piece_at(row, n, t0_ns); k < n; ++k) {
            const SampleRow p = piece(row, n, k);
            if (p.timestamp_ns > t1_ns) break;
            if (p.timestamp_ns < t0_ns) continue;
            span.timestamp_ns = p.timestamp_ns;
            span.weight_ns += p.weight_ns;
            ++inside;
        }
        if (inside == 0) return;
        if (inside > 1) folds->emplace_back(out->size(), inside);
        out->push_back(span);
    }
    // A k no later than the first piece of the row's n stamped at or after t0 (see piece()).
    static uint64_t first_piece_at(const SampleRow& row, uint64_t n, uint64_t t0_ns);
    // Sample k of the n a folded row holds (see fold_into).
    static SampleRow piece(const SampleRow& row, uint64_t n, uint64_t k);
    static uint64_t hash(const uint32_t* frames, uint32_t n, const uint64_t* pcs);
    bool equal(uint32_t id, const uint32_t* frames, uint32_t n, const uint64_t* pcs) const;

    std::vector<uint32_t> pool_;
    std::vector<uint64_t> pc_pool_;  // beside pool_ once a stack had an address; else empty
    bool with_pcs_ = false;
    std::vector<uint32_t> offsets_;
    std::unordered_multimap<uint64_t, uint32_t> index_;
    std::vector<std::unique_ptr<SampleRow[]>> blocks_;
    size_t rows_ = 0;
    // Folded rows: row index -> samples it holds beyond its first. A node and a bucket each.
    static constexpr size_t kFoldedNodeBytes = 48;
    std::unordered_map<size_t, uint64_t> folded_;
    size_t folded_extra_ = 0;
    std::vector<TimeMark> marks_;
};

}  // namespace spprof
