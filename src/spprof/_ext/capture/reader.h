// reader.h: how the frame walk (framewalker.h) reads memory, and its fast path for readers
// of the caller's own memory.
//
// A Reader has `bool read(addr, out, n) const`: copy n bytes or fail. A reader of memory that
// plain loads can reach may also have `const void* view(addr, n) const`: the address to load
// those n bytes from, or null when they fail the reader's checks. The walk then checks an
// object's base address once and loads only the fields it uses, instead of copying the object
// through read() (or paying read()'s checks per field). Readers without view() (the macOS
// Mach reader, which must never fault) keep one read() per object.
//
// No Python.h here: the native tests exercise this directly. SIGNAL-SAFE, NO-HEAP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

// The capture path follows pointers that may point at memory the allocator has freed and
// AddressSanitizer has poisoned; the fault guard, not ASan, is what stands behind those reads.
// Every function on the walk carries this, so the walk inlines as one uninstrumented body.
#if defined(__clang__) || defined(__GNUC__)
#define SPPROF_NO_SANITIZE_ADDRESS __attribute__((no_sanitize_address))
#else
#define SPPROF_NO_SANITIZE_ADDRESS
#endif

namespace spprof {

// Where an object of the interpreter can be, on every platform we run on. Below 64 KiB nothing
// is ever mapped (Linux's vm.mmap_min_addr defaults to it; a 64-bit macOS process has 4 GiB
// of __PAGEZERO); torn links seen in the field (0xEC00) land there. User space ends below
// 2^47 (x86_64 4-level paging, macOS) or 2^48 (Linux aarch64): 2^56 leaves room for 5-level
// paging and still rejects kernel, non-canonical and high-bit garbage values.
constexpr uintptr_t kMinObjectAddress = 0x10000;
constexpr uintptr_t kObjectAddressLimit = uintptr_t{1} << 56;

// True when [addr, addr + n) can hold an object at all. Every reader checks this first.
inline bool plausible_address(uintptr_t addr, size_t n) {
    return addr >= kMinObjectAddress && addr < kObjectAddressLimit && n <= kObjectAddressLimit - addr;
}

// Reads the caller's own memory with plain loads. For the Linux capture path, which walks the
// thread it interrupted. That chain is NOT always consistent: CPython 3.12 publishes a new
// tstate->cframe before it sets its current_frame, greenlet rewrites frame links while it
// switches stacks, and other C code may do the same. So view() rejects what can never be an
// object address (the first 64 KiB, which Linux never maps below vm.mmap_min_addr; anything
// at or above 2^56, i.e. kernel, non-canonical or tagged; a misaligned field: see
// plausible_address), and whatever
// passes may still fault: the capture path runs the walk under the fault guard
// (platform_fault_guard_*), which turns such a fault into a truncated, counted sample.
struct DirectReader {
    static constexpr uintptr_t kMinAddress = kMinObjectAddress;
    static constexpr uintptr_t kAddressLimit = kObjectAddressLimit;

    SPPROF_NO_SANITIZE_ADDRESS const void* view(uintptr_t addr, size_t n) const {
        const uintptr_t align = n >= 8 ? 8 : (n >= 4 ? 4 : (n >= 2 ? 2 : 1));
        // One unsigned compare for both ends: below kMinAddress wraps to a huge value.
        if (addr - kMinAddress >= kAddressLimit - kMinAddress || (addr & (align - 1)) != 0)
            return nullptr;
        return reinterpret_cast<const void*>(addr);
    }
    SPPROF_NO_SANITIZE_ADDRESS bool read(uintptr_t addr, void* out, size_t n) const {
        const void* p = view(addr, n);
        if (p == nullptr) return false;
        std::memcpy(out, p, n);
        return true;
    }
};

template <class R, class = void>
struct ReaderHasView : std::false_type {};
template <class R>
struct ReaderHasView<R, std::void_t<decltype(std::declval<const R&>().view(uintptr_t{}, size_t{}))>>
    : std::true_type {};

// The bytes of a T at addr, to load fields from with load_field(): the reader's view when it
// has one (one check, no copy), else a copy in *buf (one read). Null when unreadable.
template <class T, class R>
SPPROF_NO_SANITIZE_ADDRESS inline const unsigned char* read_object(const R& r, uintptr_t addr, T* buf) {
    static_assert(std::is_trivially_copyable<T>::value, "copied byte for byte");
    if constexpr (ReaderHasView<R>::value) {
        (void)buf;
        return static_cast<const unsigned char*>(r.view(addr, sizeof(T)));
    } else {
        if (!r.read(addr, buf, sizeof(T))) return nullptr;
        return reinterpret_cast<const unsigned char*>(buf);
    }
}

// One field of an object returned by read_object(). memcpy, not a cast: the bytes are a
// mirror of a struct we do not include, and this compiles to a single load.
template <class F>
SPPROF_NO_SANITIZE_ADDRESS inline F load_field(const unsigned char* obj, size_t offset) {
    F v;
    std::memcpy(&v, obj + offset, sizeof v);
    return v;
}

}  // namespace spprof
