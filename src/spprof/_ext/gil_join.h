// gil_join.h: joining one of spprof's threads with the GIL let go, exactly once.
//
// The drain thread and the exit-signal watcher may need the GIL to end, so their stop()
// releases it while joining. Meanwhile another Python thread can ask for the same stop: a
// fork's before hook while the session stops, or a second fork's. A second pthread_join of
// one thread is undefined (a crash in glibc, or a hang), and a stop that returned while the
// first join was still under way let the session free what the thread was about to use (the
// drain thread ran a pass on a freed session). So the thread is marked gone before the GIL is
// let go, and a stop that finds a join under way waits, GIL released, until it has ended.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace spprof {

class GilJoin {
public:
    GilJoin() = default;
    GilJoin(const GilJoin&) = delete;
    GilJoin& operator=(const GilJoin&) = delete;

    // GIL held: the thread now runs.
    void started(pthread_t thread) {
        thread_ = thread;
        running_ = true;
    }
    // GIL held. True while a thread runs that no stop has begun to join.
    bool running() const { return running_; }
    // In a forked child: the thread was not copied.
    void forget() {
        running_ = false;
        joining_.store(false, std::memory_order_relaxed);
    }

    // GIL held. Calls wake() (GIL held) and joins the thread, GIL released; if another stop is
    // joining it, waits for that join instead. Returns once the thread is gone.
    template <class Wake>
    void stop(Wake wake) {
        if (joining_.load(std::memory_order_acquire)) {
            Py_BEGIN_ALLOW_THREADS
            while (joining_.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            Py_END_ALLOW_THREADS
            return;
        }
        if (!running_) return;
        running_ = false;
        joining_.store(true, std::memory_order_relaxed);
        const pthread_t thread = thread_;
        wake();
        Py_BEGIN_ALLOW_THREADS
        pthread_join(thread, nullptr);
        joining_.store(false, std::memory_order_release);
        Py_END_ALLOW_THREADS
    }

private:
    pthread_t thread_{};
    bool running_ = false;
    std::atomic<bool> joining_{false};
};

}  // namespace spprof
