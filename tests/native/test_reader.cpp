// test_reader.cpp: the frame walk's readers: DirectReader's view (low memory, impossible high
// addresses and misalignment rejected, otherwise the memory itself, no copy) and
// read_object()'s choice between that view and one read() into a copy for readers without one
// (the Mach reader).
#include <cstdint>
#include <cstring>

#include "harness.h"
#include "capture/reader.h"

using namespace spprof;

namespace {

struct Obj {
    uint64_t a;
    uint64_t b;
    char c;
};

// A reader without view(): counts reads, serves them from one object, fails when told.
struct CopyReader {
    const Obj* src;
    mutable int reads = 0;
    bool fail = false;
    bool read(uintptr_t addr, void* out, size_t n) const {
        ++reads;
        if (fail || addr != reinterpret_cast<uintptr_t>(src) || n != sizeof(Obj)) return false;
        std::memcpy(out, src, n);
        return true;
    }
};

}  // namespace

static_assert(ReaderHasView<DirectReader>::value, "the signal handler's reader has the fast path");
static_assert(!ReaderHasView<CopyReader>::value, "readers without view() keep read()");

TEST(direct_reader_view_checks_low_memory_high_bits_and_alignment) {
    const DirectReader r;
    alignas(8) static unsigned char buf[32];
    const auto base = reinterpret_cast<uintptr_t>(buf);
    CHECK(r.view(base, 16) == buf);  // the memory itself: no copy
    CHECK(r.view(0, 8) == nullptr);
    CHECK(r.view(4088, 8) == nullptr);  // inside the null page
    CHECK(r.view(0xEC00, 8) == nullptr);  // a torn greenlet link seen in the field: below 64 KiB
    CHECK(r.view(0xEC00, 4) == nullptr);
    CHECK(r.view(0xFFF8, 8) == nullptr);
    CHECK(r.view(0x10000, 8) != nullptr);  // the first address that may be mapped
    CHECK(r.view(0x10004, 8) == nullptr);  // misaligned, in range
    CHECK(r.view(0x900000000, 8) != nullptr);  // plausible: only the fault guard can tell
    CHECK(r.view(uintptr_t{1} << 56, 8) == nullptr);  // beyond any user address
    CHECK(r.view(0xFFFF800000001000ull, 8) == nullptr);  // kernel half
    CHECK(r.view(0xFFFFFFFFFFFFFFF8ull, 8) == nullptr);
    CHECK(r.view(0xFFFFFFFFFFFFFFF8ull, 4) == nullptr);
    CHECK(r.view(base + 4, 8) == nullptr);  // an 8-byte object must be 8-aligned
    CHECK(r.view(base + 4, 4) == buf + 4);
    CHECK(r.view(base + 2, 4) == nullptr);
    CHECK(r.view(base + 1, 1) == buf + 1);
    uint64_t v = 0;
    std::memcpy(buf + 8, "\x11\x22\x33\x44\x55\x66\x77\x88", 8);
    CHECK(r.read(base + 8, &v, sizeof v));
    CHECK_EQ(v, 0x8877665544332211ull);
    CHECK(!r.read(base + 3, &v, sizeof v));
    CHECK(!r.read(16, &v, sizeof v));
}

TEST(read_object_uses_the_view_of_a_direct_reader) {
    static Obj obj = {1, 2, 'x'};
    Obj copy{};
    const unsigned char* p = read_object(DirectReader{}, reinterpret_cast<uintptr_t>(&obj), &copy);
    CHECK(p == reinterpret_cast<const unsigned char*>(&obj));
    obj.b = 42;  // loads see the live memory, not a snapshot
    CHECK_EQ(load_field<uint64_t>(p, offsetof(Obj, b)), 42u);
    CHECK_EQ(load_field<char>(p, offsetof(Obj, c)), 'x');
    CHECK_EQ(copy.b, 0u);  // never written
    CHECK(read_object(DirectReader{}, 8, &copy) == nullptr);
}

TEST(read_object_copies_once_without_a_view) {
    const Obj obj = {7, 8, 'y'};
    CopyReader r{&obj};
    Obj copy{};
    const unsigned char* p = read_object(r, reinterpret_cast<uintptr_t>(&obj), &copy);
    CHECK(p == reinterpret_cast<const unsigned char*>(&copy));
    CHECK_EQ(r.reads, 1);
    CHECK_EQ(load_field<uint64_t>(p, offsetof(Obj, a)), 7u);
    CHECK_EQ(load_field<char>(p, offsetof(Obj, c)), 'y');
    r.fail = true;
    CHECK(read_object(r, reinterpret_cast<uintptr_t>(&obj), &copy) == nullptr);
}
