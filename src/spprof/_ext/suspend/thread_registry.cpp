// suspend/thread_registry.cpp: the thread registry (see thread_registry.h).
#include "thread_registry.h"

#include <cstring>
#include <new>

namespace spprof {

// With no sampler thread, registry_add compacts once this many dead entries accumulated:
// large enough that short-lived thread bursts cost one pass per 64 exits, small enough that
// a process churning threads between sessions keeps the table (and the dead-name rights it
// holds) small.
constexpr size_t kAutoCompactDead = 64;

Error registry_init(ThreadRegistry& reg, PortReleaseFn release, size_t initial_capacity) {
    std::lock_guard<std::mutex> lock(reg.mu_);
    if (reg.enabled_.load(std::memory_order_relaxed))
        return Error::runtime("the Mach sampler's thread registry is already initialised");
    try {
        reg.entries_.reserve(initial_capacity);
    } catch (const std::bad_alloc&) {
        return Error::memory("cannot reserve the Mach sampler's thread registry");
    }
    reg.release_ = release;
    reg.dead_ = 0;
    reg.sampler_active_ = false;
    reg.enabled_.store(true, std::memory_order_release);
    reg.bump();
    return Error::none();
}

void registry_cleanup(ThreadRegistry& reg) {
    std::lock_guard<std::mutex> lock(reg.mu_);
    if (!reg.enabled_.load(std::memory_order_relaxed)) return;
    reg.enabled_.store(false, std::memory_order_release);
    for (const ThreadEntry& e : reg.entries_) {
        if (e.port != 0 && reg.release_ != nullptr) reg.release_(e.port);
    }
    reg.entries_.clear();
    reg.dead_ = 0;
    reg.bump();
}

bool registry_add(ThreadRegistry& reg, const ThreadEntry& entry) {
    std::lock_guard<std::mutex> lock(reg.mu_);
    const auto release = [&reg](uint32_t port) {
        if (port != 0 && reg.release_ != nullptr) reg.release_(port);
    };
    if (!reg.enabled_.load(std::memory_order_relaxed)) {
        // Disabled (cleanup ran): nobody will ever release this right but us.
        release(entry.port);
        return false;
    }
    for (const ThreadEntry& e : reg.entries_) {
        if (e.alive && e.thread_id == entry.thread_id) {
            release(entry.port);
            return false;
        }
    }
    if (!reg.sampler_active_ && reg.dead_ >= kAutoCompactDead) reg.compact_locked();
    try {
        reg.entries_.push_back(entry);
    } catch (const std::bad_alloc&) {
        release(entry.port);
        return false;
    }
    reg.entries_.back().alive = true;
    reg.bump();
    return true;
}

// Mark the first live entry matching `key` dead. Caller holds the registry mutex.
static bool mark_dead(std::vector<ThreadEntry>& entries, size_t& dead,
                      bool (*match)(const ThreadEntry&, uint64_t), uint64_t key) {
    for (ThreadEntry& e : entries) {
        if (e.alive && match(e, key)) {
            e.alive = false;
            ++dead;
            return true;
        }
    }
    return false;
}

bool registry_remove(ThreadRegistry& reg, uint64_t thread_id) {
    std::lock_guard<std::mutex> lock(reg.mu_);
    const bool found = mark_dead(
        reg.entries_, reg.dead_,
        [](const ThreadEntry& e, uint64_t key) { return e.thread_id == key; }, thread_id);
    if (found) reg.bump();
    return found;
}

bool registry_remove_pthread(ThreadRegistry& reg, uintptr_t pthread) {
    if (pthread == 0) return false;
    std::lock_guard<std::mutex> lock(reg.mu_);
    const bool found = mark_dead(
        reg.entries_, reg.dead_,
        [](const ThreadEntry& e, uint64_t key) { return e.pthread == key; },
        static_cast<uint64_t>(pthread));
    if (found) reg.bump();
    return found;
}

size_t registry_snapshot(const ThreadRegistry& reg, ThreadEntry* out, size_t cap) {
    std::lock_guard<std::mutex> lock(reg.mu_);
    size_t live = 0;
    for (const ThreadEntry& e : reg.entries_) {
        if (!e.alive) continue;
        if (live < cap) out[live] = e;
        ++live;
    }
    return live;
}

size_t registry_compact(ThreadRegistry& reg) {
    std::lock_guard<std::mutex> lock(reg.mu_);
    return reg.compact_locked();
}

size_t ThreadRegistry::compact_locked() {
    size_t kept = 0;
    size_t dropped = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].alive) {
            if (kept != i) entries_[kept] = entries_[i];
            ++kept;
        } else {
            if (entries_[i].port != 0 && release_ != nullptr) release_(entries_[i].port);
            ++dropped;
        }
    }
    entries_.resize(kept);
    dead_ = 0;
    if (dropped != 0) bump();
    return dropped;
}

size_t ThreadRegistry::count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size() - dead_;
}

bool ThreadRegistry::contains(uint64_t thread_id) const {
    return with_entry(thread_id, [](const ThreadEntry&) {});
}

bool ThreadRegistry::find(uint64_t thread_id, ThreadEntry* out) const {
    return with_entry(thread_id, [out](const ThreadEntry& e) { *out = e; });
}

void ThreadRegistry::set_sampler_active(bool active) {
    std::lock_guard<std::mutex> lock(mu_);
    sampler_active_ = active;
}

void ThreadRegistry::reset_after_fork() {
    // The parent's mutex and vector may have been mid-update in a thread the child does not
    // have (a push_back frees the old buffer before it stores the new one): rebuild both in
    // place instead of touching them. The old vector's bytes are parked in a static so its
    // buffer stays reachable (leak checkers stay quiet) and is never freed: its state cannot
    // be trusted enough for that. The parent's ports are not ours to release.
    alignas(std::vector<ThreadEntry>) static unsigned char parked[sizeof(std::vector<ThreadEntry>)];
    std::memcpy(parked, static_cast<const void*>(&entries_), sizeof parked);
    new (&mu_) std::mutex();
    new (&entries_) std::vector<ThreadEntry>();
    dead_ = 0;
    sampler_active_ = false;
    bump();
}

}  // namespace spprof
