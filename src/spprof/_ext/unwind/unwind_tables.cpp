// unwind/unwind_tables.cpp: UnwindTables::refresh and UnwindSnapshot::find (see
// unwind_tables.h).
#include "unwind/unwind_tables.h"

#include <algorithm>
#include <cstddef>
#include <new>

#include "platform/images.h"

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

UnwindTables::UnwindTables() : step_cache_(StepCache::create()) {}

UnwindTables::~UnwindTables() {
    current_.store(nullptr, std::memory_order_release);
    // owned_ frees every snapshot.
}

namespace {

struct Collect {
    UnwindSnapshot* snap;
    uint64_t dropped = 0;
    uint64_t no_cfi = 0;
    bool out_of_memory = false;
};

// One image: its executable ranges and, when it has one, its parsed .eh_frame_hdr.
void collect_one(const LoadedImage& img, Collect* c) {
    if (c->snap->modules.size() >= kMaxUnwindModules) {
        ++c->dropped;
        return;
    }
    UnwindModule m;
    m.bias = img.bias;
    const uint32_t index = static_cast<uint32_t>(c->snap->modules.size());
    bool any_exec = false;
    for (uint32_t i = 0; i < img.segment_count; ++i) {
        const ImageSegment& seg = img.segments[i];
        if (!seg.exec) {
            if (m.data_count < kMaxDataRanges) m.data[m.data_count++] = ByteRange{seg.lo, seg.hi};
            continue;
        }
        c->snap->ranges.push_back(ExecRange{seg.lo, seg.hi, index});
        any_exec = true;
    }
    if (!any_exec) return;  // nothing can run there: not worth a module entry
    if (img.eh_frame_hdr != 0) {
        // The segments that hold .eh_frame_hdr and, once parsed, .eh_frame.
        auto segment_of = [&](uintptr_t addr, ByteRange* out) {
            for (uint32_t i = 0; i < img.segment_count; ++i) {
                const ImageSegment& seg = img.segments[i];
                if (addr >= seg.lo && addr < seg.hi) {
                    out->lo = seg.lo;
                    out->hi = seg.hi;
                    return true;
                }
            }
            return false;
        };
        ByteRange hdr_seg;
        EhFrameHdr eh;
        if (segment_of(img.eh_frame_hdr, &hdr_seg) &&
            parse_eh_frame_hdr(reinterpret_cast<const uint8_t*>(img.eh_frame_hdr), hdr_seg, &eh) ==
                CfiResult::kOk &&
            segment_of(eh.eh_frame, &m.cfi_range)) {
            m.eh = eh;
        }
    }
    if (m.eh.table == nullptr) ++c->no_cfi;
    c->snap->modules.push_back(m);
}

// No exception may cross the loader's iteration (C code holding the loader lock): stop instead.
bool collect_module(const LoadedImage& img, void* data) {
    Collect* c = static_cast<Collect*>(data);
    try {
        collect_one(img, c);
        return true;
    } catch (const std::bad_alloc&) {
        c->out_of_memory = true;
        return false;
    }
}

}  // namespace

Error UnwindTables::refresh() {
    std::lock_guard<std::mutex> lock(mu_);
    const UnwindSnapshot* prev = current_.load(std::memory_order_relaxed);
    // The common case, nothing loaded since the last snapshot, allocates nothing: the loader's
    // counters are compared before anything is built.
    ImageListVersion now;
    if (prev != nullptr && platform_image_list_version(&now) && now.known && now.adds == prev->adds &&
        now.subs == prev->subs)
        return Error::none();
    std::unique_ptr<UnwindSnapshot> snap(new (std::nothrow) UnwindSnapshot());
    if (!snap) return Error::memory("unwind tables: out of memory");
    // Built in full even if the counters moved again since the peek: this pass records its own.
    Collect c{snap.get()};
    try {
        snap->modules.reserve(64);
        snap->ranges.reserve(64);
        ImageListVersion version;
        Error err = platform_for_each_image(&collect_module, &c, &version);
        if (!err.ok()) return publish_empty_once(err);
        if (c.out_of_memory) return Error::memory("unwind tables: out of memory");
        if (version.known) {
            snap->adds = version.adds;
            snap->subs = version.subs;
        }
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
        snap->step_cache = step_cache_.get();
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

// Where images are not enumerated: publish one empty snapshot (the handler records pcs only)
// and report why. Called with mu_ held.
Error UnwindTables::publish_empty_once(Error why) {
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
    return why;
}

}  // namespace spprof
