// test_suspend_registry.cpp: the Mach sampler's thread registry: add/remove/compact, duplicate
// refusal, who compacts, and every port released exactly once under concurrent threads.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "harness.h"
#include "suspend/thread_registry.h"

using namespace spprof;

namespace {

constexpr uint32_t kPorts = 1u << 16;
std::atomic<uint32_t> g_released[kPorts];

void release_port(uint32_t port) { g_released[port % kPorts].fetch_add(1); }

void reset_released() {
    for (auto& r : g_released) r.store(0);
}

uint32_t released(uint32_t port) { return g_released[port].load(); }

ThreadEntry entry(uint64_t tid, uint32_t port, uintptr_t pthread = 0) {
    ThreadEntry e;
    e.thread_id = tid;
    e.port = port;
    e.pthread = pthread;
    e.stack_lo = 0x1000;
    e.stack_hi = 0x2000;
    return e;
}

}  // namespace

TEST(registry_add_remove_compact) {
    reset_released();
    ThreadRegistry reg;
    CHECK(registry_init(reg, release_port, 8).ok());
    CHECK(!registry_init(reg, release_port, 8).ok());  // twice
    const uint64_t gen0 = reg.generation();
    CHECK(registry_add(reg, entry(100, 1)));
    CHECK(registry_add(reg, entry(101, 2, 0xabc0)));
    CHECK(registry_add(reg, entry(102, 3)));
    CHECK(reg.generation() > gen0);
    CHECK_EQ(reg.count(), static_cast<size_t>(3));
    CHECK(reg.contains(101));

    CHECK(registry_remove(reg, 100));
    CHECK(!registry_remove(reg, 100));  // already dead
    CHECK(registry_remove_pthread(reg, 0xabc0));
    CHECK(!registry_remove_pthread(reg, 0));
    CHECK_EQ(reg.count(), static_cast<size_t>(1));
    CHECK(!reg.contains(100));
    CHECK_EQ(released(1), 0u);  // removal only marks; the port is still held

    ThreadEntry snap[4];
    CHECK_EQ(registry_snapshot(reg, snap, 4), static_cast<size_t>(1));
    CHECK_EQ(snap[0].thread_id, 102ull);

    CHECK_EQ(registry_compact(reg), static_cast<size_t>(2));
    CHECK_EQ(released(1), 1u);
    CHECK_EQ(released(2), 1u);
    CHECK_EQ(released(3), 0u);
    CHECK_EQ(registry_compact(reg), static_cast<size_t>(0));

    registry_cleanup(reg);
    CHECK_EQ(released(3), 1u);
    CHECK(!reg.enabled());
    // Disabled: an add gives its port back at once.
    CHECK(!registry_add(reg, entry(200, 7)));
    CHECK_EQ(released(7), 1u);
    CHECK(registry_init(reg, release_port, 8).ok());  // usable again
    registry_cleanup(reg);
}

TEST(registry_refuses_duplicate_live_id) {
    reset_released();
    ThreadRegistry reg;
    CHECK(registry_init(reg, release_port, 4).ok());
    CHECK(registry_add(reg, entry(5, 10)));
    CHECK(!registry_add(reg, entry(5, 11)));  // seeding raced the START hook
    CHECK_EQ(released(11), 1u);
    CHECK_EQ(released(10), 0u);
    CHECK(registry_remove(reg, 5));
    CHECK(registry_add(reg, entry(5, 12)));  // a dead entry does not block a new one
    ThreadEntry e;
    CHECK(reg.find(5, &e));
    CHECK_EQ(e.port, 12u);
    registry_cleanup(reg);
    CHECK_EQ(released(10), 1u);
    CHECK_EQ(released(12), 1u);
}

TEST(registry_snapshot_reports_needed_capacity) {
    reset_released();
    ThreadRegistry reg;
    CHECK(registry_init(reg, release_port, 4).ok());
    for (uint32_t i = 0; i < 10; ++i) CHECK(registry_add(reg, entry(1000 + i, 100 + i)));
    ThreadEntry snap[4];
    CHECK_EQ(registry_snapshot(reg, snap, 4), static_cast<size_t>(10));
    CHECK_EQ(snap[3].thread_id, 1003ull);
    CHECK_EQ(registry_snapshot(reg, nullptr, 0), static_cast<size_t>(10));
    registry_cleanup(reg);
}

TEST(registry_only_sampler_compacts_while_active) {
    reset_released();
    ThreadRegistry reg;
    CHECK(registry_init(reg, release_port, 4).ok());
    reg.set_sampler_active(true);
    uint32_t port = 1;
    for (int i = 0; i < 200; ++i) {
        CHECK(registry_add(reg, entry(5000 + i, port)));
        CHECK(registry_remove(reg, 5000 + i));
        ++port;
    }
    // 200 dead entries and not one port released: a snapshot copy may still name them.
    uint32_t total = 0;
    for (uint32_t p = 1; p < port; ++p) total += released(p);
    CHECK_EQ(total, 0u);
    reg.set_sampler_active(false);
    CHECK(registry_add(reg, entry(9999, 5000)));  // add now compacts the pile
    total = 0;
    for (uint32_t p = 1; p < port; ++p) total += released(p);
    CHECK_EQ(total, 200u);
    registry_cleanup(reg);
}

TEST(registry_concurrent_add_remove_compact) {
    reset_released();
    ThreadRegistry reg;
    CHECK(registry_init(reg, release_port, 16).ok());
    reg.set_sampler_active(true);
    constexpr int kThreads = 8;
    constexpr int kPerThread = 2000;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> snapshots{0};
    bool bad_snapshot = false;
    // The "sampler": snapshots and compacts between ticks; every snapshot entry must be alive.
    std::thread sampler([&] {
        std::vector<ThreadEntry> buf(64);
        while (!stop.load()) {
            registry_compact(reg);
            size_t n = registry_snapshot(reg, buf.data(), buf.size());
            if (n > buf.size()) {
                buf.resize(n * 2);
                continue;
            }
            for (size_t i = 0; i < n; ++i) {
                if (!buf[i].alive || buf[i].port == 0) bad_snapshot = true;
            }
            snapshots.fetch_add(1);
        }
    });
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t) {
        workers.emplace_back([&reg, t] {
            for (int i = 0; i < kPerThread; ++i) {
                const uint64_t tid = static_cast<uint64_t>(t) * 100000 + i;
                const uint32_t port = static_cast<uint32_t>(1 + t * kPerThread + i);
                registry_add(reg, entry(tid, port, static_cast<uintptr_t>(tid * 16 + 16)));
                if (i % 2 == 0) {  // half exit, alternating both removal paths
                    if (i % 4 == 0) registry_remove(reg, tid);
                    else registry_remove_pthread(reg, static_cast<uintptr_t>(tid * 16 + 16));
                }
            }
        });
    }
    for (auto& w : workers) w.join();
    stop.store(true);
    sampler.join();
    CHECK(!bad_snapshot);
    CHECK(snapshots.load() > 0);
    CHECK_EQ(reg.count(), static_cast<size_t>(kThreads * kPerThread / 2));
    registry_compact(reg);
    // Dead ones released exactly once; live ones not yet.
    bool ok = true;
    for (int t = 0; t < kThreads; ++t) {
        for (int i = 0; i < kPerThread; ++i) {
            const uint32_t port = static_cast<uint32_t>(1 + t * kPerThread + i);
            if (released(port) != (i % 2 == 0 ? 1u : 0u)) ok = false;
        }
    }
    CHECK(ok);
    reg.set_sampler_active(false);
    registry_cleanup(reg);
    ok = true;
    for (uint32_t p = 1; p <= kThreads * kPerThread; ++p) {
        if (released(p) != 1u) ok = false;
    }
    CHECK(ok);
}

TEST(registry_reset_after_fork_forgets_without_releasing) {
    reset_released();
    ThreadRegistry reg;
    CHECK(registry_init(reg, release_port, 4).ok());
    CHECK(registry_add(reg, entry(1, 40)));
    reg.reset_after_fork();
    CHECK_EQ(reg.count(), static_cast<size_t>(0));
    CHECK(reg.enabled());
    CHECK_EQ(released(40), 0u);
    CHECK(registry_add(reg, entry(1, 41)));
    registry_cleanup(reg);
    CHECK_EQ(released(41), 1u);
    CHECK_EQ(released(40), 0u);
}
