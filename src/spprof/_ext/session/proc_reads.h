// proc_reads.h: what the session reads of a thread from the OS (its start time, whether it
// blocks a signal, its name, its stack's bounds by tid), made on the drain thread's worker
// when the caller is the drain thread (own_table_worker.h: a descriptor table of spprof's
// own, so the /proc files these open take none of the program's numbers), else on the caller
// (start() and stop(), which the program calls; a thread spprof has no worker for).
// Normal context; no Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spprof {

class OwnTableWorker;

// On the drain thread, first and last thing: its reads go to `worker` (nullptr: no more).
void proc_reads_use_worker(OwnTableWorker* worker);

// platform_thread_start_ticks and the rest (platform.h), wherever this thread's reads go.
uint64_t proc_thread_start_ticks(uint64_t tid);
// Every tid's in one hand-off (the scan's check of every thread it samples by tid).
std::vector<uint64_t> proc_thread_start_ticks_many(const std::vector<uint64_t>& tids);
int proc_thread_blocks_signal(uint64_t tid, int signo);
bool proc_thread_stack_bounds_by_tid(uint64_t tid, uintptr_t* lo, uintptr_t* hi);
size_t proc_thread_name(uint64_t tid, char* buf, size_t len);

}  // namespace spprof
