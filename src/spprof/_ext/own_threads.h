// own_threads.h: spprof's own threads (the drain and its /proc reads' worker, start()'s and
// stop()'s reads' worker, the wall census, the exit-signal watcher and its runner, the Mach
// sampler), known by kernel tid.
//
// Two users: the scan of the process's OS threads (session_threads.h) must never sample them,
// and the CPU balance (session/cpu_balance.h) names the CPU time they spend. Each of those
// threads registers itself first thing (own_thread_enter) and leaves last thing
// (own_thread_leave), which adds its CPU time to the ended total. A fixed table of
// kMaxOwnThreads tids, lock-free: any thread, no GIL, no allocation.
#pragma once

#include <pthread.h>

#include <cstdint>

namespace spprof {

// At most this many of spprof's threads alive at once (a session has at most seven; two
// sessions never overlap). One more is counted (own_threads_overflow) and is sampled like a
// program thread.
constexpr uint32_t kMaxOwnThreads = 16;

// On the thread itself, before anything else. Any thread, no GIL. Idempotent: a thread that
// own_thread_create started is already in.
void own_thread_enter();
// Starts one of spprof's threads (pthread_create's contract) and returns once the new thread is
// in the table (at most 1 s later), so that a scan of the process's threads right after the
// start never takes it for one of the program's: the scan at a session's start ran before the
// exit-signal watcher's first instruction and sampled it as a thread of its own ("python").
// Normal context, no GIL needed.
int own_thread_create(pthread_t* thread, void* (*fn)(void*), void* arg);
// On the thread itself, as it ends: its CPU clock is read one last time. Any thread, no GIL.
void own_thread_leave();
// Runs fn(arg) on a new thread of spprof's in a descriptor table of its own
// (platform_own_fd_table_enter) and returns once that thread has ended: the files fn opens take
// none of the program's numbers. Where no thread can be made, fn runs on the caller's thread
// (in the program's table, as it would without this). Normal context, no GIL needed.
void own_thread_run_apart(void (*fn)(void*), void* arg);
// True when `tid` is one of spprof's live threads, or one that left less than a second ago
// (the kernel still lists it for a moment). Any thread, async-signal-safe.
bool own_thread(uint64_t tid);
// CPU time spprof's threads used since the process started: the live ones by their clocks,
// plus every one that ended. Any thread, no GIL.
uint64_t own_threads_cpu_ns();
// The part of own_threads_cpu_ns() of threads that ended. Any thread.
uint64_t own_threads_ended_cpu_ns();
// In a forked child (only the forking thread was copied, never one of ours): forget them all.
void own_threads_after_fork_child();
// Threads that found the table full (should stay 0).
uint64_t own_threads_overflow();

// RAII, on one of spprof's threads that never uses a descriptor of the program's: a
// descriptor table of its own for the thread's lifetime (platform.h).
class OwnFdTableScope {
public:
    OwnFdTableScope();
    ~OwnFdTableScope();
    OwnFdTableScope(const OwnFdTableScope&) = delete;
    OwnFdTableScope& operator=(const OwnFdTableScope&) = delete;
};

// RAII: enter in the constructor, leave in the destructor.
class OwnThreadScope {
public:
    OwnThreadScope() { own_thread_enter(); }
    ~OwnThreadScope() { own_thread_leave(); }
    OwnThreadScope(const OwnThreadScope&) = delete;
    OwnThreadScope& operator=(const OwnThreadScope&) = delete;
};

}  // namespace spprof
