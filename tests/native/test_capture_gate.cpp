// test_capture_gate.cpp: stop() never returns while a capture still uses the old table.
//
// A litmus test of the store-buffering pattern the gate closes. Each round, a "capture"
// thread enters the gate and keeps the table it got for a moment, while the main thread
// closes the gate; the instant close_and_wait() returns, the main thread marks the round
// "freed". A capture that still holds the round's table after that is the use-after-free
// stop() must rule out. Rounds start together (a spin barrier), so both sides run their
// store-then-load at the same time, which is when a store buffer can reorder them.
//
// With the old orderings (release stores, acquire loads) the same harness sees violations
// on x86-64 (a few per 100,000 rounds on this 2-vCPU VM); the gate must see none.
#include <atomic>
#include <cstdint>
#include <thread>

#include "capture/capture_gate.h"
#include "harness.h"

using namespace spprof;

namespace {

struct Table {
    std::atomic<uint64_t> freed_round{0};
};

// The gate as it was before (signal_handler.cpp at 2df7638), for the negative control.
struct OldGate {
    std::atomic<Table*> target{nullptr};
    std::atomic<int> in_flight{0};
    Table* enter() {
        in_flight.fetch_add(1, std::memory_order_acq_rel);
        return target.load(std::memory_order_acquire);
    }
    void leave() { in_flight.fetch_sub(1, std::memory_order_acq_rel); }
    void publish(Table* t) { target.store(t, std::memory_order_release); }
    bool close_and_wait() {
        target.store(nullptr, std::memory_order_release);
        while (in_flight.load(std::memory_order_acquire) != 0) {
        }
        return true;
    }
};

template <class Gate>
uint64_t violations(Gate& gate, uint64_t rounds) {
    Table table;
    std::atomic<uint64_t> go{0}, done{0};
    uint64_t seen = 0;
    std::thread capture([&] {
        for (uint64_t r = 1; r <= rounds; ++r) {
            while (go.load(std::memory_order_acquire) < r) {
            }
            Table* t = gate.enter();
            if (t != nullptr) {
                // Hold it briefly, then check it was not freed under us.
                for (volatile int i = 0; i < 200; i = i + 1) {
                }
                if (t->freed_round.load(std::memory_order_acquire) == r) ++seen;
            }
            gate.leave();
            done.store(r, std::memory_order_release);
        }
    });
    for (uint64_t r = 1; r <= rounds; ++r) {
        gate.publish(&table);
        go.store(r, std::memory_order_release);
        gate.close_and_wait();
        table.freed_round.store(r, std::memory_order_release);  // "freed"
        while (done.load(std::memory_order_acquire) < r) {
        }
    }
    capture.join();
    return seen;
}

}  // namespace

TEST(capture_gate_close_waits_for_every_capture_that_saw_the_table) {
    CaptureGate<Table> gate;
    CHECK_EQ(violations(gate, 200000), 0u);
    CHECK_EQ(gate.in_flight(), 0);
}

TEST(capture_gate_negative_control_old_orderings) {
    // Informational: how often the old handshake let a capture outlive stop() here. Printed,
    // not asserted: a store buffer reorders only when both threads really run at once, which a
    // loaded 2-vCPU machine does not always give.
    OldGate gate;
    const uint64_t v = violations(gate, 200000);
    std::fprintf(stderr, "  (old handshake: %llu violations in 200000 rounds)\n", static_cast<unsigned long long>(v));
    (void)spprof_failed_;
}
