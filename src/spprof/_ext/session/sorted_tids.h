// sorted_tids.h: a sorted copy of a changing set of thread ids, brought up to date from the
// ids touched since the last sync instead of being made again.
//
// The OS thread scan asks, for every thread of the process, "does it have a Python state?":
// a binary search in a sorted vector (a hash lookup per thread is a cache miss per thread).
// It was remade from the set's hash map whenever the set changed, and while a program starts
// and ends threads the set changes between every two passes: with 5,000 threads alive the
// walk of the map's nodes and the sort were a quarter of the drain's GIL time per pass. Now
// the owner notes each id it adds or removes, and sync() merges those into the vector in one
// sequential pass, asking the set (truth) only about the touched ids. Normal context; pure.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace spprof {

class SortedTids {
public:
    // An id added to or removed from the set (either: sync asks the set which).
    void touched(uint64_t tid) {
        if (stale_) return;
        touched_.push_back(tid);
        // Nobody syncs (no OS thread scan here): do not grow; the next sync remakes it all.
        if (touched_.size() > 2 * tids_.size() + kTouchedSlack) invalidate();
    }
    // Remade from the whole set at the next sync.
    void invalidate() {
        stale_ = true;
        touched_.clear();
    }
    // contains(tid): whether the set holds tid now. each_id(fn): calls fn(tid) for every id of
    // the set (only when the copy is remade whole).
    template <class Contains, class EachId>
    void sync(Contains&& contains, EachId&& each_id) {
        if (stale_) {
            tids_.clear();
            each_id([this](uint64_t tid) { tids_.push_back(tid); });
            std::sort(tids_.begin(), tids_.end());
            tids_.erase(std::unique(tids_.begin(), tids_.end()), tids_.end());
            stale_ = false;
            touched_.clear();
            return;
        }
        if (touched_.empty()) return;
        std::sort(touched_.begin(), touched_.end());
        touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
        merged_.clear();
        merged_.reserve(tids_.size() + touched_.size());
        size_t i = 0;
        for (const uint64_t tid : touched_) {
            while (i < tids_.size() && tids_[i] < tid) merged_.push_back(tids_[i++]);
            if (i < tids_.size() && tids_[i] == tid) ++i;  // the set decides, below
            if (contains(tid)) merged_.push_back(tid);
        }
        merged_.insert(merged_.end(), tids_.begin() + static_cast<std::ptrdiff_t>(i), tids_.end());
        tids_.swap(merged_);
        touched_.clear();
    }
    // As of the last sync.
    bool has(uint64_t tid) const { return std::binary_search(tids_.begin(), tids_.end(), tid); }
    size_t size() const { return tids_.size(); }
    size_t memory_bytes() const {
        return (tids_.capacity() + touched_.capacity() + merged_.capacity()) * sizeof(uint64_t);
    }

private:
    static constexpr size_t kTouchedSlack = 1024;
    std::vector<uint64_t> tids_;     // sorted, unique
    std::vector<uint64_t> touched_;  // since the last sync
    std::vector<uint64_t> merged_;   // sync's scratch, reused
    bool stale_ = true;
};

}  // namespace spprof
