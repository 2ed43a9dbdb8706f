// platform/images.h: the loaded images (executable and shared libraries) of this process and
// their function symbols, for native unwinding and symbolization (unwind/).
//
// OS-neutral declarations; platform/images_linux.cpp implements them over dl_iterate_phdr and
// ELF symbol tables, platform/images_darwin.cpp reports them unimplemented (on macOS native
// names come from dladdr and function extents from LC_FUNCTION_STARTS:
// platform_function_extent). Normal context only: these take the loader lock, read files and
// allocate. Never from a signal handler or a suspended window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "error.h"

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
// into ImageSymbols::strtab.
struct ImageSymbol {
    uint64_t value = 0;
    uint64_t size = 0;
    uint32_t name = 0;
};

struct ImageSymbols {
    std::vector<ImageSymbol> syms;  // sorted by value, then larger size first
    std::string strtab;             // every name ends with '\0' inside it
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
