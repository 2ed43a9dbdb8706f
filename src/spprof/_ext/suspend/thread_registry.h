// suspend/thread_registry.h: every thread of the process the Mach sampler could suspend.
//
// Fed from two sides: the pthread introspection hook adds a thread on THREAD_START (running
// on the new thread itself, so its id, port and stack bounds are read without touching any
// other thread) and marks it dead on THREAD_TERMINATE; at sampler start, task_threads() seeds
// the threads that existed before the hook (the main thread included). Each entry owns one
// send right to the thread's port: holding it keeps the port name from being reused by a
// later thread while the sampler may still use it. The right is given back through the
// ReleaseFn (mach_port_deallocate on macOS, a counter in tests) exactly once: when a
// duplicate is refused, when compaction drops a dead entry, or at cleanup.
//
// Removal only marks an entry dead; compaction frees it. Who may compact: while a sampler
// thread exists (set_sampler_active(true)), only that thread, between ticks, right before it
// takes a new snapshot, so no port it still holds a copy of is released under it; otherwise
// registry_add compacts by itself when dead entries pile up.
//
// Locking: one mutex, held only for short copies and never while any thread is suspended
// (the sampler snapshots before its suspended windows). Python-free and portable; tested on
// Linux with concurrent adders and removers (tests/native/test_suspend_registry.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "../error.h"

namespace spprof {

// Name buffer size: MAXTHREADNAMESIZE on macOS (64 including the NUL).
constexpr size_t kThreadNameBytes = 64;

struct ThreadEntry {
    uint64_t thread_id = 0;  // system-wide unique id (THREAD_IDENTIFIER_INFO.thread_id)
    uint32_t port = 0;       // owned send right (mach_port_t); 0 = none
    uintptr_t pthread = 0;   // pthread_t as an integer, 0 when unknown; never dereferenced here
    uintptr_t stack_lo = 0;  // stack bounds, 0/0 when unknown
    uintptr_t stack_hi = 0;
    bool alive = true;       // false once THREAD_TERMINATE (or a failed suspend) reported it gone
};

using PortReleaseFn = void (*)(uint32_t port);

class ThreadRegistry;

// Prepare `reg`: reserve room for `initial_capacity` entries so thread starts rarely allocate.
// Control thread. Fails when the reservation fails (kMemory) or when called twice without
// registry_cleanup (kRuntime).
Error registry_init(ThreadRegistry& reg, PortReleaseFn release, size_t initial_capacity);
// Release every port and forget every entry; afterwards add/remove are ignored until the
// next registry_init. Control thread, no sampler thread running.
void registry_cleanup(ThreadRegistry& reg);
// Add a live thread. When a live entry with the same thread_id exists the new entry's port is
// released and false is returned (seeding and the START hook may race for the same thread).
// Any thread (the START hook runs on the new thread). May allocate; takes the mutex.
bool registry_add(ThreadRegistry& reg, const ThreadEntry& entry);
// Mark the live entry with this thread_id dead. Returns whether one was found. Any thread.
bool registry_remove(ThreadRegistry& reg, uint64_t thread_id);
// Same, matching the pthread_t (THREAD_TERMINATE reports the pthread_t).
bool registry_remove_pthread(ThreadRegistry& reg, uintptr_t pthread);
// Copy up to `cap` live entries into `out`; returns how many live entries exist (may exceed
// `cap`: grow the buffer and call again). Does not allocate; takes the mutex.
size_t registry_snapshot(const ThreadRegistry& reg, ThreadEntry* out, size_t cap);
// Drop dead entries, releasing their ports. Returns how many were dropped. Only the thread
// that owns compaction (see above). Takes the mutex.
size_t registry_compact(ThreadRegistry& reg);

class ThreadRegistry {
public:
    ThreadRegistry() = default;
    ThreadRegistry(const ThreadRegistry&) = delete;
    ThreadRegistry& operator=(const ThreadRegistry&) = delete;
    ~ThreadRegistry() { registry_cleanup(*this); }

    // Live entries. Any thread.
    size_t count() const;
    // Whether a live entry has this id. Any thread.
    bool contains(uint64_t thread_id) const;
    // Find a live entry by id and copy it to *out. Any thread.
    bool find(uint64_t thread_id, ThreadEntry* out) const;
    // Run fn(const ThreadEntry&) on the live entry with this id while the mutex is held, so its
    // port stays valid during fn; fn must not take other locks. Returns whether it was found.
    template <class Fn>
    bool with_entry(uint64_t thread_id, Fn&& fn) const {
        std::lock_guard<std::mutex> lock(mu_);
        for (const ThreadEntry& e : entries_) {
            if (e.alive && e.thread_id == thread_id) {
                fn(e);
                return true;
            }
        }
        return false;
    }
    // Bumped by every add, remove and compaction: the sampler rebuilds its targets only when
    // this changed. Any thread.
    uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
    // Whether registry_init succeeded and registry_cleanup has not run. Any thread.
    bool enabled() const { return enabled_.load(std::memory_order_acquire); }
    // While true, only the sampler thread compacts (see the header comment). Control thread.
    void set_sampler_active(bool active);
    // After fork(), in the child: the mutex may have been held by a thread that does not exist
    // here, and the ports named the parent's threads. Forget everything without releasing
    // (the child owns none of those rights) and leave the registry enabled and empty.
    void reset_after_fork();

private:
    friend Error registry_init(ThreadRegistry&, PortReleaseFn, size_t);
    friend void registry_cleanup(ThreadRegistry&);
    friend bool registry_add(ThreadRegistry&, const ThreadEntry&);
    friend bool registry_remove(ThreadRegistry&, uint64_t);
    friend bool registry_remove_pthread(ThreadRegistry&, uintptr_t);
    friend size_t registry_snapshot(const ThreadRegistry&, ThreadEntry*, size_t);
    friend size_t registry_compact(ThreadRegistry&);

    size_t compact_locked();  // mu_ held
    void bump() { generation_.fetch_add(1, std::memory_order_acq_rel); }

    mutable std::mutex mu_;
    std::vector<ThreadEntry> entries_;  // guarded by mu_
    size_t dead_ = 0;                   // dead entries in entries_, guarded by mu_
    bool sampler_active_ = false;       // guarded by mu_
    PortReleaseFn release_ = nullptr;   // guarded by mu_
    std::atomic<bool> enabled_{false};
    std::atomic<uint64_t> generation_{0};
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "generation is polled every tick");
static_assert(std::atomic<bool>::is_always_lock_free, "enabled is read by the START hook");

}  // namespace spprof
