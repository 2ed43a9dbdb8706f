// proc_reads.cpp: see proc_reads.h.
#include "proc_reads.h"

#include <type_traits>

#include "../platform/platform.h"

namespace spprof {

namespace {

// The drain thread's worker while it runs; every other thread reads for itself.
thread_local OwnTableWorker* t_worker = nullptr;

// Runs read() where this thread's reads go, and returns once it has run.
template <class Read>
void on_worker(Read&& read) {
    if (t_worker == nullptr) {
        read();
        return;
    }
    using R = std::remove_reference_t<Read>;
    t_worker->run([](void* p) { (*static_cast<R*>(p))(); }, &read);
}

}  // namespace

void proc_reads_use_worker(OwnTableWorker* worker) { t_worker = worker; }

ProcReadsApart::ProcReadsApart() {
    if (t_worker == nullptr) t_worker = &worker_;
}

ProcReadsApart::~ProcReadsApart() {
    if (t_worker != &worker_) return;  // nested, or the thread had a worker of its own
    t_worker = nullptr;
    worker_.stop();  // joined: the caller returns to the program with no thread of ours added
}

uint64_t proc_thread_start_ticks(uint64_t tid) {
    uint64_t ticks = 0;
    on_worker([&] { ticks = platform_thread_start_ticks(tid); });
    return ticks;
}

std::vector<uint64_t> proc_thread_start_ticks_many(const std::vector<uint64_t>& tids) {
    std::vector<uint64_t> ticks(tids.size(), 0);
    if (tids.empty()) return ticks;  // no hand-off for nothing: most passes of most programs
    on_worker([&] {
        for (size_t i = 0; i < tids.size(); ++i) ticks[i] = platform_thread_start_ticks(tids[i]);
    });
    return ticks;
}

int proc_thread_blocks_signal(uint64_t tid, int signo) {
    int blocked = -1;
    on_worker([&] { blocked = platform_thread_blocks_signal(tid, signo); });
    return blocked;
}

bool proc_thread_stack_bounds_by_tid(uint64_t tid, uintptr_t* lo, uintptr_t* hi) {
    bool found = false;
    on_worker([&] { found = platform_thread_stack_bounds_by_tid(tid, lo, hi); });
    return found;
}

size_t proc_thread_name(uint64_t tid, char* buf, size_t len) {
    size_t n = 0;
    on_worker([&] { n = platform_thread_name(tid, buf, len); });
    return n;
}

}  // namespace spprof
