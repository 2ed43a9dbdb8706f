// platform/os_threads_darwin.cpp: the process's OS threads on macOS (platform.h, "the process's
// OS threads"): task_threads lists every thread of the task, with or without a Python state
// (OpenMP, Accelerate, a C library's own pool); each is named by the 64-bit id
// THREAD_IDENTIFIER_INFO gives (pthread_threadid_np's, system-wide and never reused). The
// session gives those without a Python state a native-only ThreadCtx that the Mach sampler
// samples by that id (darwin_mach.h). Every port right received is released (darwin_ports.h).
// Normal context: kernel calls, allocation. macOS only.
#if defined(__APPLE__)

#include <vector>

#include "darwin_mach.h"
#include "darwin_ports.h"
#include "platform/platform.h"

namespace spprof {
namespace {

// Whether task_threads lists a thread with this id now. One right per thread, all released.
bool listed_now(uint64_t tid) {
    MachThreadList list;
    if (!list.load()) return false;
    for (size_t i = 0; i < list.size(); ++i) {
        uint64_t id = 0;
        if (mach_thread_id_of(list.at(i), &id) && id == tid) return true;
    }
    return false;
}

}  // namespace

// No /proc: nothing is opened, nothing to hold.
Error platform_proc_files_open() { return Error::none(); }
void platform_proc_files_close() {}
uint64_t platform_proc_files_over_budget() { return 0; }
uint64_t platform_proc_thread_fds_opened() { return 0; }

const char* platform_os_threads_source() { return "task_threads"; }

bool platform_os_threads(std::vector<OsThread>* out) {
    out->clear();
    MachThreadList list;
    if (!list.load()) return false;
    out->reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
        OsThread t;
        if (mach_thread_id_of(list.at(i), &t.tid) && t.tid != 0) out->push_back(t);  // else exited meanwhile
    }
    return true;
}

// A thread id is never reused on macOS, so the id alone is the thread's identity: there is no
// start time to tell a reused id apart. This returns 1 while a thread with that id lives (the
// Mach sampler's registry knows it, else task_threads lists it) and 0 once it is gone, which
// is all the session compares: a live id keeps its 1, an ended one reads 0.
uint64_t platform_thread_start_ticks(uint64_t tid) {
    if (tid == 0) return 0;
    if (mach_sampler_thread_known(tid, nullptr, nullptr)) return 1;
    return listed_now(tid) ? 1 : 0;
}

bool platform_thread_exists(uint64_t tid) { return platform_thread_start_ticks(tid) != 0; }

// No: the Mach sampler sends no signal (it suspends the thread from its own), so a thread's
// signal mask never keeps it from being sampled.
int platform_thread_blocks_signal(uint64_t /*tid*/, int /*signo*/) { return 0; }

// The bounds pthread_get_stackaddr_np / stacksize_np gave when the thread started (the hook)
// or when the registry was seeded (pthread_from_mach_thread_np). The sampler reads these
// itself; the ctx gets them for the same surface as Linux.
bool platform_thread_stack_bounds_by_tid(uint64_t tid, uintptr_t* lo, uintptr_t* hi) {
    *lo = 0;
    *hi = 0;
    if (!mach_sampler_thread_known(tid, lo, hi)) return false;
    return *hi != 0;
}

}  // namespace spprof

#endif  // __APPLE__
