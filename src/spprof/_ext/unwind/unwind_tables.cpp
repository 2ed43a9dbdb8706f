// unwind/unwind_tables.cpp: UnwindTables::refresh and UnwindSnapshot::find (see
// unwind_tables.h).
#include "unwind/unwind_tables.h"

#include <algorithm>
#include <cstddef>
#include <new>

#if defined(__linux__)
#include <link.h>
#endif

namespace spprof {

const UnwindModule* UnwindSnapshot::find(uintptr_t pc) const {
    // Last range with lo <= pc, then its hi. Bounded: log2(ranges.size()) iterations.
    size_t lo = 0, hi = ranges.size();
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (ranges[mid].lo <= pc) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0) return nullptr;
    const ExecRange& r = ranges[lo - 1];
    if (pc >= r.hi) return nullptr;
    return &modules[r.module];
}

UnwindTables::UnwindTables() = default;

UnwindTables::~UnwindTables() {
    current_.store(nullptr, std::memory_order_release);
    // owned_ frees every snapshot.
}

#if defined(__linux__)

namespace {

struct Collect {
    UnwindSnapshot* snap;
    uint64_t prev_adds;
    uint64_t prev_subs;
    bool have_prev;
    bool unchanged = false;
    bool first = true;
    uint64_t dropped = 0;
    uint64_t no_cfi = 0;
    bool out_of_memory = false;
    bool peek_only = false;  // read the counters from the first callback, then stop
};

// dl_phdr_info grew dlpi_adds/dlpi_subs in glibc 2.4; `size` says whether this one has them.
bool has_counters(size_t size) {
    return size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(dl_phdr_info::dlpi_subs);
}

int collect_one(dl_phdr_info* info, size_t size, Collect* c) {
    if (c->first) {
        c->first = false;
        if (has_counters(size)) {
            c->snap->adds = info->dlpi_adds;
            c->snap->subs = info->dlpi_subs;
            if (c->have_prev && info->dlpi_adds == c->prev_adds && info->dlpi_subs == c->prev_subs) {
                c->unchanged = true;
                return 1;  // stop: nothing was loaded or unloaded since the last snapshot
            }
        }
        if (c->peek_only) return 1;
    }
    if (c->snap->modules.size() >= kMaxUnwindModules) {
        ++c->dropped;
        return 0;
    }
    const uintptr_t bias = info->dlpi_addr;
    UnwindModule m;
    m.bias = bias;
    const ElfW(Phdr)* eh_phdr = nullptr;
    const uint32_t index = static_cast<uint32_t>(c->snap->modules.size());
    bool any_exec = false;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_GNU_EH_FRAME) eh_phdr = &ph;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) != 0 && ph.p_memsz > 0) {
            c->snap->ranges.push_back(ExecRange{bias + ph.p_vaddr, bias + ph.p_vaddr + ph.p_memsz, index});
            any_exec = true;
        }
    }
    if (!any_exec) return 0;  // nothing can run there: not worth a module entry
    if (eh_phdr != nullptr) {
        // The segments that hold .eh_frame_hdr and, once parsed, .eh_frame.
        auto segment_of = [&](uintptr_t addr, ByteRange* out) {
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD) continue;
                const uintptr_t lo = bias + ph.p_vaddr;
                if (addr >= lo && addr < lo + ph.p_memsz) {
                    out->lo = lo;
                    out->hi = lo + ph.p_memsz;
                    return true;
                }
            }
            return false;
        };
        const uintptr_t hdr_addr = bias + eh_phdr->p_vaddr;
        ByteRange hdr_seg;
        EhFrameHdr eh;
        if (segment_of(hdr_addr, &hdr_seg) &&
            parse_eh_frame_hdr(reinterpret_cast<const uint8_t*>(hdr_addr), hdr_seg, &eh) ==
                CfiResult::kOk &&
            segment_of(eh.eh_frame, &m.cfi_range)) {
            m.eh = eh;
        }
    }
    if (m.eh.table == nullptr) ++c->no_cfi;
    c->snap->modules.push_back(m);
    return 0;
}

// No exception may cross dl_iterate_phdr (C code holding the loader lock): stop instead.
int collect_module(dl_phdr_info* info, size_t size, void* data) {
    Collect* c = static_cast<Collect*>(data);
    try {
        return collect_one(info, size, c);
    } catch (const std::bad_alloc&) {
        c->out_of_memory = true;
        return 1;
    }
}

}  // namespace

Error UnwindTables::refresh() {
    std::lock_guard<std::mutex> lock(mu_);
    const UnwindSnapshot* prev = current_.load(std::memory_order_relaxed);
    // The common case, nothing loaded since the last snapshot, allocates nothing: the first
    // callback compares the loader's counters and stops the iteration.
    UnwindSnapshot probe;
    Collect peek{&probe, prev ? prev->adds : 0, prev ? prev->subs : 0, prev != nullptr};
    peek.peek_only = true;
    dl_iterate_phdr(&collect_module, &peek);
    if (peek.unchanged) return Error::none();
    std::unique_ptr<UnwindSnapshot> snap(new (std::nothrow) UnwindSnapshot());
    if (!snap) return Error::memory("unwind tables: out of memory");
    // Built in full even if the counters moved again since the peek: this pass records its own.
    Collect c{snap.get(), 0, 0, false};
    try {
        snap->modules.reserve(64);
        snap->ranges.reserve(64);
        dl_iterate_phdr(&collect_module, &c);
        if (c.out_of_memory) return Error::memory("unwind tables: out of memory");
        std::sort(snap->ranges.begin(), snap->ranges.end(),
                  [](const ExecRange& a, const ExecRange& b) { return a.lo < b.lo; });
        // Overlapping ranges cannot come from a sane loader; drop any that would break the
        // binary search's invariant.
        std::vector<ExecRange> clean;
        clean.reserve(snap->ranges.size());
        for (const ExecRange& r : snap->ranges) {
            if (!clean.empty() && r.lo < clean.back().hi) continue;
            clean.push_back(r);
        }
        snap->ranges.swap(clean);
        snap->generation = generation_.load(std::memory_order_relaxed) + 1;
        owned_.push_back(nullptr);  // may throw: before publishing anything
    } catch (const std::bad_alloc&) {
        return Error::memory("unwind tables: out of memory");
    }
    const UnwindSnapshot* published = snap.get();
    owned_.back() = std::move(snap);
    dropped_.store(c.dropped, std::memory_order_relaxed);
    no_cfi_.store(c.no_cfi, std::memory_order_relaxed);
    generation_.store(published->generation, std::memory_order_relaxed);
    current_.store(published, std::memory_order_release);
    return Error::none();
}

#else  // !__linux__

Error UnwindTables::refresh() {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_.load(std::memory_order_relaxed) == nullptr) {
        std::unique_ptr<UnwindSnapshot> snap(new (std::nothrow) UnwindSnapshot());
        if (!snap) return Error::memory("unwind tables: out of memory");
        try {
            owned_.push_back(nullptr);
        } catch (const std::bad_alloc&) {
            return Error::memory("unwind tables: out of memory");
        }
        const UnwindSnapshot* published = snap.get();
        owned_.back() = std::move(snap);
        current_.store(published, std::memory_order_release);
    }
    return Error::not_implemented("native unwinding is only implemented on Linux");
}

#endif

}  // namespace spprof
