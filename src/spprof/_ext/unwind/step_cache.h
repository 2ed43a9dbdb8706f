// unwind/step_cache.h: CFI steps already worked out, by pc, for the next walk to reuse.
//
// A CFI step costs a module lookup, a binary search of .eh_frame_hdr and a run of the CIE's and
// FDE's instructions up to the pc: about 2,000 instructions a frame, 44,000 a native capture
// at Python depth 50 with numpy loaded (callgrind), against 3,300 for a Python-only capture.
// The return addresses a process's walks meet are few and recur in every sample (main, the
// eval loop's call sites, a library's driver), so the row a step computed is kept here, keyed
// by pc and the unwind snapshot's generation, and the next walk through that pc applies it:
// the CFA's register and offset, and where each saved register lies from the CFA.
//
// Only rows of that plain shape are kept (no DWARF expression, every register either
// unchanged or saved at CFA + offset, at most kMaxCachedSaves saved): the others take the
// full step each time, as without the cache.
//
// SIGNAL-SAFE, NO-HEAP, lock-free: the table is allocated once (normal context) and each
// entry is guarded by a sequence number. A reader that meets an entry being written, or
// rewritten while it read, counts a miss; a writer that finds an entry being written leaves
// it. A handler interrupting a write on its own thread therefore misses, never waits.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "unwind/eh_frame.h"

namespace spprof {

// Registers a cached row may restore from the stack: x86_64's callee-saved rbx, rbp, r12-r15
// and the return address (7); aarch64's x19-x28, fp and lr (12). Kept small: a lookup copies
// the whole entry.
#if defined(__aarch64__)
constexpr uint32_t kMaxCachedSaves = 12;
#else
constexpr uint32_t kMaxCachedSaves = 8;
#endif

struct CachedStep {
    int32_t cfa_offset = 0;
    uint8_t cfa_col = 0;
    uint8_t ra_col = 0;
    uint8_t saves = 0;   // entries of col/offset used
    uint8_t flags = 0;   // kRaUndefined, kRaOnStack, kSameValueAt
    uint8_t col[kMaxCachedSaves] = {};
    int16_t offset[kMaxCachedSaves] = {};  // CFA-relative, in bytes

    static constexpr uint8_t kRaUndefined = 1;  // the outermost frame: the walk ends here
    static constexpr uint8_t kRaOnStack = 2;    // the return address is read from the stack
    // The column the unwinder treats specially when its rule is "same value" (x86_64's DRAP
    // register, caller-saved: forgotten unless a rule restored it) had that rule.
    static constexpr uint8_t kSameValueAt = 4;
};
static_assert(sizeof(CachedStep) <= 48, "an entry is a few words");

// The plain row `row` (ra_col its return-address column) as a CachedStep: false when it is not
// of the shape the cache keeps. `same_col`: the column whose same-value rule is recorded (0xFF:
// none). Pure; SIGNAL-SAFE.
bool cached_step_from_row(const CfiRow& row, uint32_t ra_col, uint8_t same_col, CachedStep* out);

class StepCache {
public:
    // Entries: a power of two. 56 bytes each on x86_64, 72 on aarch64.
    static constexpr uint32_t kEntries = 4096;

    // Normal context (allocates the table). nullptr when out of memory: walks go uncached.
    static std::unique_ptr<StepCache> create();
    StepCache(const StepCache&) = delete;
    StepCache& operator=(const StepCache&) = delete;

    // The step kept for `pc` in snapshot `generation`. SIGNAL-SAFE, NO-HEAP.
    bool lookup(uint64_t pc, uint32_t generation, CachedStep* out) const;
    // Keeps `step` for `pc` (replacing whatever shares its slot), unless the slot is being
    // written right now. SIGNAL-SAFE, NO-HEAP.
    void insert(uint64_t pc, uint32_t generation, const CachedStep& step);

    size_t memory_bytes() const { return sizeof(Entry) * kEntries; }

private:
    static constexpr size_t kDataWords = (sizeof(CachedStep) + 7) / 8;
    struct Entry {
        std::atomic<uint64_t> seq{0};  // odd while being written
        std::atomic<uint64_t> pc{0};
        std::atomic<uint64_t> generation{0};  // generation + 1: 0 marks an empty entry
        std::atomic<uint64_t> data[kDataWords];
    };
    static_assert(std::atomic<uint64_t>::is_always_lock_free, "entries are read in signal handlers");

    StepCache() = default;
    static uint32_t slot_of(uint64_t pc);

    std::unique_ptr<Entry[]> entries_;
};

}  // namespace spprof
