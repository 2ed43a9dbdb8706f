// unwind/step_cache.cpp: see step_cache.h.
#include "unwind/step_cache.h"

#include <cstring>
#include <new>

namespace spprof {

bool cached_step_from_row(const CfiRow& row, uint32_t ra_col, uint8_t same_col, CachedStep* out) {
    if (ra_col >= kCfiRegs || row.cfa.expr != nullptr || !row.cfa.defined || row.cfa.reg >= kCfiRegs ||
        row.cfa.offset < INT32_MIN || row.cfa.offset > INT32_MAX)
        return false;
    CachedStep s;
    s.cfa_col = static_cast<uint8_t>(row.cfa.reg);
    s.cfa_offset = static_cast<int32_t>(row.cfa.offset);
    s.ra_col = static_cast<uint8_t>(ra_col);
    for (uint32_t col = 0; col < kCfiRegs; ++col) {
        const RegRule& rule = row.regs[col];
        if (rule.kind == RuleKind::kSameValue) {
            if (col == same_col) s.flags |= CachedStep::kSameValueAt;
            continue;
        }
        if (rule.kind == RuleKind::kUndefined && col == ra_col) {
            s.flags |= CachedStep::kRaUndefined;
            continue;
        }
        if (rule.kind != RuleKind::kOffset || rule.offset < INT16_MIN || rule.offset > INT16_MAX ||
            s.saves == kMaxCachedSaves)
            return false;
        s.col[s.saves] = static_cast<uint8_t>(col);
        s.offset[s.saves] = static_cast<int16_t>(rule.offset);
        ++s.saves;
        if (col == ra_col) s.flags |= CachedStep::kRaOnStack;
    }
    *out = s;
    return true;
}

std::unique_ptr<StepCache> StepCache::create() {
    std::unique_ptr<StepCache> c(new (std::nothrow) StepCache());
    if (!c) return nullptr;
    c->entries_.reset(new (std::nothrow) Entry[kEntries]);
    if (!c->entries_) return nullptr;
    return c;
}

uint32_t StepCache::slot_of(uint64_t pc) {
    // Fibonacci hashing: nearby return addresses spread over the table.
    return static_cast<uint32_t>(((pc ^ (pc >> 17)) * 0x9E3779B97F4A7C15ull) >> 52) & (kEntries - 1);
}

bool StepCache::lookup(uint64_t pc, uint32_t generation, CachedStep* out) const {
    const Entry& e = entries_[slot_of(pc)];
    const uint64_t before = e.seq.load(std::memory_order_acquire);
    if ((before & 1) != 0) return false;
    if (e.pc.load(std::memory_order_relaxed) != pc ||
        e.generation.load(std::memory_order_relaxed) != uint64_t{generation} + 1)
        return false;
    uint64_t words[kDataWords];
    for (size_t i = 0; i < kDataWords; ++i) words[i] = e.data[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) != before) return false;  // rewritten meanwhile
    std::memcpy(out, words, sizeof *out);
    return true;
}

void StepCache::insert(uint64_t pc, uint32_t generation, const CachedStep& step) {
    Entry& e = entries_[slot_of(pc)];
    uint64_t seq = e.seq.load(std::memory_order_relaxed);
    if ((seq & 1) != 0 || !e.seq.compare_exchange_strong(seq, seq + 1, std::memory_order_acquire,
                                                          std::memory_order_relaxed))
        return;  // another capture is writing it: leave it
    std::atomic_thread_fence(std::memory_order_release);  // the odd number before the data
    uint64_t words[kDataWords] = {};
    std::memcpy(words, &step, sizeof step);
    e.pc.store(pc, std::memory_order_relaxed);
    e.generation.store(uint64_t{generation} + 1, std::memory_order_relaxed);
    for (size_t i = 0; i < kDataWords; ++i) e.data[i].store(words[i], std::memory_order_relaxed);
    e.seq.store(seq + 2, std::memory_order_release);
}

}  // namespace spprof
