// platform/proc_task_files.h: the /proc descriptors a session keeps (Linux; platform.h, "the
// /proc descriptors"). /proc/self/task is opened once at start and listed with getdents64 after
// lseek(0); each thread's /proc/self/task/<tid>/stat is opened once, when spprof first needs it,
// and read with pread at offset 0 (which /proc regenerates). Both are HeldFds (held_fd.h): above
// the program's numbers, proven ours before every use. Normal context (a mutex), never a handler.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace spprof {

// The thread ids /proc/self/task lists now, through the held directory descriptor; per-thread
// descriptors of threads no longer listed are closed. 1 when listed; 0 when no session holds
// the directory (the caller may list it the old way); -1 when the session's descriptors were
// found to be the program's (the caller must not open anything: no list this session).
int proc_task_list(std::vector<uint64_t>* tids);

// /proc/self/task/<tid>/stat into buf (NUL-terminated) through the thread's held descriptor,
// opened on first use. Returns the length; -1 when the thread is gone; -2 when no descriptor
// can be held for it (no session, or the per-thread budget is spent, counted: the caller may
// read the file the old way); -3 when the session's descriptors were found to be the
// program's (nothing is read or opened again this session).
ssize_t proc_task_stat(uint64_t tid, char* buf, size_t len);

// The session's descriptors were found to be the program's (closed, reused). Any thread.
bool proc_task_files_lost();

// On a thread that has just taken a descriptor table of its own (platform_own_fd_table_enter):
// from here its reads go through descriptors opened in that table (the directory now, each
// thread's stat on first use), apart from the session's. Leave before the thread ends.
void proc_task_files_enter_own_table();
void proc_task_files_leave_own_table();

}  // namespace spprof
