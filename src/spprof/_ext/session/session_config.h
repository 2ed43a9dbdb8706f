// session_config.h: what a session is asked to do (SessionConfig) and what it counts (SessionCounters).
//
// Plain data shared by the session's parts (thread registry, drain) and read by module.cpp
// for stats(). The session owns one of each; its parts hold references.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../platform/platform.h"

namespace spprof {

struct SessionConfig {
    uint64_t interval_ns = 10'000'000;
    TimerKind timer = TimerKind::kAuto;
    size_t memory_limit_bytes = 256u << 20;
    size_t ring_bytes = 256u << 10;
    uint32_t drain_interval_ms = 50;
    bool wall_mode = false;  // sample every thread at the interval, running or blocked
    bool progress = false;   // a live status line on stderr (the CLI sets it on a terminal)
    bool native = false;     // unwind native frames too and interleave them with Python's
    bool interpreter_frames = false;  // native mode: keep the interpreter's own C frames
    double max_overhead_pct = 0;      // > 0: widen the interval to keep our cost under this
};

struct SessionCounters {
    uint64_t drains = 0;
    uint64_t records = 0;           // records read from rings
    uint64_t dropped_memory = 0;    // records refused by the memory limit
    uint64_t unknown_thread = 0;    // records naming no thread we know
    uint64_t records_root_shared = 0;   // records that kept only what their last one lacked (root_share.h)
    uint64_t records_without_base = 0;  // ... whose shared frames the drain did not have: root lost
    uint64_t threads_discovered_by_scan = 0;
    uint64_t threads_ended = 0;
    uint64_t threads_registered = 0;     // every thread the session sampled, ever
    uint64_t threads_unsampled = 0;      // ended without a sample: not in the profile
    uint64_t threads_unsampled_cpu_ns = 0;
    // Of that, threads whose end did not settle their timer's schedule (no exit watch, no
    // timer): CPU no sample stands for. A settled thread that drew no expiry is the other side
    // of the threads that drew one more than their CPU: its CPU is in the profile's total.
    uint64_t threads_unsampled_unsettled_cpu_ns = 0;
    uint64_t threads_refused = 0;        // more alive at once than the table holds
    uint64_t threads_alive_max = 0;
    uint64_t attach_failures = 0;
    uint64_t ended_before_armed = 0;  // found alive, gone before its timer could be made
    uint64_t handler_retaken = 0;   // times the application replaced our SIGPROF handler
    // Thread-end samples (kSampleThreadEnd): CPU-timer expiries owed to threads as they ended.
    uint64_t thread_end_samples = 0;
    uint64_t thread_end_expiries = 0;
    uint64_t thread_end_ns = 0;
    // Threads found by the scan of the process's OS threads (session_threads.h, scan_os_threads).
    uint64_t threads_native_only = 0;     // sampled without a Python state (OpenMP, OpenBLAS, C)
    uint64_t threads_signal_blocked = 0;  // left alone: they block the sampling signal
    uint64_t threads_rejoined = 0;        // Python threads whose state went while the OS thread lived on
    // The CPU balance's inputs (cpu_balance.h).
    uint64_t cpu_before_found_ns = 0;     // CPU threads used before the session found them
    uint64_t ended_final_cpu_ns = 0;      // final CPU clock of every thread that ended, whole life
    uint64_t profile_cpu_ns = 0;          // on-CPU weight of the samples drained
    // Emptied rings the drain put back at offset 0 (record_writer.h, rewind_drained_ring).
    uint64_t ring_rewinds = 0;
    // The drain thread's passes that left a record in its ring for a module's file, read
    // next without the GIL (symbol_reads.h).
    uint64_t drains_waiting_for_files = 0;
    // Idle samples folded into their thread's previous row (sample_drain.h): rows not taken.
    uint64_t idle_samples_folded = 0;
    // Idle records folded while over the memory limit: kept, each a sample of the row it joined
    // (a fold costs no memory); counted apart so the summary can say the limit was met.
    uint64_t idle_folded_over_limit = 0;
};

}  // namespace spprof
