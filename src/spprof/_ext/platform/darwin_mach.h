// platform/darwin_mach.h: the macOS Mach sampler.
//
// On macOS a signal is a poor way to sample threads (the kernel picks the receiving thread and
// delivery is coarse), so spprof samples from its own thread: every interval the sampler
// thread wakes at an absolute deadline (mach_wait_until), and for each thread the core attached
// (a Python thread, or one found without a Python state) it suspends the thread
// (thread_suspend), reads its registers (thread_get_state), copies its native frame-pointer
// chain and its Python frame chain into pre-allocated buffers, resumes it (thread_resume),
// and only then, with every thread running again, writes a RawSampleHeader
// record into that thread's own ThreadCtx ring (write_foreign_record). Wall-clock semantics:
// blocked threads are sampled too; each record is weighted by the time since that thread's
// previous sample and flagged on-CPU from THREAD_BASIC_INFO's run state.
//
// Rules kept (FIELD-NOTES section 5): nothing between suspend and resume allocates, locks,
// logs, calls dyld or the Python API; stack bounds, ports and names are cached outside that
// window (the introspection THREAD_START hook on each new thread, task_threads seeding at
// start for the others); the sampler never suspends itself and only suspends attached
// threads (never spprof's own: the session's scan skips them, own_threads.h); every port
// from task_threads / mach_thread_self is released.
//
// The portable logic lives in ../suspend/ (registry, deadline loop, frame-pointer walk, cycle,
// reader, census, statistics; the record writer is ../record_writer.h) and is unit-tested on
// Linux; darwin_mach.cpp is the thin Mach layer and the glue. Errors: `Error` (error.h), each
// with its own message.
//
// Threads: init/cleanup/start/stop/attach/detach are called from the control thread (Python,
// GIL held) and are not reentrant with each other; stats, counts and the native switch may be
// read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../error.h"
#include "../suspend/suspend_stats.h"
#include "../suspend/thread_census.h"

namespace spprof {

struct ThreadCtx;

// Initialise: registry ready, introspection hook installed (once per process, chained to the
// previous hook, never removed). Fails when already initialised or out of memory.
Error mach_sampler_init();
// Stop the sampler if it runs, release every port the registry holds, forget attached
// threads. The hook stays installed and becomes a pass-through. Safe when not initialised.
void mach_sampler_cleanup();

// Seed the registry with task_threads, then start the sampler thread, which samples every
// `interval_ns` into each attached thread's own ring (record_writer.h). `wall_mode`: blocked
// threads are sampled too and flagged kSampleIdle; otherwise a thread found off CPU is not
// suspended at all (counted as off_cpu_skipped). Fails when the interval is outside
// [1 ms, 1 s], when not initialised, when already running, or out of memory.
Error mach_sampler_start(uint64_t interval_ns, bool wall_mode);
// Stop and join the sampler thread if it runs. On return no thread is suspended and nothing
// writes to any ring. Idempotent.
void mach_sampler_stop();

// Threads to sample: Python threads, and threads the session found without a Python state
// (ctx->tstate_ null: sampled by ctx->native_tid_, the system-wide thread id, while on CPU,
// as a <thread "name"> record over their native pcs). attach: idempotent; fails only out of memory. Each cycle of the
// sampler holds the capture gate (signal_handler.h) and uses a ctx only while the session's
// ThreadTable still publishes it, so after detach the session may free ctx once it unpublished
// it and saw the gate empty (thread_table.h), as for signal captures.
Error mach_sampler_attach(ThreadCtx* ctx);
void mach_sampler_detach(ThreadCtx* ctx);

// Native (frame-pointer) return addresses in each record. Any thread; takes effect next tick.
void mach_sampler_set_native_unwinding(bool enabled);

// Counters of the current (or last) session. Any thread.
SuspendStatsSnapshot mach_sampler_stats_snapshot();

// The seed's C API contract (shared/seeds, "Configuration" and "Statistics"), kept under its
// own names over the snapshot above so the spec and the code still meet. Any thread; an
// output pointer may be null to skip it.
int mach_sampler_get_native_unwinding();  // 1 enabled, 0 not
void mach_sampler_get_stats(uint64_t* samples_captured, uint64_t* samples_dropped, uint64_t* threads_sampled);
void mach_sampler_get_extended_stats(uint64_t* samples_captured, uint64_t* samples_dropped,
                                     uint64_t* threads_sampled, uint64_t* threads_skipped,
                                     uint64_t* total_suspend_ns, uint64_t* max_suspend_ns, uint64_t* walk_errors);
// Zero every counter (session start). Any thread.
void mach_sampler_reset_stats();
// Live threads in the registry (every thread of the process the sampler knows). Any thread.
size_t mach_sampler_thread_count();
// Attached Python threads. Any thread.
size_t mach_sampler_attached_count();

// Census of the threads sampled in the current (or last) session: copies up to `cap` entries,
// returns how many exist. Any thread.
size_t mach_sampler_census(CensusEntry* out, size_t cap);

// Per-thread lookups by system-wide thread id, for platform_*. Normal context, not while
// sampling is inside a window (they are never called from the sampler thread).
bool mach_sampler_thread_cpu_ns(uint64_t thread_id, uint64_t* out);
size_t mach_sampler_thread_name(uint64_t thread_id, char* buf, size_t len);
// Whether the registry holds a live thread with this id (the hook's START, or a seeding, saw
// it; its TERMINATE or a failed suspend did not yet mark it gone), with its cached stack
// bounds (0/0 when unknown). False also when the sampler is not initialised.
bool mach_sampler_thread_known(uint64_t thread_id, uintptr_t* stack_lo, uintptr_t* stack_hi);
// Records of threads without a Python state written this session. Any thread.
uint64_t mach_sampler_native_only_samples();

// Read our own memory that may be unmapped or freed: false instead of a fault
// (mach_vm_read_overwrite on our own task). Normal context, any thread.
bool mach_safe_read(uintptr_t addr, void* out, size_t n);

// Monotonic nanoseconds on the clock the sampler stamps records with (mach_absolute_time).
// SIGNAL-SAFE.
uint64_t mach_sampler_now_ns();

// After fork(), in the child: the sampler thread does not exist there and the parent's ports
// mean nothing; forget both without releasing or joining anything.
void mach_sampler_after_fork_child();

}  // namespace spprof
