// proc_reads.h: what the session reads of a thread from the OS (its start time, whether it
// blocks a signal, its name, its stack's bounds by tid), made on a worker in a descriptor
// table of spprof's own (own_table_worker.h), so the /proc files these open take none of the
// program's numbers: the drain thread's worker on the drain thread, a worker of the call's
// own during start() and stop() (ProcReadsApart). Elsewhere (no worker; where no thread can be
// made or unshare is refused) on the caller. Normal context; no Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../own_table_worker.h"

namespace spprof {

// On the drain thread, first and last thing: its reads go to `worker` (nullptr: no more).
void proc_reads_use_worker(OwnTableWorker* worker);

// RAII, for a call of the program's (start(), stop()) that scans its threads on the caller:
// the scope's reads go to a worker made at the first of them and joined at the scope's end.
// Nested or on a thread that has a worker already: nothing changes.
class ProcReadsApart {
public:
    ProcReadsApart();
    ~ProcReadsApart();
    ProcReadsApart(const ProcReadsApart&) = delete;
    ProcReadsApart& operator=(const ProcReadsApart&) = delete;

private:
    OwnTableWorker worker_;  // in use while this thread's reads point at it
};

// platform_thread_start_ticks and the rest (platform.h), wherever this thread's reads go.
uint64_t proc_thread_start_ticks(uint64_t tid);
// Every tid's in one hand-off (the scan's check of every thread it samples by tid).
std::vector<uint64_t> proc_thread_start_ticks_many(const std::vector<uint64_t>& tids);
int proc_thread_blocks_signal(uint64_t tid, int signo);
bool proc_thread_stack_bounds_by_tid(uint64_t tid, uintptr_t* lo, uintptr_t* hi);
size_t proc_thread_name(uint64_t tid, char* buf, size_t len);

}  // namespace spprof
