// platform/darwin.cpp: the platform_* surface (platform.h) on macOS, over the Mach sampler
// (darwin_mach.h). There is one engine here: a sampler thread that suspends each attached
// Python thread in turn, so TimerKind is accepted and ignored; records go straight into the
// session's sampler ring, each naming its thread by ThreadCtx serial and Mach thread id.
// Compiled on macOS only.
#if defined(__APPLE__)

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "../thread_ctx.h"
#include "darwin_mach.h"
#include "platform.h"

namespace spprof {

namespace {

Error from_errno(const char* what, int err) {
    switch (err) {
        case EINVAL: return Error::value(what);
        case ENOMEM: return Error::memory(what);
        default: return Error::os(what, err);
    }
}

}  // namespace

Error platform_init() {
    if (mach_sampler_init() != 0) return from_errno("cannot initialise the Mach sampler", errno);
    return Error::none();
}

void platform_cleanup() { mach_sampler_cleanup(); }

Error platform_timer_create(uint64_t interval_ns, TimerKind kind, RingBuffer* sampler_ring) {
    (void)kind;  // one engine on macOS
    if (mach_sampler_start(interval_ns, sampler_ring) != 0) {
        const int err = errno;
        switch (err) {
            case EINVAL:
                return Error::value(sampler_ring == nullptr
                                        ? "the Mach sampler needs a sampler ring"
                                        : "interval must be between 1 ms and 1 s");
            case EAGAIN: return Error::runtime("the Mach sampler is already running");
            default: return from_errno("cannot start the Mach sampler", err);
        }
    }
    return Error::none();
}

Error platform_timer_destroy() {
    // Not running is not an error here: stop paths may run after a failed start.
    if (mach_sampler_stop() != 0 && errno != ESRCH) {
        return Error::os("cannot stop the Mach sampler", errno);
    }
    return Error::none();
}

Error platform_thread_attach(ThreadCtx* ctx) {
    if (mach_sampler_attach(ctx) != 0) return from_errno("cannot attach thread", errno);
    return Error::none();
}

void platform_thread_detach(ThreadCtx* ctx) { mach_sampler_detach(ctx); }

void platform_get_stats(PlatformStats* out) {
    if (out == nullptr) return;
    const SuspendStatsSnapshot s = mach_sampler_stats_snapshot();
    *out = PlatformStats{};
    out->timer = "mach";
    out->signals = s.ticks;           // sampler wake-ups
    out->overruns = s.missed_ticks;   // deadlines skipped while catching up
    out->timers_active = mach_sampler_attached_count();
    out->no_thread = s.unmatched_threads;
    out->threads_sampled = s.threads_sampled;
    out->threads_skipped = s.threads_skipped;
    out->total_suspend_ns = s.total_suspend_ns;
    out->max_suspend_ns = s.max_suspend_ns;
    out->walk_errors = s.walk_errors;
}

void platform_reset_stats() { mach_sampler_reset_stats(); }

int platform_sampling_signal() { return 0; }  // the Mach sampler sends no signal

void platform_set_native_unwinding(bool enabled) { mach_sampler_set_native_unwinding(enabled ? 1 : 0); }

void platform_after_fork_child() { mach_sampler_after_fork_child(); }

uint64_t platform_monotonic_ns() { return mach_sampler_now_ns(); }


bool platform_thread_cpu_ns_of(uint64_t native_tid, unsigned long ident, uint64_t* out) {
    (void)ident;  // the registry is keyed by the system-wide id, which never gets reused
    return out != nullptr && mach_sampler_thread_cpu_ns(native_tid, out);
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

bool platform_safe_read(uintptr_t addr, void* out, size_t n) { return mach_safe_read(addr, out, n); }

size_t platform_thread_name(uint64_t native_tid, char* buf, size_t len) {
    return mach_sampler_thread_name(native_tid, buf, len);
}

// The Mach sampler already samples every thread from its own thread, in both modes.
bool platform_samples_all_threads() { return true; }

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

void platform_sleep_until_ns(uint64_t deadline_ns) {
    const uint64_t now = platform_monotonic_ns();
    if (deadline_ns <= now) return;
    const uint64_t d = deadline_ns - now;
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(d / 1000000000ull);
    ts.tv_nsec = static_cast<long>(d % 1000000000ull);
    nanosleep(&ts, nullptr);
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

}  // namespace spprof

#endif  // __APPLE__
