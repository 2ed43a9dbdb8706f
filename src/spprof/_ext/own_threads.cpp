// own_threads.cpp: the table of spprof's own threads (see own_threads.h).
#include "own_threads.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "platform/platform.h"

namespace spprof {
namespace {

std::atomic<uint64_t> g_tids[kMaxOwnThreads];  // 0: free
std::atomic<uint64_t> g_ended_cpu_ns{0};
std::atomic<uint64_t> g_overflow{0};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "read from any thread");

}  // namespace

void own_thread_enter() {
    const uint64_t tid = platform_current_tid();
    if (own_thread(tid)) return;
    for (auto& slot : g_tids) {
        uint64_t expected = 0;
        if (slot.compare_exchange_strong(expected, tid, std::memory_order_acq_rel)) return;
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
    const int rc = pthread_create(thread, nullptr, &own_start_trampoline, &start);
    if (rc != 0) return rc;
    // A created thread runs soon; until it is in the table a scan could take it for the
    // program's. `start` lives on this stack, so the wait ends only when the thread has read it.
    while (!start.entered.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    return 0;
}

void own_thread_leave() {
    const uint64_t tid = platform_current_tid();
    for (auto& slot : g_tids) {
        if (slot.load(std::memory_order_acquire) != tid) continue;
        uint64_t cpu = 0;
        // Counted before the slot is freed: a reader may count it twice for an instant, never
        // lose it.
        if (platform_thread_cpu_ns_of(tid, 0, &cpu)) g_ended_cpu_ns.fetch_add(cpu, std::memory_order_relaxed);
        slot.store(0, std::memory_order_release);
        return;
    }
}

bool own_thread(uint64_t tid) {
    if (tid == 0) return false;
    for (const auto& slot : g_tids)
        if (slot.load(std::memory_order_acquire) == tid) return true;
    return false;
}

uint64_t own_threads_cpu_ns() {
    uint64_t total = g_ended_cpu_ns.load(std::memory_order_relaxed);
    for (const auto& slot : g_tids) {
        const uint64_t tid = slot.load(std::memory_order_acquire);
        uint64_t cpu = 0;
        if (tid != 0 && platform_thread_cpu_ns_of(tid, 0, &cpu)) total += cpu;
    }
    return total;
}

uint64_t own_threads_ended_cpu_ns() { return g_ended_cpu_ns.load(std::memory_order_relaxed); }

void own_threads_after_fork_child() {
    for (auto& slot : g_tids) slot.store(0, std::memory_order_relaxed);
    g_ended_cpu_ns.store(0, std::memory_order_relaxed);
}

uint64_t own_threads_overflow() { return g_overflow.load(std::memory_order_relaxed); }

}  // namespace spprof
