// platform/os_threads_darwin.cpp: the process's OS threads on macOS (platform.h, "the process's
// OS threads"): not listed. The Mach sampler attaches threads with a Python state only, so
// threads a C library starts (OpenMP, Accelerate) are not sampled there; the session reports
// it (stats()["os_threads_scan"] is "unsupported"). macOS only.
#if defined(__APPLE__)

#include <vector>

#include "platform/platform.h"

namespace spprof {

// No /proc: nothing is opened, nothing to hold.
Error platform_proc_files_open() { return Error::none(); }
void platform_proc_files_close() {}
uint64_t platform_proc_files_over_budget() { return 0; }
uint64_t platform_proc_thread_fds_opened() { return 0; }

bool platform_os_threads(std::vector<OsThread>* out) {
    out->clear();
    return false;
}

uint64_t platform_thread_start_ticks(uint64_t /*tid*/) { return 0; }

int platform_thread_blocks_signal(uint64_t /*tid*/, int /*signo*/) { return -1; }

bool platform_thread_stack_bounds_by_tid(uint64_t /*tid*/, uintptr_t* lo, uintptr_t* hi) {
    *lo = 0;
    *hi = 0;
    return false;
}

}  // namespace spprof

#endif  // __APPLE__
