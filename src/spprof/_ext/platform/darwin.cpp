// platform/darwin.cpp: the platform_* surface (platform.h) on macOS, over the Mach sampler
// (darwin_mach.h). There is one engine here: a sampler thread that suspends each attached
// Python thread in turn, so TimerKind only says whether blocked threads are sampled (kWall);
// records go into each sampled thread's own ThreadCtx ring. Compiled on macOS only.
#if defined(__APPLE__)

#include <dlfcn.h>
#include <mach-o/loader.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "../thread_ctx.h"
#include "darwin_mach.h"
#include "platform.h"

namespace spprof {

Error platform_init() { return mach_sampler_init(); }

void platform_cleanup() { mach_sampler_cleanup(); }

PlatformTraits platform_traits() {
    PlatformTraits t;
    t.session_wall_census = false;  // the Mach sampler sees blocked threads itself
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

bool platform_thread_stack_bounds(unsigned long ident, uintptr_t* lo, uintptr_t* hi) {
    // Normal context only: these take the pthread list lock when asked about another thread.
    pthread_t t = reinterpret_cast<pthread_t>(ident);
    const uintptr_t top = reinterpret_cast<uintptr_t>(pthread_get_stackaddr_np(t));
    const size_t size = pthread_get_stacksize_np(t);
    if (top == 0 || size == 0) return false;
    *hi = top;  // the stack grows down from its address
    *lo = top - size;
    return true;
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

bool platform_function_extent(const void* addr, uint64_t* lo, uint64_t* hi) {
    // Mach-O has no symbol sizes; LC_FUNCTION_STARTS lists every function start of the image
    // (ULEB128 deltas from the __TEXT segment), so the next start after ours ends it.
    Dl_info info;
    if (dladdr(addr, &info) == 0 || info.dli_fbase == nullptr || info.dli_saddr == nullptr) return false;
    const auto* header = static_cast<const mach_header_64*>(info.dli_fbase);
    if (header->magic != MH_MAGIC_64) return false;
    const auto* cmd = reinterpret_cast<const load_command*>(header + 1);
    uint64_t text_vmaddr = 0, linkedit_vmaddr = 0, linkedit_fileoff = 0;
    bool have_text = false, have_linkedit = false;
    const linkedit_data_command* starts = nullptr;
    for (uint32_t i = 0; i < header->ncmds && i < 4096; ++i) {
        if (cmd->cmd == LC_SEGMENT_64) {
            const auto* seg = reinterpret_cast<const segment_command_64*>(cmd);
            if (std::strncmp(seg->segname, "__TEXT", sizeof seg->segname) == 0) {
                text_vmaddr = seg->vmaddr;
                have_text = true;
            } else if (std::strncmp(seg->segname, "__LINKEDIT", sizeof seg->segname) == 0) {
                linkedit_vmaddr = seg->vmaddr;
                linkedit_fileoff = seg->fileoff;
                have_linkedit = true;
            }
        } else if (cmd->cmd == LC_FUNCTION_STARTS) {
            starts = reinterpret_cast<const linkedit_data_command*>(cmd);
        }
        cmd = reinterpret_cast<const load_command*>(reinterpret_cast<const char*>(cmd) + cmd->cmdsize);
    }
    if (!have_text || !have_linkedit || starts == nullptr || starts->dataoff < linkedit_fileoff) return false;
    const uintptr_t slide = reinterpret_cast<uintptr_t>(header) - text_vmaddr;
    const auto* p = reinterpret_cast<const uint8_t*>(linkedit_vmaddr + slide + (starts->dataoff - linkedit_fileoff));
    const uint8_t* end = p + starts->datasize;
    const uint64_t target = reinterpret_cast<uintptr_t>(info.dli_saddr) - slide;  // unslid
    uint64_t address = text_vmaddr;
    while (p < end) {
        uint64_t delta = 0;
        unsigned shift = 0;
        while (p < end && shift < 64) {  // ULEB128
            const uint8_t byte = *p++;
            delta |= static_cast<uint64_t>(byte & 0x7f) << shift;
            shift += 7;
            if ((byte & 0x80) == 0) break;
        }
        if (delta == 0) break;  // the list ends with a zero
        address += delta;
        if (address > target) {
            *lo = target + slide;
            *hi = address + slide;
            return true;
        }
    }
    return false;
}

}  // namespace spprof

#endif  // __APPLE__
