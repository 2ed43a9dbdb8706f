// platform/darwin.cpp: the platform_* surface (platform.h) on macOS, over the Mach sampler
// (darwin_mach.h). There is one engine here: a sampler thread that suspends each attached
// Python thread in turn, so TimerKind only says whether blocked threads are sampled (kWall);
// records go into each sampled thread's own ThreadCtx ring. Compiled on macOS only.
#if defined(__APPLE__)

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "../capture/thread_ctx.h"
#include "darwin_mach.h"
#include "platform.h"

namespace spprof {

Error platform_init() { return mach_sampler_init(); }

void platform_cleanup() { mach_sampler_cleanup(); }

PlatformTraits platform_traits() {
    PlatformTraits t;
    t.session_wall_census = false;  // the Mach sampler sees blocked threads itself
    t.gc_frames = true;             // the sampler reads the GIL's holder (capture/pyframes/gil_state.h)
    return t;
}

namespace {
std::atomic<uint64_t> g_attach_failures{0};
}  // namespace

Error platform_timer_create(uint64_t interval_ns, TimerKind kind) {
    return mach_sampler_start(interval_ns, kind == TimerKind::kWall);
}

void platform_timer_destroy() { mach_sampler_stop(); }

Error platform_thread_attach(ThreadCtx* ctx) {
    Error e = mach_sampler_attach(ctx);
    if (!e.ok()) g_attach_failures.fetch_add(1, std::memory_order_relaxed);
    return e;
}

void platform_thread_detach(ThreadCtx* ctx) { mach_sampler_detach(ctx); }

// The Mach sampler weights each sample by the elapsed time since the thread's previous one:
// no timer owes a thread anything when it ends.
TimerResidual platform_thread_finish(ThreadCtx* /*ctx*/) { return TimerResidual{}; }

bool platform_sampling_armed() { return mach_sampler_attached_count() > 0; }

void platform_get_stats(PlatformStats* out) {
    if (out == nullptr) return;
    const SuspendStatsSnapshot s = mach_sampler_stats_snapshot();
    *out = PlatformStats{};
    out->timer = "mach";
    out->signals = 0;  // the Mach sampler sends none
    out->timers_active = mach_sampler_attached_count();
    out->timer_failures = g_attach_failures.load(std::memory_order_relaxed);
    out->add("sampler_ticks", s.ticks);
    out->add("missed_ticks", s.missed_ticks);  // deadlines skipped while catching up
    out->add("threads_sampled", s.threads_sampled);
    out->add("threads_skipped", s.threads_skipped);
    out->add("threads_unmatched", s.unmatched_threads);
    out->add("total_suspend_ns", s.total_suspend_ns);
    out->add("max_suspend_ns", s.max_suspend_ns);
    out->add("mach_walk_errors", s.walk_errors);
    out->add("off_cpu_skipped", s.off_cpu_skipped);
    // Records of threads without a Python state (<thread "name">, os_thread_scan.cpp).
    out->add("mach_native_only_samples", mach_sampler_native_only_samples());
}

void platform_reset_stats() {
    mach_sampler_reset_stats();
    g_attach_failures.store(0, std::memory_order_relaxed);
}

int platform_sampling_signal() { return 0; }  // the Mach sampler sends no signal

void platform_set_native_unwinding(bool enabled) { mach_sampler_set_native_unwinding(enabled); }

void platform_after_fork_child() { mach_sampler_after_fork_child(); }

uint64_t platform_monotonic_ns() { return mach_sampler_now_ns(); }


bool platform_thread_cpu_ns_of(uint64_t native_tid, unsigned long ident, uint64_t* out) {
    (void)ident;  // the registry is keyed by the system-wide id, which never gets reused
    return out != nullptr && mach_sampler_thread_cpu_ns(native_tid, out);
}

uint64_t platform_own_cpu_ns() {
    struct timespec ts;  // macOS 10.12+
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t platform_current_tid() {
    uint64_t tid = 0;
    (void)pthread_threadid_np(nullptr, &tid);
    return tid;
}

uint64_t platform_tid_from_ident(unsigned long ident) {
    uint64_t tid = 0;
    if (ident == 0 || pthread_threadid_np(reinterpret_cast<pthread_t>(ident), &tid) != 0) return 0;
    return tid;
}

bool platform_read_no_fault(uintptr_t addr, void* out, size_t n) { return mach_safe_read(addr, out, n); }

size_t platform_thread_name(uint64_t native_tid, char* buf, size_t len) {
    return mach_sampler_thread_name(native_tid, buf, len);
}

// The Mach sampler reads every byte through mach_vm_read_overwrite, which returns an error
// instead of faulting: there is nothing for a fault guard to catch.
Error platform_fault_guard_install(FaultClaimFn) { return Error::none(); }
bool platform_fault_guard_keep() { return false; }
void platform_fault_guard_remove() {}
bool platform_fault_guard_ready() { return true; }
uint64_t platform_fault_guard_retaken() { return 0; }

// Never used on macOS (the session starts no wall sampler here); kept for the one surface.
bool platform_signal_thread(uint64_t /*tid*/, uint32_t /*serial*/) { return false; }

int platform_thread_runnable(uint64_t /*tid*/) { return -1; }  // the Mach sampler reads run states

// No per-thread descriptor tables on macOS, and nothing for one: spprof's threads open no file
// while the program runs there (no /proc; the Mach sampler reads threads through Mach calls).
bool platform_own_fd_table_enter() { return false; }
void platform_own_fd_table_leave() {}
void platform_own_fd_table_counts(uint64_t* made, uint64_t* refused) {
    *made = 0;
    *refused = 0;
}

// The Mach sampler's interval is fixed for a session: no overhead budget on macOS yet.
Error platform_set_interval(uint64_t /*interval_ns*/) {
    return Error::not_implemented("changing the interval of a running Mach sampler");
}
void platform_thread_set_interval(ThreadCtx* /*ctx*/, uint64_t /*interval_ns*/) {}
uint64_t platform_calibrate_signal_ns(uint32_t /*rounds*/) { return 0; }

uint64_t platform_process_cpu_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// No signal handler on macOS: nothing to keep.
bool platform_keep_handler() { return false; }

bool platform_handler_replaced() { return false; }

uint64_t platform_sampling_given_up_cpu_ns() { return 0; }  // the Mach sampler needs no signal

}  // namespace spprof

#endif  // __APPLE__
