// stack_store.cpp: see stack_store.h.
#include "stack_store.h"

namespace spprof {

namespace {

bool any_pc(const uint64_t* pcs, uint32_t n) {
    if (pcs == nullptr) return false;
    for (uint32_t i = 0; i < n; ++i)
        if (pcs[i] != 0) return true;
    return false;
}

}  // namespace

uint64_t StackStore::hash(const uint32_t* frames, uint32_t n, const uint64_t* pcs) {
    uint64_t h = 0xCBF29CE484222325ull ^ n;
    for (uint32_t i = 0; i < n; ++i) {
        h ^= frames[i];
        h *= 0x100000001B3ull;
        h ^= h >> 29;
    }
    if (pcs != nullptr) {
        for (uint32_t i = 0; i < n; ++i) {
            h ^= pcs[i];
            h *= 0x100000001B3ull;
            h ^= h >> 29;
        }
    }
    return h;
}

bool StackStore::equal(uint32_t id, const uint32_t* frames, uint32_t n, const uint64_t* pcs) const {
    const uint32_t b = begin(id), e = end(id);
    if (e - b != n) return false;
    for (uint32_t i = 0; i < n; ++i)
        if (pool_[b + i] != frames[i]) return false;
    if (!with_pcs_) return pcs == nullptr;
    for (uint32_t i = 0; i < n; ++i)
        if (pc_pool_[b + i] != (pcs != nullptr ? pcs[i] : 0)) return false;
    return true;
}

uint32_t StackStore::intern(const uint32_t* frames, uint32_t n, const uint64_t* pcs) {
    if (!any_pc(pcs, n)) pcs = nullptr;  // all zeros: as a stack without addresses (one hash)
    const uint64_t h = hash(frames, n, pcs);
    auto range = index_.equal_range(h);
    for (auto it = range.first; it != range.second; ++it)
        if (equal(it->second, frames, n, pcs)) return it->second;
    const uint32_t id = static_cast<uint32_t>(offsets_.size());
    offsets_.push_back(static_cast<uint32_t>(pool_.size()));
    if (pcs != nullptr && !with_pcs_) {
        pc_pool_.assign(pool_.size(), 0);
        with_pcs_ = true;
    }
    pool_.insert(pool_.end(), frames, frames + n);
    if (with_pcs_) {
        if (pcs != nullptr)
            pc_pool_.insert(pc_pool_.end(), pcs, pcs + n);
        else
            pc_pool_.resize(pool_.size(), 0);
    }
    index_.emplace(h, id);
    return id;
}

void StackStore::fold_into(size_t i, uint64_t timestamp_ns, uint64_t weight_ns, uint64_t count) {
    SampleRow& row = blocks_[i / kRowsPerBlock][i % kRowsPerBlock];
    row.weight_ns += weight_ns;
    if (timestamp_ns > row.timestamp_ns) row.timestamp_ns = timestamp_ns;
    folded_[i] += count;
    folded_extra_ += count;
}

void StackStore::copy_rows(SampleRow* out) const {
    size_t left = rows_;
    for (const auto& block : blocks_) {
        const size_t n = left < kRowsPerBlock ? left : kRowsPerBlock;
        std::memcpy(out, block.get(), n * sizeof(SampleRow));
        out += n;
        left -= n;
    }
}

std::vector<std::pair<size_t, uint64_t>> StackStore::folds() const {
    std::vector<std::pair<size_t, uint64_t>> out;
    for (const auto& kv : folded_)
        out.emplace_back(kv.first, kv.second + 1);
    std::sort(out.begin(), out.end());
    return out;
}

void StackStore::copy_samples(SampleRow* out) const {
    if (folded_.empty()) {
        copy_rows(out);
        return;
    }
    for (size_t i = 0; i < rows_; ++i) {
        const SampleRow& row = sample(i);
        const auto it = folded_.find(i);
        if (it == folded_.end()) {
            *out++ = row;
            continue;
        }
        const uint64_t n = it->second + 1;
        for (uint64_t k = 0; k < n; ++k) *out++ = piece(row, n, k);
    }
}

namespace {

// The row's span [timestamp - weight, timestamp] cut into n equal samples: where it starts,
// and each sample's weight (the last one takes the remainder).
struct Cut {
    uint64_t start;
    uint64_t each;
};

Cut cut_of(const SampleRow& row, uint64_t n) {
    return Cut{row.timestamp_ns > row.weight_ns ? row.timestamp_ns - row.weight_ns : 0, row.weight_ns / n};
}

}  // namespace

SampleRow StackStore::piece(const SampleRow& row, uint64_t n, uint64_t k) {
    const auto [start, each] = cut_of(row, n);
    SampleRow p = row;
    p.weight_ns = k + 1 < n ? each : row.weight_ns - each * (n - 1);
    p.timestamp_ns = k + 1 < n ? start + each * (k + 1) : row.timestamp_ns;
    return p;
}

uint64_t StackStore::first_piece_at(const SampleRow& row, uint64_t n, uint64_t t0_ns) {
    const auto [start, each] = cut_of(row, n);
    if (each == 0 || t0_ns <= start) return 0;
    // Piece k (k + 1 < n) is stamped start + each * (k + 1): the one before q = (t0 - start) /
    // each is stamped before t0.
    const uint64_t q = (t0_ns - start) / each;
    const uint64_t k = q > 0 ? q - 1 : 0;
    return k < n - 1 ? k : n - 1;
}

}  // namespace spprof
