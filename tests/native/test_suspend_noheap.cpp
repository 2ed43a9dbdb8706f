// test_suspend_noheap.cpp: nothing between suspend and resume allocates.
//
// The Mach sampler's suspended window (suspend_and_copy with the frame-pointer walk and the
// cached reader, exactly as darwin_mach.cpp composes them) runs here over a fake thread layer
// and a fake stack, with malloc/calloc/realloc/free and operator new interposed: any call
// made while the fake thread is "suspended" is counted. A negative control allocates inside
// the window on purpose, so the check is known to bite. Skipped under AddressSanitizer, which
// owns the allocator.
#if !defined(__SANITIZE_ADDRESS__)

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "harness.h"
#include "suspend/cached_reader.h"
#include "unwind/fp_walk.h"
#include "suspend/suspend_cycle.h"

extern "C" void* __libc_malloc(size_t);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void __libc_free(void*);

namespace {
std::atomic<bool> g_in_window{false};
std::atomic<int> g_window_allocs{0};
inline void note() {
    if (g_in_window.load(std::memory_order_relaxed)) g_window_allocs.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" void* malloc(size_t n) {
    note();
    return __libc_malloc(n);
}
extern "C" void* calloc(size_t a, size_t b) {
    note();
    return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, size_t n) {
    note();
    return __libc_realloc(p, n);
}
extern "C" void free(void* p) {
    note();
    __libc_free(p);
}
void* operator new(size_t n) {
    note();
    void* p = __libc_malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept {
    note();
    __libc_free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }

namespace {

using namespace spprof;

// A fake stack of frame records {saved fp, return address}, growing down like a real one.
struct FakeStack {
    std::vector<uint64_t> words = std::vector<uint64_t>(4096, 0);
    RegisterContext regs;
    StackBounds bounds;
    FakeStack(int depth) {
        const uintptr_t base = reinterpret_cast<uintptr_t>(words.data());
        bounds.lo = base;
        bounds.hi = base + words.size() * sizeof(uint64_t);
        // Frames from the leaf (low addresses) towards the root (high), 8 words apart.
        uintptr_t fp = base + 64 * sizeof(uint64_t);
        regs.pc = 0x401000;
        regs.sp = fp - 64;
        regs.fp = fp;
        for (int i = 0; i < depth; ++i) {
            const uintptr_t next = fp + 8 * sizeof(uint64_t);
            auto* rec = reinterpret_cast<uint64_t*>(fp);
            rec[0] = (i + 1 < depth) ? next : 0;  // saved fp; 0 ends the chain
            rec[1] = 0x402000 + 16 * i;           // return address
            fp = next;
        }
    }
};

// Suspended from suspend() until resume(): the window the rules are about.
struct FakeLayer {
    using Handle = int;
    const FakeStack* stack = nullptr;
    SuspendStatus suspend(Handle) {
        g_in_window.store(true);
        return SuspendStatus::kOk;
    }
    bool get_state(Handle, RegisterContext* out) {
        *out = stack->regs;
        return true;
    }
    ResumeStatus resume(Handle) {
        g_in_window.store(false);
        return ResumeStatus::kOk;
    }
    uint64_t now_ns() { return 0; }
};

struct MemcpyFetch {  // what mach_vm_read_overwrite does, minus the kernel
    bool operator()(uintptr_t addr, void* out, size_t n) const {
        std::memcpy(out, reinterpret_cast<const void*>(addr), n);
        return true;
    }
};

}  // namespace

TEST(suspended_window_allocates_nothing) {
    FakeStack stack(40);
    FakeLayer layer;
    layer.stack = &stack;
    // Control thread: everything pre-allocated before the first suspend, as the sampler does.
    std::vector<uint64_t> pcs(128);
    CachedReader<MemcpyFetch> reader;
    uint64_t sink = 0;
    g_window_allocs.store(0);
    for (int round = 0; round < 1000; ++round) {
        reader.reset();
        UnwindStatus nw;
        const CycleResult r = suspend_and_copy(layer, 1, [&](const RegisterContext& regs) {
            nw = walk_frame_pointers(StackReader{}, regs, stack.bounds, pcs.data(), static_cast<uint32_t>(pcs.size()));
            uint64_t word = 0;
            for (uint32_t i = 0; i < 16; ++i)  // Python-frame reads go through the reader
                if (reader.read(stack.bounds.lo + 512 + 8 * i, &word, sizeof word)) sink += word;
        });
        CHECK(r.outcome == CycleResult::kSampled);
        CHECK_EQ(nw.depth, 41u);  // the pc and 40 return addresses
    }
    CHECK(!g_in_window.load());
    CHECK_EQ(g_window_allocs.load(), 0);
    (void)sink;
}

TEST(suspended_window_allocation_check_bites) {
    FakeStack stack(4);
    FakeLayer layer;
    layer.stack = &stack;
    g_window_allocs.store(0);
    suspend_and_copy(layer, 1, [&](const RegisterContext&) {
        std::vector<int> v(10);  // the negative control: an allocation inside the window
        v[0] = 1;
    });
    CHECK(g_window_allocs.load() >= 1);
    g_window_allocs.store(0);
}

#endif  // !__SANITIZE_ADDRESS__
