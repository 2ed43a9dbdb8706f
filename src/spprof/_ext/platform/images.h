// platform/images.h: the loaded images (executable and shared libraries) of this process and
// their function symbols, for native unwinding and symbolization (unwind/).
//
// OS-neutral declarations; platform/images_linux.cpp implements them over dl_iterate_phdr and
// ELF symbol tables, platform/images_darwin.cpp reports them unimplemented (on macOS native
// names come from dladdr and function extents from LC_FUNCTION_STARTS:
// platform_function_extent). Normal context only: these take the loader lock, read files and
// allocate. Never from a signal handler or a suspended window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "error.h"
#include "platform/platform.h"

namespace spprof {

// One loaded segment of an image, [lo, hi) at run time.
struct ImageSegment {
    uintptr_t lo = 0;
    uintptr_t hi = 0;
    bool exec = false;  // mapped executable
};

// Segments kept per image; ELF images have 2-6 loadable segments, more are dropped.
constexpr uint32_t kMaxImageSegments = 32;

struct LoadedImage {
    const char* path = "";      // file of the image ("" when unknown); valid during the visit
    uintptr_t bias = 0;         // run-time address = bias + address in the file
    uintptr_t eh_frame_hdr = 0;  // run-time address of .eh_frame_hdr, 0 when the image has none
    uint32_t segment_count = 0;
    ImageSegment segments[kMaxImageSegments];
};

// The loader's count of loads and unloads: equal counts mean the same images.
struct ImageListVersion {
    uint64_t adds = 0;
    uint64_t subs = 0;
    bool known = false;  // false when the loader does not keep counts
};

// Called once per image, the executable first. Return false to stop the iteration. Must not
// throw (it runs inside the loader's iteration): catch and return false instead.
using ImageVisitor = bool (*)(const LoadedImage& image, void* data);

// Visit every loaded image, and set *version (may be null) to the counts of this iteration.
// Normal context, any thread; holds the loader lock during the visits. Errors: kNotImplemented
// where images are not enumerated (macOS).
Error platform_for_each_image(ImageVisitor visit, void* data, ImageListVersion* version);

// The loader's counts now, without visiting: cheap (one callback). Same context rules.
// False where images are not enumerated.
bool platform_image_list_version(ImageListVersion* out);

// One function symbol of an image's file: address in the file and size; name is an offset
// into ImageSymbols::names.
struct ImageSymbol {
    uint64_t value = 0;
    uint64_t size = 0;
    uint32_t name = 0;
};

// The string table of an image's symbol table. Linux maps it from the file, read-only: its
// pages are the page cache's (shared, evictable), and the process pays only for those a lookup
// touched (libtorch_cpu.so's table is 76 MB of names). A mapping past the file's end faults
// (the file was truncated in place), so names are copied out with platform_read_no_fault.
// Where it cannot be mapped, a copy. Copies of a SymbolNames share the mapping. Normal context.
class SymbolNames {
public:
    SymbolNames() = default;
    // The bytes [data, data + size) held by `owner` (a mapping's or a copy's); the last is '\0'.
    SymbolNames(std::shared_ptr<const char> owner, const char* data, size_t size, bool mapped)
        : owner_(std::move(owner)), data_(data), size_(size), mapped_(mapped) {}

    size_t size() const { return size_; }
    bool mapped() const { return mapped_; }
    // The name at `offset` into *out. False when the offset is outside the table or its bytes
    // can no longer be read (a mapped file truncated since).
    bool name_at(uint32_t offset, std::string* out) const;
    // The whole table into *out (for a scan of every name). Same failures.
    bool copy_all(std::string* out) const;

private:
    std::shared_ptr<const char> owner_;
    const char* data_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;
};

inline bool SymbolNames::name_at(uint32_t offset, std::string* out) const {
    out->clear();
    if (offset >= size_) return false;
    if (!mapped_) {
        out->assign(data_ + offset);
        return true;
    }
    // In pieces until the '\0': most names fit the first.
    char piece[256];
    for (size_t at = offset; at < size_;) {
        const size_t n = size_ - at < sizeof piece ? size_ - at : sizeof piece;
        if (!platform_read_no_fault(reinterpret_cast<uintptr_t>(data_ + at), piece, n)) return false;
        const void* end = std::memchr(piece, '\0', n);
        if (end != nullptr) {
            out->append(piece, static_cast<size_t>(static_cast<const char*>(end) - piece));
            return true;
        }
        out->append(piece, n);
        at += n;
    }
    return false;  // no '\0' before the end: not a name
}

inline bool SymbolNames::copy_all(std::string* out) const {
    out->clear();
    if (size_ == 0) return false;
    out->resize(size_);
    if (mapped_) return platform_read_no_fault(reinterpret_cast<uintptr_t>(data_), &(*out)[0], size_);
    std::memcpy(&(*out)[0], data_, size_);
    return true;
}

struct ImageSymbols {
    std::vector<ImageSymbol> syms;  // sorted by value, then larger size first
    SymbolNames names;              // every name ends with '\0' inside it
};

// Read the function symbols of the image file at `path` (Linux: .symtab, or .dynsym when
// stripped). False when the file cannot be read or has no table; always false on macOS.
// Normal context (opens and reads the file, allocates); may throw std::bad_alloc.
bool platform_read_function_symbols(const char* path, ImageSymbols* out);

// The start of every function the image file at `path` has unwind information for (Linux: the
// initial locations of .eh_frame_hdr's search table, addresses in the file), sorted. A stripped
// library keeps its unwind table: this names the function of a pc no symbol covers. False when
// the file cannot be read or has no table in the one encoding linkers emit; always false on
// macOS. Normal context (opens and reads the file, allocates); may throw std::bad_alloc.
bool platform_read_function_starts(const char* path, std::vector<uint64_t>* out);

}  // namespace spprof
