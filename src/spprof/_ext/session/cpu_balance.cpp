// cpu_balance.cpp: readings of the process's CPU clocks and the balance between two (see cpu_balance.h).
#include "cpu_balance.h"

#include "../own_threads.h"

namespace spprof {

CpuReading read_cpu_now(std::vector<OsThread>* scratch) {
    CpuReading r;
    r.taken = true;
    // The thread clocks first, then the process's: a thread that ends in between is counted
    // in neither the live sum nor lost (its CPU stays in the process clock, as ended).
    r.own_ended_ns = own_threads_ended_cpu_ns();
    r.own_ns = own_threads_cpu_ns();
    if (platform_os_threads(scratch)) {
        r.threads_listed = true;
        for (const OsThread& t : *scratch) {
            uint64_t cpu = 0;
            if (platform_thread_cpu_ns_of(t.tid, 0, &cpu)) r.live_threads_ns += cpu;
        }
    }
    r.process_ns = platform_process_cpu_ns();
    return r;
}

CpuBalance cpu_balance(const CpuReading& begin, const CpuReading& end, const SessionCounters& counters,
                       uint64_t blocked_ns, uint64_t extra_own_ns) {
    CpuBalance b;
    if (!begin.taken || !end.taken) return b;
    const auto diff = [](uint64_t later, uint64_t earlier) { return later > earlier ? later - earlier : 0; };
    b.process_ns = diff(end.process_ns, begin.process_ns);
    b.profile_ns = counters.profile_cpu_ns;
    b.own_threads_ns = diff(end.own_ns, begin.own_ns) + extra_own_ns;
    b.blocked_threads_ns = blocked_ns;
    b.before_found_ns = counters.cpu_before_found_ns;
    b.unsampled_ended_ns = counters.threads_unsampled_unsettled_cpu_ns;
    if (begin.threads_listed && end.threads_listed) {
        // CPU of every thread that ended (whole lives), at each reading.
        const int64_t dead_begin = static_cast<int64_t>(begin.process_ns) - static_cast<int64_t>(begin.live_threads_ns);
        const int64_t dead_end = static_cast<int64_t>(end.process_ns) - static_cast<int64_t>(end.live_threads_ns);
        const int64_t seen = static_cast<int64_t>(counters.ended_final_cpu_ns) +
                             static_cast<int64_t>(diff(end.own_ended_ns, begin.own_ended_ns));
        const int64_t unseen = dead_end - dead_begin - seen;
        b.ended_unseen_ns = unseen > 0 ? static_cast<uint64_t>(unseen) : 0;
    }
    b.unaccounted_ns = static_cast<int64_t>(b.process_ns) - static_cast<int64_t>(b.profile_ns) -
                       static_cast<int64_t>(b.own_threads_ns) - static_cast<int64_t>(b.blocked_threads_ns) -
                       static_cast<int64_t>(b.before_found_ns) - static_cast<int64_t>(b.unsampled_ended_ns) -
                       static_cast<int64_t>(b.ended_unseen_ns);
    return b;
}

void account_given_up(CpuBalance* b, const CpuReading& end, uint64_t given_up_at_cpu_ns) {
    if (!end.taken || given_up_at_cpu_ns == 0 || given_up_at_cpu_ns > end.process_ns) return;
    b->given_up_ns = end.process_ns - given_up_at_cpu_ns;
    b->unaccounted_ns -= static_cast<int64_t>(b->given_up_ns);
}

}  // namespace spprof
