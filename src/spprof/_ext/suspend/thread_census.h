// suspend/thread_census.h: who was sampled during a session, under which name, for how much CPU.
//
// One entry per thread the Mach sampler targeted: a stable 64-bit id (the system-wide thread
// id, never reused while the machine is up), the name pthread_getname_np reported (refreshed
// outside the suspended window; empty when the thread never named itself), its CPU time over
// the session (THREAD_BASIC_INFO user + system at the last observation minus at the first),
// and how many samples it got. Entries outlive their threads until clear().
//
// Written by the sampler thread between ticks, read by the control thread (stop, debug log):
// a mutex guards it, never taken while a thread is suspended. Portable, Python-free; tested on
// Linux (tests/native/test_suspend_census.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "thread_registry.h"

namespace spprof {

struct CensusEntry {
    uint64_t thread_id = 0;
    char name[kThreadNameBytes] = {};
    uint64_t cpu_first_ns = 0;  // CPU time at the first observation this session
    uint64_t cpu_last_ns = 0;   // CPU time at the latest observation
    uint64_t samples = 0;       // records written for this thread
    bool cpu_known = false;
    uint64_t cpu_ns() const { return cpu_known && cpu_last_ns > cpu_first_ns ? cpu_last_ns - cpu_first_ns : 0; }
};

class ThreadCensus {
public:
    // Index of the entry for thread_id, created when new. Sampler thread, outside the window;
    // may allocate. Returns SIZE_MAX when allocation failed.
    size_t slot(uint64_t thread_id);
    // Update an entry. `name` may be nullptr (keep the old one). Sampler thread.
    void set_name(size_t slot, const char* name);
    void observe_cpu(size_t slot, uint64_t cpu_ns);
    void add_sample(size_t slot);
    // Copy up to `cap` entries; returns the number of entries. Any thread.
    size_t copy(CensusEntry* out, size_t cap) const;
    size_t size() const;
    // New session. Control thread, no sampler running.
    void clear();

private:
    mutable std::mutex mu_;
    std::vector<CensusEntry> entries_;  // guarded by mu_
};

}  // namespace spprof
