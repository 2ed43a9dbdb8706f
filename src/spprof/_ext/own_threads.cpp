// own_threads.cpp: the table of spprof's own threads (see own_threads.h).
#include "own_threads.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "platform/platform.h"

namespace spprof {
namespace {

// A slot holds a live thread's tid, or a tid with kLeft set: a thread that left (its last
// instruction is near) and is still spprof's for kLeftGraceNs, because /proc lists it until the
// kernel has torn it down and a scan in that window took it for the program's (a warning that
// its timer could not be armed). After the grace a new thread may have its tid: the slot is free.
std::atomic<uint64_t> g_tids[kMaxOwnThreads];  // 0: free
std::atomic<uint64_t> g_left_ns[kMaxOwnThreads];
constexpr uint64_t kLeft = 1ull << 63;
constexpr uint64_t kLeftGraceNs = 1000000000ull;
std::atomic<uint64_t> g_ended_cpu_ns{0};
std::atomic<uint64_t> g_overflow{0};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "read from any thread");

}  // namespace

namespace {
bool left_long_ago(uint32_t i, uint64_t now) {
    return now - g_left_ns[i].load(std::memory_order_acquire) >= kLeftGraceNs;
}
}  // namespace

void own_thread_enter() {
    const uint64_t tid = platform_current_tid();
    for (auto& slot : g_tids)
        if (slot.load(std::memory_order_acquire) == tid) return;
    for (auto& slot : g_tids) {
        uint64_t expected = 0;
        if (slot.compare_exchange_strong(expected, tid, std::memory_order_acq_rel)) return;
    }
    // No free slot: take one whose thread left more than the grace ago.
    const uint64_t now = platform_monotonic_ns();
    for (uint32_t i = 0; i < kMaxOwnThreads; ++i) {
        uint64_t old = g_tids[i].load(std::memory_order_acquire);
        if ((old & kLeft) == 0 || !left_long_ago(i, now)) continue;
        if (g_tids[i].compare_exchange_strong(old, tid, std::memory_order_acq_rel)) return;
    }
    g_overflow.fetch_add(1, std::memory_order_relaxed);
}

namespace {
// What own_thread_create hands its new thread; on the starter's stack, which waits for
// `entered` before it returns.
struct OwnStart {
    void* (*fn)(void*);
    void* arg;
    std::atomic<bool> entered{false};
};

void* own_start_trampoline(void* p) {
    auto* start = static_cast<OwnStart*>(p);
    void* (*fn)(void*) = start->fn;
    void* arg = start->arg;
    own_thread_enter();
    start->entered.store(true, std::memory_order_release);  // `start` may be gone after this
    return fn(arg);
}
}  // namespace

int own_thread_create(pthread_t* thread, void* (*fn)(void*), void* arg) {
    OwnStart start{fn, arg};
    const int rc = platform_thread_create(thread, &own_start_trampoline, &start);
    if (rc != 0) return rc;
    // A created thread runs soon; until it is in the table a scan could take it for the
    // program's. `start` lives on this stack, so the wait ends only when the thread has read it.
    while (!start.entered.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    return 0;
}

OwnFdTableScope::OwnFdTableScope() { platform_own_fd_table_enter(); }
OwnFdTableScope::~OwnFdTableScope() { platform_own_fd_table_leave(); }

namespace {
struct Apart {
    void (*fn)(void*);
    void* arg;
};

void* run_apart_main(void* p) {
    OwnThreadScope own;  // its CPU time is spprof's in the balance
    OwnFdTableScope table;
    const auto* apart = static_cast<const Apart*>(p);
    apart->fn(apart->arg);
    return nullptr;
}
}  // namespace

void own_thread_run_apart(void (*fn)(void*), void* arg) {
    Apart apart{fn, arg};
    pthread_t thread;
    if (own_thread_create(&thread, &run_apart_main, &apart) != 0) {
        fn(arg);
        return;
    }
    pthread_join(thread, nullptr);
}

void own_thread_leave() {
    const uint64_t tid = platform_current_tid();
    for (auto& slot : g_tids) {
        if (slot.load(std::memory_order_acquire) != tid) continue;
        uint64_t cpu = 0;
        // Counted before the slot is freed: a reader may count it twice for an instant, never
        // lose it.
        if (platform_thread_cpu_ns_of(tid, 0, &cpu)) g_ended_cpu_ns.fetch_add(cpu, std::memory_order_relaxed);
        const size_t i = static_cast<size_t>(&slot - g_tids);
        g_left_ns[i].store(platform_monotonic_ns(), std::memory_order_release);
        slot.store(tid | kLeft, std::memory_order_release);
        return;
    }
}

bool own_thread(uint64_t tid) {
    if (tid == 0) return false;
    for (uint32_t i = 0; i < kMaxOwnThreads; ++i) {
        const uint64_t v = g_tids[i].load(std::memory_order_acquire);
        if (v == tid) return true;
        if (v == (tid | kLeft) && !left_long_ago(i, platform_monotonic_ns())) return true;
    }
    return false;
}

uint64_t own_threads_cpu_ns() {
    uint64_t total = g_ended_cpu_ns.load(std::memory_order_relaxed);
    for (const auto& slot : g_tids) {
        const uint64_t tid = slot.load(std::memory_order_acquire);
        uint64_t cpu = 0;
        // A thread that left is in the ended total.
        if (tid != 0 && (tid & kLeft) == 0 && platform_thread_cpu_ns_of(tid, 0, &cpu)) total += cpu;
    }
    return total;
}

uint64_t own_threads_ended_cpu_ns() { return g_ended_cpu_ns.load(std::memory_order_relaxed); }

void own_threads_after_fork_child() {
    for (auto& slot : g_tids) slot.store(0, std::memory_order_relaxed);
    for (auto& t : g_left_ns) t.store(0, std::memory_order_relaxed);
    g_ended_cpu_ns.store(0, std::memory_order_relaxed);
}

uint64_t own_threads_overflow() { return g_overflow.load(std::memory_order_relaxed); }

}  // namespace spprof
