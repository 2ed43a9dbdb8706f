// unwind/unwind_tables.h: what the signal handler needs to unwind native frames, prepared
// outside it.
//
// The handler may not call dl_iterate_phdr (it takes the loader lock: a signal landing inside
// dlopen would deadlock) nor allocate. So UnwindTables::refresh(), called in normal context
// (at session start, and then from the sampler or drain thread each time it runs, which is
// cheap when no module was loaded or unloaded), walks the loaded modules once and builds an
// immutable UnwindSnapshot: for each module its load bias, its executable PT_LOAD ranges, and
// its parsed .eh_frame_hdr (the binary-search table stays where the loader mapped it: nothing
// is copied), plus the bounds of the segments that CIE/FDE reads must stay inside. The
// snapshot is published through one std::atomic<const UnwindSnapshot*>; the handler loads it
// once per sample and reads it lock-free.
//
// Lifetime: a replaced snapshot is retired, not freed: a handler on another thread may still
// be reading it. All snapshots are freed by the destructor, which the owner (the session)
// runs only after sampling stopped and no handler can be running.
//
// Unloading: a module dlclose'd between two refreshes is still described by the current
// snapshot; a return address into its unmapped range makes the unwinder read unmapped CFI.
// The capture path runs the unwinder under the fault guard, which turns such a read into an
// ended walk (see docs/native-unwinding.md).
//
// The images come from platform_for_each_image (platform/images.h): dl_iterate_phdr and
// PT_GNU_EH_FRAME on Linux. Where images are not enumerated (macOS) refresh() publishes an
// empty snapshot and reports kNotImplemented.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "error.h"
#include "unwind/eh_frame.h"
#include "unwind/eval_ranges.h"
#include "unwind/step_cache.h"

namespace spprof {

// Most modules a snapshot describes; a process with more (numpy + scipy + torch load a few
// hundred) keeps the first kMaxUnwindModules in load order (the executable and libpython are
// among the first) and counts the rest in modules_dropped().
constexpr uint32_t kMaxUnwindModules = 1024;

// Non-executable loaded segments kept per module (an ELF library has one or two: read-only
// data, and the writable one with the GOT); more are dropped.
constexpr uint32_t kMaxDataRanges = 4;

struct UnwindModule {
    uintptr_t bias = 0;     // dlpi_addr: runtime address = bias + ELF virtual address
    EhFrameHdr eh;          // eh.table == nullptr: no usable .eh_frame_hdr (fp fallback only)
    ByteRange cfi_range;    // the mapped PT_LOAD segment holding .eh_frame: FDE/CIE reads stay inside
    // Its data segments, mapped while the module is: where a PLT stub's GOT entry may be read.
    ByteRange data[kMaxDataRanges];
    uint32_t data_count = 0;

    // True when [addr, addr + n) lies inside one of `data`. SIGNAL-SAFE.
    bool holds_data(uintptr_t addr, size_t n) const {
        for (uint32_t i = 0; i < data_count; ++i)
            if (data[i].contains(addr, n)) return true;
        return false;
    }
};

// One executable range, [lo, hi), of module `module` (index into UnwindSnapshot::modules).
struct ExecRange {
    uintptr_t lo = 0;
    uintptr_t hi = 0;
    uint32_t module = 0;
};

// Immutable once published. Ranges are sorted by lo and do not overlap.
struct UnwindSnapshot {
    std::vector<UnwindModule> modules;
    std::vector<ExecRange> ranges;
    uint64_t adds = 0;  // dl_iterate_phdr counters this snapshot was built at
    uint64_t subs = 0;
    uint32_t generation = 0;
    // Steps already worked out (step_cache.h), keyed by pc and `generation`; nullptr: none.
    // Owned by the UnwindTables, shared by its snapshots.
    StepCache* step_cache = nullptr;

    // The module whose executable ranges contain pc, or nullptr. SIGNAL-SAFE, NO-HEAP:
    // binary search over `ranges`.
    const UnwindModule* find(uintptr_t pc) const;
};

class UnwindTables {
public:
    UnwindTables();
    // Frees every snapshot, current and retired. Only once no handler can run (session end).
    ~UnwindTables();
    UnwindTables(const UnwindTables&) = delete;
    UnwindTables& operator=(const UnwindTables&) = delete;

    // Rebuild and publish the snapshot when the loaded modules changed (or on the first call).
    // Normal context, any thread, GIL not needed; calls are serialised by an internal mutex.
    // Takes the loader lock (dl_iterate_phdr) and allocates. Cheap when nothing changed: one
    // dl_iterate_phdr callback that compares dlpi_adds/dlpi_subs. Errors: kMemory (allocation
    // failed; the previous snapshot stays current), kNotImplemented (not Linux).
    Error refresh();

    // The current snapshot, nullptr before the first successful refresh().
    // SIGNAL-SAFE, NO-HEAP: one acquire load.
    const UnwindSnapshot* current() const { return current_.load(std::memory_order_acquire); }

    // Modules left out of the last snapshot because of kMaxUnwindModules. Any thread.
    uint64_t modules_dropped() const { return dropped_.load(std::memory_order_relaxed); }
    // Modules without a usable .eh_frame_hdr in the last snapshot (fp fallback only). Any thread.
    uint64_t modules_without_cfi() const { return no_cfi_.load(std::memory_order_relaxed); }
    // The step cache's table (0 when none could be allocated). Any thread.
    size_t step_cache_bytes() const { return step_cache_ ? step_cache_->memory_bytes() : 0; }
    // Snapshots built so far. Any thread.
    uint32_t generation() const { return generation_.load(std::memory_order_relaxed); }

    // Where the eval loop lives: set once at session start, before capture is enabled (whose
    // release store publishes it); read-only after. SIGNAL-SAFE, NO-HEAP to read.
    void set_eval_ranges(const EvalRanges& ranges) { eval_ = ranges; }
    const EvalRanges& eval_ranges() const { return eval_; }

private:
    Error publish_empty_once(Error why);

    static_assert(std::atomic<const UnwindSnapshot*>::is_always_lock_free,
                  "the handler loads the snapshot pointer");
    std::atomic<const UnwindSnapshot*> current_{nullptr};
    std::atomic<uint64_t> dropped_{0};
    std::atomic<uint64_t> no_cfi_{0};
    std::atomic<uint32_t> generation_{0};
    EvalRanges eval_;
    std::unique_ptr<StepCache> step_cache_;  // made with the tables; outlives every snapshot
    std::mutex mu_;                                        // serialises refresh()
    std::vector<std::unique_ptr<UnwindSnapshot>> owned_;  // current and retired; guarded by mu_
};

}  // namespace spprof
