// capture_gate.h: how stop() knows that no capture still uses what it is about to free.
//
// A capture (a signal handler on any thread) enters the gate, loads the published pointer,
// works with it, and leaves. stop() unpublishes the pointer and then waits until no capture is
// inside. The two sides form the store-buffering pattern: each stores one variable and then
// loads the other's. With release stores and acquire loads both loads may see the old values
// (on x86 the store waits in the store buffer while the load runs ahead), so stop() could
// read "nobody inside" while a capture that already holds the old pointer goes on using it.
// Every access here is therefore sequentially consistent: in the single order of those four
// operations, a capture that loaded the old pointer entered before stop() unpublished it, so
// stop()'s later load sees that capture counted.
//
// enter/leave: SIGNAL-SAFE, NO-HEAP (lock-free atomics only). publish/close_and_wait: normal
// context, one caller at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace spprof {

template <class T>
class CaptureGate {
public:
    // SIGNAL-SAFE. The published object or null; every enter() is paired with one leave(),
    // whatever it returned.
    T* enter() {
        in_flight_.fetch_add(1, std::memory_order_seq_cst);
        return target_.load(std::memory_order_seq_cst);
    }
    void leave() { in_flight_.fetch_sub(1, std::memory_order_seq_cst); }

    void publish(T* target) { target_.store(target, std::memory_order_seq_cst); }

    // Unpublishes, then waits until every capture that may have seen the old object has left.
    // Bounded: false after ~`limit` (something is badly wrong; the caller must then never
    // free what was published).
    bool close_and_wait(std::chrono::microseconds limit = std::chrono::seconds(1)) {
        target_.store(nullptr, std::memory_order_seq_cst);
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (in_flight_.load(std::memory_order_seq_cst) != 0) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            std::this_thread::sleep_for(std::chrono::microseconds(10));
        }
        return true;
    }

    // Captures inside right now (tests; the ThreadTable's reclaimer: 0 means every capture that
    // loaded a pointer unpublished before this load has left).
    int in_flight() const { return in_flight_.load(std::memory_order_seq_cst); }

private:
    static_assert(std::atomic<T*>::is_always_lock_free, "loaded from signal handlers");
    static_assert(std::atomic<int>::is_always_lock_free, "changed from signal handlers");
    std::atomic<T*> target_{nullptr};
    std::atomic<int> in_flight_{0};
};

// Keeps a gate entered for one scope.
template <class T>
class GateScope {
public:
    explicit GateScope(CaptureGate<T>& gate) : gate_(gate), target_(gate.enter()) {}
    ~GateScope() { gate_.leave(); }
    GateScope(const GateScope&) = delete;
    GateScope& operator=(const GateScope&) = delete;
    T* get() const { return target_; }

private:
    CaptureGate<T>& gate_;
    T* const target_;
};

}  // namespace spprof
