// reader.h: how the frame walk (framewalker.h) reads memory, and its fast path for readers
// of the caller's own memory.
//
// A Reader has `bool read(addr, out, n) const`: copy n bytes or fail; it always fails below
// 4096 (the null page), which is how the walk sees the end of a chain. A reader of memory that
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

namespace spprof {

// Reads the caller's own memory. For the Linux handler, which only ever walks the thread it
// interrupted: that chain is consistent at every instruction boundary of that thread, so the
// checks here (null page, natural alignment) catch torn or stale values and a load is enough.
struct DirectReader {
    // The first page is never mapped.
    static constexpr uintptr_t kNullPageEnd = 4096;

    const void* view(uintptr_t addr, size_t n) const {
        const uintptr_t align = n >= 8 ? 8 : (n >= 4 ? 4 : (n >= 2 ? 2 : 1));
        if (addr < kNullPageEnd || (addr & (align - 1)) != 0) return nullptr;
        return reinterpret_cast<const void*>(addr);
    }
    bool read(uintptr_t addr, void* out, size_t n) const {
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
inline const unsigned char* read_object(const R& r, uintptr_t addr, T* buf) {
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
inline F load_field(const unsigned char* obj, size_t offset) {
    F v;
    std::memcpy(&v, obj + offset, sizeof v);
    return v;
}

}  // namespace spprof
