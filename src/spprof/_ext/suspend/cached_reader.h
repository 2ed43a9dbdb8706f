// suspend/cached_reader.h: a memory reader that cannot fault, with a small line cache.
//
// The Python frame walk (framewalker.h) reads a suspended thread's frames and code objects a
// few bytes at a time, through a Reader { bool read(addr, out, n) const; }. On macOS each
// uncached read is a mach_vm_read_overwrite call (a kernel round trip, about a microsecond),
// which returns an error instead of faulting on an unmapped address; a 30-frame stack read
// field by field would take ~200 calls and keep the thread suspended far longer than the
// 100 us budget. This reader fetches whole aligned 4 KiB lines into a pre-allocated cache, so
// the frames of one data-stack chunk and each code object cost about one call.
//
// The cache is valid for one suspended window only: call reset() before each window (the
// memory changes as soon as the thread runs again). Storage is allocated once, in the
// constructor (control thread); read() and reset() are NO-HEAP, take no locks, and loop at
// most over the lines a read spans. The Fetch parameter does the real read: a Mach call on
// macOS, a fake in the tests (tests/native/test_suspend_reader.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "capture/reader.h"

namespace spprof {

// Line size: every VM page size (4 KiB on x86_64, 16 KiB on Apple silicon) is a multiple of
// it, so an aligned line lies within one page and is either wholly readable or not at all.
constexpr size_t kReadLineBytes = 4096;
// Lines kept per window: a deep stack touches a few data-stack chunks plus one line per
// distinct code object; 64 lines (256 KiB) cover 60 distinct functions without eviction.
constexpr size_t kReadCacheLines = 64;

template <class Fetch>
class CachedReader {
public:
    // Control thread: allocates the line storage.
    explicit CachedReader(Fetch fetch = Fetch())
        : fetch_(fetch), storage_(new unsigned char[kReadCacheLines * kReadLineBytes]) {}
    CachedReader(const CachedReader&) = delete;
    CachedReader& operator=(const CachedReader&) = delete;

    // Forget every cached line. NO-HEAP.
    void reset() {
        used_ = 0;
        victim_ = 0;
    }

    // Copy n bytes at addr into out; false when any of them is unreadable. NO-HEAP.
    bool read(uintptr_t addr, void* out, size_t n) const {
        if (n == 0) return true;
        // No object can be there (the first 64 KiB, kernel or garbage high bits): rejected
        // without a call, as a torn link must be.
        if (!plausible_address(addr, n)) return false;
        if (n > kReadLineBytes) {  // large reads bypass the cache
            ++fetches_;
            return fetch_(addr, out, n);
        }
        unsigned char* dst = static_cast<unsigned char*>(out);
        while (n != 0) {  // at most two iterations: n <= one line
            const uintptr_t base = addr & ~static_cast<uintptr_t>(kReadLineBytes - 1);
            const size_t off = static_cast<size_t>(addr - base);
            const size_t chunk = kReadLineBytes - off < n ? kReadLineBytes - off : n;
            const unsigned char* line = line_for(base);
            if (line == nullptr) return false;
            std::memcpy(dst, line + off, chunk);
            dst += chunk;
            addr += chunk;
            n -= chunk;
        }
        return true;
    }

    uint64_t fetches() const { return fetches_; }  // real reads done (for tests and stats)

private:
    const unsigned char* line_for(uintptr_t base) const {
        for (size_t i = 0; i < used_; ++i) {
            if (tags_[i] == base) return storage_.get() + i * kReadLineBytes;
        }
        size_t slot;
        if (used_ < kReadCacheLines) {
            slot = used_;
        } else {  // full: evict round-robin
            slot = victim_;
            victim_ = (victim_ + 1) % kReadCacheLines;
        }
        unsigned char* line = storage_.get() + slot * kReadLineBytes;
        ++fetches_;
        if (!fetch_(base, line, kReadLineBytes)) {
            if (slot < used_) tags_[slot] = 0;  // the evicted line's bytes may be torn now
            return nullptr;
        }
        tags_[slot] = base;
        if (slot == used_) ++used_;
        return line;
    }

    Fetch fetch_;
    std::unique_ptr<unsigned char[]> storage_;
    mutable uintptr_t tags_[kReadCacheLines] = {};  // line base address; 0 = empty
    mutable size_t used_ = 0;
    mutable size_t victim_ = 0;
    mutable uint64_t fetches_ = 0;
};

}  // namespace spprof
