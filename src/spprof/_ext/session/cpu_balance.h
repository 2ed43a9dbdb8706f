// cpu_balance.h: the process's CPU time over a session beside the CPU time in its profile,
// and where the difference went (stats()["cpu_*"], the summary's "CPU balance" line).
//
// A reading (read_cpu_now) takes the process's CPU clock, the sum of the CPU clocks of every
// live OS thread, and spprof's own threads' CPU (own_threads.h). Between two readings:
//   process CPU = profile + spprof's threads + threads that block the sampling signal
//               + CPU threads used before the scan found them + threads that ended unsampled
//               + threads that started and ended between two scans + what remains.
// "Ended between scans" is measured, not guessed: the process clock minus the live threads'
// clocks is the CPU of every thread that has ended; its growth over the session, less the
// final clocks of the threads the session saw end (and of spprof's own that ended), is the CPU
// of threads nobody saw. What remains (sampling error, a thread's last partial interval) may
// be negative. Pure arithmetic in cpu_balance(); the readings need /proc (Linux) for the
// live threads; elsewhere "ended between scans" is 0 and its CPU stays in what remains.
#pragma once

#include <cstdint>
#include <vector>

#include "../platform/platform.h"
#include "session_config.h"

namespace spprof {

struct CpuReading {
    bool taken = false;
    bool threads_listed = false;    // live_threads_ns is meaningful
    uint64_t process_ns = 0;        // the process's CPU clock
    uint64_t live_threads_ns = 0;   // sum of the CPU clocks of the OS threads alive now
    uint64_t own_ns = 0;            // spprof's threads, live and ended (own_threads_cpu_ns)
    uint64_t own_ended_ns = 0;      // the ended ones' part
};

// Normal context, no GIL needed. `scratch` is reused for the thread list.
CpuReading read_cpu_now(std::vector<OsThread>* scratch);

struct CpuBalance {
    uint64_t process_ns = 0;
    uint64_t profile_ns = 0;           // on-CPU weight of the samples in the profile
    uint64_t own_threads_ns = 0;       // spprof's threads, and stop()'s own work on its caller
    uint64_t blocked_threads_ns = 0;   // threads that block the sampling signal
    uint64_t before_found_ns = 0;      // threads' CPU before the scan found them
    uint64_t unsampled_ended_ns = 0;   // threads that ended without a sample, their CPU unsettled
    uint64_t ended_unseen_ns = 0;      // threads that started and ended between two scans
    int64_t unaccounted_ns = 0;        // the rest (may be negative)
    uint64_t given_up_ns = 0;          // after sampling was given up to the program (its SIGPROF)
};

// Pure. `extra_own_ns`: spprof's work on a program thread outside sampling (stop()'s caller).
// `blocked_ns`: CPU of the threads that block the signal, less what their samples hold.
CpuBalance cpu_balance(const CpuReading& begin, const CpuReading& end, const SessionCounters& counters,
                       uint64_t blocked_ns, uint64_t extra_own_ns);

// Names the process's CPU time after sampling was given up to the program
// (platform_sampling_given_up_cpu_ns: `given_up_at_cpu_ns`, 0 when it was not), taking it out
// of what remains. Pure.
void account_given_up(CpuBalance* b, const CpuReading& end, uint64_t given_up_at_cpu_ns);

}  // namespace spprof
