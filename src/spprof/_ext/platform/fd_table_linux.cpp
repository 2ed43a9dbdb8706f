// platform/fd_table_linux.cpp: a descriptor table of a spprof thread's own (platform.h, "a
// descriptor table of spprof's own").
//
// Threads of one process share one descriptor table, so any open() of ours takes the lowest
// free number, which the program may be about to reuse (close(2); open() == 2; dup2()). A
// thread that calls unshare(CLONE_FILES) gets a copy of the table: from then on its opens and
// closes, and the program's, are apart. The copy holds every descriptor of the program too,
// which would keep its pipes and sockets open after the program's own last close (a reader
// waiting for EOF, a peer waiting for the connection to end), so every copy is closed at
// once. Closing a copy never drops the program's POSIX record locks: Linux keys them by the
// descriptor table that took them, not by the file.
#if defined(__linux__)

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "../log.h"
#include "platform/dir_numbers_linux.h"
#include "platform/platform.h"
#include "platform/proc_task_files.h"

#ifndef SYS_close_range
#define SYS_close_range 436  // the same number on every architecture (Linux 5.9)
#endif

namespace spprof {
namespace {

std::atomic<uint64_t> g_made{0};
std::atomic<uint64_t> g_refused{0};

// The numbers /proc/thread-self/fd lists (this thread's table, not the process's), closed;
// only this thread uses the table, so the list is whole. False when it could not be read.
bool close_listed() {
    const int dir = open("/proc/thread-self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return false;
    std::vector<uint64_t> fds;
    const bool ok = list_dir_numbers(dir, &fds);
    for (const uint64_t fd : fds)
        if (static_cast<int>(fd) != dir) close(static_cast<int>(fd));
    close(dir);
    return ok;
}

// Closes every descriptor of the calling thread's table: close_range where the kernel has it
// (5.9), else the listed numbers, else every number below the soft limit.
void close_every_copy() {
    if (syscall(SYS_close_range, 0u, ~0u, 0u) == 0 || close_listed()) return;
    struct rlimit lim;
    const rlim_t top = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? lim.rlim_cur : 1u << 20;
    for (rlim_t fd = 0; fd < top; ++fd) close(static_cast<int>(fd));
}

}  // namespace

bool platform_own_fd_table_enter() {
    if (unshare(CLONE_FILES) != 0) {
        g_refused.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    close_every_copy();
    log_mute_this_thread();  // stderr is not in this table
    g_made.fetch_add(1, std::memory_order_relaxed);
    proc_task_files_enter_own_table();
    return true;
}

void platform_own_fd_table_leave() { proc_task_files_leave_own_table(); }

void platform_own_fd_table_counts(uint64_t* made, uint64_t* refused) {
    *made = g_made.load(std::memory_order_relaxed);
    *refused = g_refused.load(std::memory_order_relaxed);
}

}  // namespace spprof

#endif  // __linux__
