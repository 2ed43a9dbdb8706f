// platform/darwin_mach.cpp: the Mach sampler (see darwin_mach.h): the thin Mach layer (RAII
// port owners, thread suspend/state/resume, the fault-free memory fetch, the clock), the
// pthread introspection hook, and the sampler thread gluing them to the portable logic in
// ../suspend/. Compiled on macOS only.
#if defined(__APPLE__)

// framewalker.h includes Python.h, which must come before any system header.
#include "../framewalker.h"
#include "../log.h"
#include "../own_threads.h"
#include "../sampler_round.h"

#include "darwin_mach.h"
#include "darwin_ports.h"
#include "platform.h"

#include <mach/mach.h>
#include <mach/mach_time.h>
#include <mach/mach_vm.h>
#include <mach/vm_param.h>
#include <pthread.h>
#include <pthread/introspection.h>
#include <pthread/qos.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "../capture/pyframes/gc_state.h"
#include "../capture/pyframes/gil_state.h"
#include "../capture/record_writer.h"
#include "../capture/sample_record.h"
#include "../signal_handler.h"
#include "../suspend/cached_reader.h"
#include "../suspend/deadline_loop.h"
#include "../suspend/suspend_cycle.h"
#include "../suspend/thread_registry.h"
#include "../suspend/time_convert.h"
#include "../capture/thread_ctx.h"
#include "../capture/thread_table.h"
#include "../unwind/fp_walk.h"

#if !defined(__x86_64__) && !defined(__arm64__) && !defined(__aarch64__)
#error "spprof's Mach sampler supports x86_64 and arm64 only"
#endif

namespace spprof {

// strip_pointer_auth masks code addresses to kUserAddressBits (platform/address_space.h):
// every user address must survive that.
static_assert(MACH_VM_MAX_ADDRESS - 1 <= kPointerAuthStripMask,
              "user address space larger than the pointer-authentication strip mask");

namespace {

// ---- limits and constants ------------------------------------------------------------------

constexpr uint64_t kMinIntervalNs = 1'000'000;      // 1 ms: below that suspension cost dominates
constexpr uint64_t kMaxIntervalNs = 1'000'000'000;  // 1 s: the contract's upper bound
// Longest single sleep of the sampler: stop() waits at most this long for the thread to see
// the request, even at a 1 s interval.
constexpr uint64_t kStopSliceNs = 20'000'000;
// Registry room reserved at init, so THREAD_START hooks of a typical process never allocate.
constexpr size_t kRegistryReserve = 256;
// An attached thread missing from the registry triggers a task_threads re-seed at most this
// often: it costs one port per thread and should only ever be needed for a thread the hook
// missed.
constexpr uint64_t kReseedPeriodNs = 1'000'000'000;

// ---- clock ---------------------------------------------------------------------------------

Timebase query_timebase() {
    mach_timebase_info_data_t info{};
    if (mach_timebase_info(&info) != KERN_SUCCESS) return Timebase{};
    return Timebase{info.numer, info.denom};
}
// Read once at load: later readers (SIGNAL-SAFE clocks) need no lock or lazy initialisation.
const Timebase g_timebase = query_timebase();

uint64_t now_ns() { return mach_to_ns(mach_absolute_time(), g_timebase); }

// ---- RAII owners of Mach resources ---------------------------------------------------------

// One send right (from task_threads) or reference (from mach_thread_self) to a port.
class MachPort {
public:
    explicit MachPort(mach_port_t port = MACH_PORT_NULL) : port_(port) {}
    MachPort(const MachPort&) = delete;
    MachPort& operator=(const MachPort&) = delete;
    ~MachPort() { reset(); }
    mach_port_t get() const { return port_; }
    // Give up ownership (the caller now releases it).
    mach_port_t release() {
        const mach_port_t p = port_;
        port_ = MACH_PORT_NULL;
        return p;
    }
    void reset(mach_port_t port = MACH_PORT_NULL) {
        if (MACH_PORT_VALID(port_)) mach_port_deallocate(mach_task_self(), port_);
        port_ = port;
    }

private:
    mach_port_t port_;
};

void release_port(uint32_t port) {
    if (MACH_PORT_VALID(port)) mach_port_deallocate(mach_task_self(), port);
}

bool is_gone(kern_return_t kr) {
    // A thread that exited: its port is a dead name (the send fails) or the kernel says so.
    return kr == KERN_TERMINATED || kr == KERN_INVALID_ARGUMENT || kr == MACH_SEND_INVALID_DEST ||
           kr == KERN_INVALID_NAME || kr == KERN_INVALID_RIGHT;
}

// ---- the thin thread layer (suspend_cycle.h's ThreadLayer) ----------------------------------

struct MachThreadLayer {
    using Handle = thread_act_t;

    SuspendStatus suspend(Handle t) {
        const kern_return_t kr = thread_suspend(t);
        if (kr == KERN_SUCCESS) return SuspendStatus::kOk;
        if (kr == KERN_ABORTED) return SuspendStatus::kAborted;
        return is_gone(kr) ? SuspendStatus::kGone : SuspendStatus::kFailed;
    }

    // NO-HEAP: the thread is suspended.
    bool get_state(Handle t, RegisterContext* out) {
#if defined(__x86_64__)
        x86_thread_state64_t st;
        mach_msg_type_number_t count = x86_THREAD_STATE64_COUNT;
        const kern_return_t kr =
            thread_get_state(t, x86_THREAD_STATE64, reinterpret_cast<thread_state_t>(&st), &count);
        if (kr != KERN_SUCCESS || count != x86_THREAD_STATE64_COUNT) return false;
        out->pc = st.__rip;
        out->fp = st.__rbp;
        out->sp = st.__rsp;
        out->lr = 0;
#else
        arm_thread_state64_t st;
        mach_msg_type_number_t count = ARM_THREAD_STATE64_COUNT;
        const kern_return_t kr =
            thread_get_state(t, ARM_THREAD_STATE64, reinterpret_cast<thread_state_t>(&st), &count);
        if (kr != KERN_SUCCESS || count != ARM_THREAD_STATE64_COUNT) return false;
        // Only through the accessors: the fields are opaque (and signed) on arm64e.
        out->pc = strip_pointer_auth(static_cast<uint64_t>(arm_thread_state64_get_pc(st)));
        out->lr = strip_pointer_auth(static_cast<uint64_t>(arm_thread_state64_get_lr(st)));
        out->fp = static_cast<uint64_t>(arm_thread_state64_get_fp(st));
        out->sp = static_cast<uint64_t>(arm_thread_state64_get_sp(st));
#endif
        return true;
    }

    ResumeStatus resume(Handle t) {
        const kern_return_t kr = thread_resume(t);
        if (kr == KERN_SUCCESS) return ResumeStatus::kOk;
        if (kr == KERN_ABORTED) return ResumeStatus::kAborted;
        return is_gone(kr) ? ResumeStatus::kGone : ResumeStatus::kFailed;
    }

    uint64_t now_ns() { return spprof::now_ns(); }
};

// Reads another thread's memory through the kernel: an unmapped address is an error, not a
// fault. NO-HEAP (a Mach trap; the MIG reply port is created by the warm-up before sampling).
struct MachFetch {
    bool operator()(uintptr_t addr, void* out, size_t n) const {
        mach_vm_size_t got = 0;
        const kern_return_t kr =
            mach_vm_read_overwrite(mach_task_self(), addr, n,
                                   static_cast<mach_vm_address_t>(reinterpret_cast<uintptr_t>(out)), &got);
        return kr == KERN_SUCCESS && got == n;
    }
};
using MachReader = CachedReader<MachFetch>;

struct MachClock {
    uint64_t now() const { return mach_absolute_time(); }
    void sleep_until(uint64_t deadline) { mach_wait_until(deadline); }
};

// ---- thread facts read outside any window ----------------------------------------------------

uint64_t time_value_ns(const time_value_t& tv) {
    return static_cast<uint64_t>(tv.seconds) * 1'000'000'000ull +
           static_cast<uint64_t>(tv.microseconds) * 1'000ull;
}

StackBounds stack_bounds_of(pthread_t pt) {
    StackBounds b;
    if (!platform_thread_stack_bounds(reinterpret_cast<unsigned long>(pt), &b.lo, &b.hi)) return StackBounds{};
    return b;
}

// ---- process-wide state ----------------------------------------------------------------------

// The registry is reached by the introspection hook on any thread at any time, including during
// exit after static destructors ran: it is allocated once and never freed.
std::atomic<ThreadRegistry*> g_registry{nullptr};
std::atomic<pthread_introspection_hook_t> g_prev_hook{nullptr};
std::atomic<bool> g_hook_installed{false};
std::atomic<bool> g_initialised{false};
std::atomic<bool> g_native{false};

// Attached Python threads: written by the control thread, copied by the sampler between ticks.
std::mutex g_attach_mu;
std::vector<ThreadCtx*> g_attached;  // guarded by g_attach_mu
std::atomic<uint64_t> g_attach_gen{0};

SuspendStats g_stats;
ThreadCensus g_census;
// Records written for threads without a Python state (<thread "name">) this session.
std::atomic<uint64_t> g_native_only_samples{0};

static_assert(std::atomic<ThreadRegistry*>::is_always_lock_free, "read by the hook");
static_assert(std::atomic<pthread_introspection_hook_t>::is_always_lock_free, "read by the hook");
static_assert(std::atomic<bool>::is_always_lock_free, "flags read by the sampler");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "generation polled by the sampler");

ThreadRegistry* registry_if_enabled() {
    ThreadRegistry* reg = g_registry.load(std::memory_order_acquire);
    return reg != nullptr && reg->enabled() ? reg : nullptr;
}

// The pthread introspection hook. Runs on the thread the event is about for START and
// TERMINATE (the header guarantees it), so the thread's own id, port and stack are read
// without touching any other thread. Takes the registry mutex briefly; never logs.
void introspection_hook(unsigned int event, pthread_t thread, void* addr, size_t size) {
    if (ThreadRegistry* reg = registry_if_enabled()) {
        if (event == PTHREAD_INTROSPECTION_THREAD_START) {
            ThreadEntry e;
            if (pthread_threadid_np(nullptr, &e.thread_id) == 0) {
                e.port = mach_thread_self();  // a reference we own until compaction
                e.pthread = reinterpret_cast<uintptr_t>(thread);
                const StackBounds b = stack_bounds_of(thread);
                e.stack_lo = b.lo;
                e.stack_hi = b.hi;
                registry_add(*reg, e);  // releases the port itself when refused
            }
        } else if (event == PTHREAD_INTROSPECTION_THREAD_TERMINATE) {
            registry_remove_pthread(*reg, reinterpret_cast<uintptr_t>(thread));
        }
    }
    if (pthread_introspection_hook_t prev = g_prev_hook.load(std::memory_order_acquire)) {
        prev(event, thread, addr, size);
    }
}

// Add every thread of the task the registry does not know yet (threads that predate the hook,
// the main thread included). Control thread at start, or the sampler between ticks; nothing is
// suspended. Returns the number added, or -1 when task_threads failed.
int seed_registry(ThreadRegistry& reg) {
    MachThreadList list;
    if (!list.load()) return -1;
    int added = 0;
    for (size_t i = 0; i < list.size(); ++i) {
        ThreadEntry e;
        if (!mach_thread_id_of(list.at(i), &e.thread_id)) continue;  // exited meanwhile
        if (reg.contains(e.thread_id)) continue;
        // Another thread's pthread data: allowed here, outside any window (it takes libpthread's
        // list lock). A thread exiting right now makes these return null/ESRCH, checked below.
        const pthread_t pt = pthread_from_mach_thread_np(list.at(i));
        e.pthread = reinterpret_cast<uintptr_t>(pt);
        const StackBounds b = stack_bounds_of(pt);
        e.stack_lo = b.lo;
        e.stack_hi = b.hi;
        e.port = list.take(i);
        if (registry_add(reg, e)) ++added;
    }
    return added;
}

// A thread_resume failed after a successful thread_suspend: that thread stays suspended and
// the process will hang on it (on the GIL, a lock it holds, or a join). Say so with write(2)
// only -- stdio's lock may be held by the stuck thread -- and abort so the failure is a crash
// report, not a silent hang. Sampler thread.
[[noreturn]] void die_resume_failed(uint64_t thread_id) {
    char msg[160];
    const char head[] = "spprof: FATAL: thread_resume failed after thread_suspend; thread id ";
    size_t n = sizeof head - 1;
    std::memcpy(msg, head, n);
    char digits[24];
    size_t d = 0;
    do {
        digits[d++] = static_cast<char>('0' + thread_id % 10);
        thread_id /= 10;
    } while (thread_id != 0 && d < sizeof digits);
    while (d != 0) msg[n++] = digits[--d];
    const char tail[] = " is left suspended; aborting\n";
    std::memcpy(msg + n, tail, sizeof tail - 1);
    n += sizeof tail - 1;
    (void)!write(STDERR_FILENO, msg, n);
    std::abort();
}

// ---- the sampler -----------------------------------------------------------------------------

struct Target {
    ThreadCtx* ctx = nullptr;  // dereferenced only while the table still publishes it at serial
    uint32_t serial = 0;
    uint64_t thread_id = 0;
    thread_act_t port = MACH_PORT_NULL;  // owned by the registry entry; valid until we compact
    StackBounds bounds;
    uint64_t last_sample_ns = 0;  // timestamp of this thread's previous record
    size_t census = SIZE_MAX;
};

class MachSampler {
public:
    // Control thread. Allocates every buffer the sampler thread will use.
    Error start(uint64_t interval_ns, bool wall_mode);
    // Control thread. Idempotent.
    void stop();
    bool running() const { return thread_started_; }
    // Child of fork(): forget the thread without joining it.
    void forget_after_fork() {
        thread_started_ = false;
        running_.store(false, std::memory_order_release);
    }

private:
    static void* thread_main(void* self);
    void run();
    void warm_up();
    void tick();
    void refresh_targets();
    void sample(Target& t, const ThreadTable& table);

    // Control
    pthread_t thread_{};
    bool thread_started_ = false;
    std::atomic<bool> running_{false};
    // Session configuration, fixed while the thread runs
    uint64_t interval_ns_ = 0;
    bool wall_mode_ = false;
    ThreadRegistry* registry_ = nullptr;
    // The main interpreter's GIL state and "collecting" flag: who holds the GIL, and whether
    // that thread is running the cyclic GC (capture/pyframes/gil_state.h, gc_state.h).
    const unsigned char* gil_ = nullptr;
    const int* gc_collecting_ = nullptr;
    // Sampler-thread state; buffers allocated by start()
    std::unique_ptr<RawFrame[]> frames_;
    std::unique_ptr<uint64_t[]> pcs_;
    std::unique_ptr<MachReader> reader_;
    std::vector<ThreadEntry> entries_;
    std::vector<ThreadCtx*> attached_;
    std::vector<Target> targets_, next_targets_;
    uint64_t seen_registry_gen_ = 0;
    uint64_t seen_attach_gen_ = 0;
    bool targets_valid_ = false;
    uint64_t last_reseed_ns_ = 0;
    uint64_t self_thread_id_ = 0;
    mach_port_t self_port_ = MACH_PORT_NULL;
    MachThreadLayer layer_;
};

// Control thread only: made by init, freed by cleanup. A plain pointer on purpose: a session
// still running at exit must not see its sampler freed by a static destructor under it.
MachSampler* g_sampler = nullptr;

Error MachSampler::start(uint64_t interval_ns, bool wall_mode) {
    if (thread_started_) return Error::runtime("the Mach sampler is already running");
    if (interval_ns < kMinIntervalNs || interval_ns > kMaxIntervalNs)
        return Error::value("the Mach sampler's interval must be between 1 ms and 1 s");
    registry_ = registry_if_enabled();
    if (registry_ == nullptr) return Error::runtime("the Mach sampler is not initialised");
    try {
        if (!frames_) frames_.reset(new RawFrame[kMaxPythonFrames]);
        if (!pcs_) pcs_.reset(new uint64_t[kMaxNativeFrames]);
        if (!reader_) reader_.reset(new MachReader());
        entries_.resize(kRegistryReserve);
        targets_.reserve(64);
        next_targets_.reserve(64);
        attached_.reserve(64);
    } catch (const std::bad_alloc&) {
        return Error::memory("cannot allocate the Mach sampler's buffers");
    }
    interval_ns_ = interval_ns;
    wall_mode_ = wall_mode;
    gil_ = gil_state_of(PyInterpreterState_Main());
    gc_collecting_ = gc_collecting_flag(PyInterpreterState_Main());
    targets_.clear();
    targets_valid_ = false;
    g_stats.reset();
    g_census.clear();
    const int seeded = seed_registry(*registry_);
    if (seeded < 0) log_debug("task_threads failed: threads older than the hook are not sampled");
    registry_->set_sampler_active(true);
    running_.store(true, std::memory_order_release);
    const int rc = platform_thread_create(&thread_, &MachSampler::thread_main, this);
    if (rc != 0) {
        running_.store(false, std::memory_order_release);
        registry_->set_sampler_active(false);
        return Error::os("cannot start the Mach sampler thread", rc);
    }
    thread_started_ = true;
    log_debug("sampler start: interval %llu ns, %zu threads in registry (%d seeded), native %s",
              static_cast<unsigned long long>(interval_ns), registry_->count(), seeded,
              g_native.load() ? "on" : "off");
    return Error::none();
}

void MachSampler::stop() {
    if (!thread_started_) return;
    running_.store(false, std::memory_order_release);
    // EDEADLK/EINVAL/ESRCH only, none possible for the thread start() made and only we join.
    const int rc = pthread_join(thread_, nullptr);
    if (rc != 0) log_warning("joining the Mach sampler thread failed: %s", std::strerror(rc));
    thread_started_ = false;
    registry_->set_sampler_active(false);
    registry_compact(*registry_);
    targets_.clear();
    next_targets_.clear();
    if (log_debug_enabled()) {
        const SuspendStatsSnapshot s = g_stats.snapshot();
        log_debug("sampler stop: %llu ticks (%llu missed), %llu captured, %llu dropped, "
                  "%llu thread samples, %llu skipped, suspend total %llu ns max %llu ns, "
                  "%llu walk errors, %llu unmatched",
                  (unsigned long long)s.ticks, (unsigned long long)s.missed_ticks,
                  (unsigned long long)s.samples_captured, (unsigned long long)s.samples_dropped,
                  (unsigned long long)s.threads_sampled, (unsigned long long)s.threads_skipped,
                  (unsigned long long)s.total_suspend_ns, (unsigned long long)s.max_suspend_ns,
                  (unsigned long long)s.walk_errors, (unsigned long long)s.unmatched_threads);
        std::vector<CensusEntry> census(g_census.size());
        const size_t n = g_census.copy(census.data(), census.size());
        for (size_t i = 0; i < n && i < census.size(); ++i) {
            log_debug("  thread %llu \"%s\": %llu samples, %llu ns CPU",
                      (unsigned long long)census[i].thread_id, census[i].name,
                      (unsigned long long)census[i].samples, (unsigned long long)census[i].cpu_ns());
        }
    }
}

void* MachSampler::thread_main(void* self) {
    OwnThreadScope own;  // never sampled; its CPU time is spprof's in the balance
    static_cast<MachSampler*>(self)->run();
    return nullptr;
}

// Call every function the suspended window uses once, on this thread, before the first
// suspension: lazy binding (dyld) and this thread's MIG reply port are set up now, not while
// a thread is suspended. Sampler thread.
void MachSampler::warm_up() {
    MachPort self(mach_thread_self());
    thread_basic_info_data_t info{};
    mach_msg_type_number_t count = THREAD_BASIC_INFO_COUNT;
    (void)thread_info(self.get(), THREAD_BASIC_INFO, reinterpret_cast<thread_info_t>(&info), &count);
    (void)thread_suspend(MACH_PORT_NULL);  // invalid port: binds the stub, suspends nothing
    (void)thread_resume(MACH_PORT_NULL);
    RegisterContext regs;
    (void)layer_.get_state(self.get(), &regs);
    uint64_t probe = 1, copy = 0;
    reader_->reset();
    (void)MachFetch()(reinterpret_cast<uintptr_t>(&probe), &copy, sizeof copy);
    (void)reader_->read(reinterpret_cast<uintptr_t>(&probe), &copy, sizeof copy);
    reader_->reset();
    (void)now_ns();
    (void)walk_frame_pointers(StackReader{}, regs, StackBounds{}, pcs_.get(), 1);
}

void MachSampler::run() {
    pthread_setname_np("spprof-sampler");
    // Wake-up latency matters more than throughput here: ask for the interactive QoS class.
    (void)pthread_set_qos_class_self_np(QOS_CLASS_USER_INTERACTIVE, 0);
    MachPort self_port(mach_thread_self());  // released when the thread ends
    self_port_ = self_port.get();
    (void)pthread_threadid_np(nullptr, &self_thread_id_);
    warm_up();
    MachClock clock;
    const uint64_t interval = ns_to_mach(interval_ns_, g_timebase);
    const uint64_t slice = ns_to_mach(kStopSliceNs, g_timebase);
    run_deadline_loop(
        clock, interval, slice, running_,
        [this](uint64_t) {
            tick();
            sampler_round_done();  // after the round, no thread suspended
        },
        [](uint64_t missed) {
            if (missed != 0) g_stats.add_missed_ticks(missed);
        });
    self_port_ = MACH_PORT_NULL;
}

void MachSampler::tick() {
    g_stats.add_tick();
    // The whole cycle inside the capture gate, like a signal capture: the session frees a
    // retired ctx only once the gate was seen empty after it unpublished the ctx, so each ctx
    // found published below stays valid until we leave. No table: the session is stopping.
    const ThreadTable* table = capture_gate_enter();
    if (table != nullptr) {
        refresh_targets();
        for (Target& t : targets_) {
            if (!running_.load(std::memory_order_acquire)) break;
            sample(t, *table);
        }
    }
    capture_gate_leave();
}

// Rebuild the list of threads to sample when the registry or the attached set changed.
// Sampler thread, between windows: may allocate, lock and log.
void MachSampler::refresh_targets() {
    const uint64_t attach_gen = g_attach_gen.load(std::memory_order_acquire);
    if (targets_valid_ && attach_gen == seen_attach_gen_ &&
        registry_->generation() == seen_registry_gen_)
        return;
    // We own compaction while running: no copy of a dropped port survives this function.
    const size_t dropped = registry_compact(*registry_);
    const uint64_t registry_gen = registry_->generation();
    {
        std::lock_guard<std::mutex> lock(g_attach_mu);
        attached_.assign(g_attached.begin(), g_attached.end());
    }
    size_t live = 0;
    for (;;) {
        live = registry_snapshot(*registry_, entries_.data(), entries_.size());
        if (live <= entries_.size()) break;
        entries_.resize(live + live / 2);
    }
    next_targets_.clear();
    uint64_t unmatched = 0;
    for (ThreadCtx* ctx : attached_) {
        const ThreadEntry* entry = nullptr;
        for (size_t i = 0; i < live; ++i) {
            if (entries_[i].thread_id == ctx->native_tid_) {
                entry = &entries_[i];
                break;
            }
        }
        if (entry == nullptr || entry->thread_id == self_thread_id_) {
            ++unmatched;
            continue;
        }
        Target t;
        t.ctx = ctx;
        t.serial = ctx->serial_;
        t.thread_id = entry->thread_id;
        t.port = entry->port;
        t.bounds = StackBounds{entry->stack_lo, entry->stack_hi};
        for (const Target& old : targets_) {
            if (old.ctx == ctx && old.thread_id == t.thread_id) {
                t.last_sample_ns = old.last_sample_ns;
                t.census = old.census;
                break;
            }
        }
        if (t.census == SIZE_MAX) {
            t.census = g_census.slot(t.thread_id);
            char name[kThreadNameBytes] = {};
            // Validated by libpthread against its thread list: a stale pthread_t gives ESRCH.
            if (entry->pthread != 0 &&
                pthread_getname_np(reinterpret_cast<pthread_t>(entry->pthread), name, sizeof name) == 0)
                g_census.set_name(t.census, name);
        }
        next_targets_.push_back(t);
    }
    targets_.swap(next_targets_);
    targets_valid_ = true;
    seen_attach_gen_ = attach_gen;
    seen_registry_gen_ = registry_gen;
    g_stats.set_unmatched(unmatched);
    log_debug("registry: %zu live threads (%zu dropped), %zu attached, %zu sampled, %llu unmatched",
              live, dropped, attached_.size(), targets_.size(),
              static_cast<unsigned long long>(unmatched));
    if (unmatched != 0) {
        const uint64_t now = now_ns();
        if (now - last_reseed_ns_ >= kReseedPeriodNs) {
            last_reseed_ns_ = now;
            const int added = seed_registry(*registry_);
            if (added > 0) log_debug("re-seeded %d threads from task_threads", added);
        }
    }
}

// One thread: facts, the suspended window, then the record. Sampler thread, inside the
// capture gate.
void MachSampler::sample(Target& t, const ThreadTable& table) {
    if (t.port == self_port_ || t.thread_id == self_thread_id_) return;  // never ourselves
    // Still this thread's ctx, published: the lookup a signal capture makes (thread_table.h).
    // A ctx detached since refresh_targets is skipped before it is dereferenced.
    if (table.by_serial(t.serial) != t.ctx) return;
    ThreadCtx* const ctx = t.ctx;
    if (ctx->native_tid_ != t.thread_id || ctx->state_.load(std::memory_order_acquire) != ThreadState::kAttached)
        return;
    // 0 for a thread the OS scan found without a Python state (os_thread_scan.cpp): its
    // registers and native stack only, under a frame naming it, as a Linux capture records it.
    const uintptr_t tstate = reinterpret_cast<uintptr_t>(ctx->tstate_);
    const bool native_only = tstate == 0;

    // Run state and CPU time before suspending (suspended, every thread looks stopped).
    thread_basic_info_data_t info{};
    mach_msg_type_number_t count = THREAD_BASIC_INFO_COUNT;
    const kern_return_t kr =
        thread_info(t.port, THREAD_BASIC_INFO, reinterpret_cast<thread_info_t>(&info), &count);
    if (kr != KERN_SUCCESS) {
        if (is_gone(kr)) registry_remove(*registry_, t.thread_id);
        g_stats.add_skipped();
        return;
    }
    const bool on_cpu = info.run_state == TH_STATE_RUNNING;
    const uint64_t cpu_ns = time_value_ns(info.user_time) + time_value_ns(info.system_time);
    g_census.observe_cpu(t.census, cpu_ns);
    ctx->last_cpu_ns_.store(cpu_ns, std::memory_order_relaxed);
    if (!on_cpu && (!wall_mode_ || native_only)) {
        // CPU mode keeps only what ran: a blocked thread is not suspended for a sample that
        // would be dropped. Its next sample stands for one interval, not the time it slept.
        // A native-only thread (a C library's pool waiting for work) is sampled while it runs
        // in wall mode too, as on Linux, where its CPU timer samples it and the census skips it.
        g_stats.add_off_cpu_skipped();
        t.last_sample_ns = now_ns();
        return;
    }

    const bool native = g_native.load(std::memory_order_relaxed);
    MachReader& reader = *reader_;
    RawFrame* const frames = frames_.get();
    uint64_t* const pcs = pcs_.get();
    const StackBounds bounds = t.bounds;
    reader.reset();
    uint64_t stamp = 0;
    UnwindStatus nw;
    WalkResult pw;
    bool has_gil = false;
    bool in_gc = false;
    const CycleResult r = suspend_and_copy(layer_, t.port, [&](const RegisterContext& regs) {
        // SUSPENDED WINDOW, NO-HEAP: pre-allocated buffers, reads that cannot fault, no locks.
        stamp = now_ns();
        if (native) nw = walk_frame_pointers(StackReader{}, regs, bounds, pcs, kMaxNativeFrames);
        if (!native_only) {
            pw = walk_python_stack(reader, tstate, frames, kMaxPythonFrames);
            // Suspended, a thread that holds the GIL cannot let it go: "holds it" is exact. The
            // collector holds the GIL, so "collecting and this thread holds it" names it, as
            // the Linux capture's PyGILState_Check does (signal_handler.cpp, running_gc).
            has_gil = gil_held_by(gil_, tstate);
            in_gc = has_gil && gc_collecting_ != nullptr && *reinterpret_cast<const volatile int*>(gc_collecting_) != 0;
        }
    });
    // Every thread runs again from here on.
    record_cycle(g_stats, r);
    if (r.outcome == CycleResult::kResumeFailed) die_resume_failed(t.thread_id);
    if (r.outcome == CycleResult::kGone || r.gone_after) registry_remove(*registry_, t.thread_id);
    if (r.outcome != CycleResult::kSampled) return;
    if (pw.error) g_stats.add_walk_error();
    const uint32_t native_depth = native ? nw.depth : 0;
    if (native_only) {
        // The record a Linux capture makes for such a thread (signal_handler.cpp, capture_into):
        // one kThreadNameFrameCode frame, which the drain names <thread "OS name">, at the root
        // of its native pcs if any. A Python state it holds for a moment (PyGILState_Ensure
        // from C) is not read: its TSS entry cannot be read from another thread.
        frames[0] = RawFrame{kThreadNameFrameCode, 0, 0};
        pw = WalkResult{};
        pw.depth = 1;
    }
    if (pw.depth == 0 && native_depth == 0) return;
    if (in_gc && pw.depth < kMaxPythonFrames) {
        // <GC> on the leaf side of the frame that ran the collection (leaf first), as on Linux.
        std::memmove(frames + 1, frames, pw.depth * sizeof(RawFrame));
        frames[0] = RawFrame{kGcFrameCode, 0, 0};
        ++pw.depth;
        capture_count_gc();
    }

    RawSampleHeader h{};
    h.timestamp_ns = stamp;
    h.weight_ns = sample_weight_ns(stamp, t.last_sample_ns, interval_ns_);
    h.native_tid = t.thread_id;
    h.thread_serial = ctx->serial_;
    // A torn chain (pw.error) lost its root side like a stack deeper than the cap. Wall mode:
    // a thread off CPU was blocked (the session gives an idle record's time to its stack).
    h.flags = (on_cpu ? kSampleOnCpu : kSampleIdle) | (pw.truncated || pw.error ? kSampleTruncated : 0u) |
              (native_only ? 0u : kSampleGilKnown | (has_gil ? kSampleHasGil : 0u));
    h.depth = static_cast<uint16_t>(pw.depth);
    h.native_depth = static_cast<uint16_t>(native_depth);
    t.last_sample_ns = stamp;
    const bool written = write_foreign_record(ctx, h, frames, native ? pcs : nullptr);
    capture_count_sampled(written);
    if (written) {
        g_stats.add_captured();
        if (native_only) g_native_only_samples.fetch_add(1, std::memory_order_relaxed);
        ctx->captured_.fetch_add(1, std::memory_order_relaxed);
        g_census.add_sample(t.census);
    } else {
        g_stats.add_dropped();
        ctx->dropped_.fetch_add(1, std::memory_order_relaxed);
    }
}

}  // namespace

// ---- public functions (darwin_mach.h) --------------------------------------------------------

Error mach_sampler_init() {
    if (g_initialised.load(std::memory_order_acquire)) return Error::runtime("the Mach sampler is already initialised");
    ThreadRegistry* reg = g_registry.load(std::memory_order_acquire);
    if (reg == nullptr) {
        reg = new (std::nothrow) ThreadRegistry();
        if (reg == nullptr) return Error::memory("cannot allocate the Mach sampler's thread registry");
        g_registry.store(reg, std::memory_order_release);
    }
    Error e = registry_init(*reg, release_port, kRegistryReserve);
    if (!e.ok()) return e;
    if (g_sampler == nullptr) {
        g_sampler = new (std::nothrow) MachSampler();
        if (g_sampler == nullptr) {
            registry_cleanup(*reg);
            return Error::memory("cannot allocate the Mach sampler");
        }
    }
    if (!g_hook_installed.exchange(true)) {
        // Once per process, never removed: a library loaded later may chain to us.
        g_prev_hook.store(pthread_introspection_hook_install(&introspection_hook),
                          std::memory_order_release);
    }
    g_initialised.store(true, std::memory_order_release);
    log_debug("init: introspection hook installed, registry ready");
    return Error::none();
}

void mach_sampler_cleanup() {
    if (!g_initialised.load(std::memory_order_acquire)) return;
    if (g_sampler != nullptr) g_sampler->stop();
    {
        std::lock_guard<std::mutex> lock(g_attach_mu);
        g_attached.clear();
        g_attach_gen.fetch_add(1, std::memory_order_acq_rel);
    }
    if (ThreadRegistry* reg = g_registry.load(std::memory_order_acquire)) registry_cleanup(*reg);
    delete g_sampler;
    g_sampler = nullptr;
    g_initialised.store(false, std::memory_order_release);
    log_debug("cleanup: registry released; hook left installed as a pass-through");
}

Error mach_sampler_start(uint64_t interval_ns, bool wall_mode) {
    if (!g_initialised.load(std::memory_order_acquire) || g_sampler == nullptr)
        return Error::runtime("the Mach sampler is not initialised");
    return g_sampler->start(interval_ns, wall_mode);
}

void mach_sampler_stop() {
    if (g_sampler != nullptr) g_sampler->stop();
}

Error mach_sampler_attach(ThreadCtx* ctx) {
    std::lock_guard<std::mutex> lock(g_attach_mu);
    for (ThreadCtx* c : g_attached) {
        if (c == ctx) return Error::none();
    }
    try {
        g_attached.push_back(ctx);
    } catch (const std::bad_alloc&) {
        return Error::memory("cannot attach the thread to the Mach sampler");
    }
    g_attach_gen.fetch_add(1, std::memory_order_acq_rel);
    log_debug("attach: thread %llu (serial %u)", static_cast<unsigned long long>(ctx->native_tid_),
              ctx->serial_);
    return Error::none();
}

void mach_sampler_detach(ThreadCtx* ctx) {
    std::lock_guard<std::mutex> lock(g_attach_mu);
    for (size_t i = 0; i < g_attached.size(); ++i) {
        if (g_attached[i] == ctx) {
            g_attached.erase(g_attached.begin() + static_cast<std::ptrdiff_t>(i));
            g_attach_gen.fetch_add(1, std::memory_order_acq_rel);
            log_debug("detach: thread %llu", static_cast<unsigned long long>(ctx->native_tid_));
            return;
        }
    }
}

void mach_sampler_set_native_unwinding(bool enabled) { g_native.store(enabled, std::memory_order_relaxed); }

SuspendStatsSnapshot mach_sampler_stats_snapshot() { return g_stats.snapshot(); }

int mach_sampler_get_native_unwinding() { return g_native.load(std::memory_order_relaxed) ? 1 : 0; }

namespace {
void put(uint64_t* out, uint64_t value) {
    if (out != nullptr) *out = value;
}
}  // namespace

void mach_sampler_get_stats(uint64_t* samples_captured, uint64_t* samples_dropped, uint64_t* threads_sampled) {
    mach_sampler_get_extended_stats(samples_captured, samples_dropped, threads_sampled, nullptr, nullptr, nullptr,
                                    nullptr);
}

void mach_sampler_get_extended_stats(uint64_t* samples_captured, uint64_t* samples_dropped,
                                     uint64_t* threads_sampled, uint64_t* threads_skipped,
                                     uint64_t* total_suspend_ns, uint64_t* max_suspend_ns, uint64_t* walk_errors) {
    const SuspendStatsSnapshot s = g_stats.snapshot();
    put(samples_captured, s.samples_captured);
    put(samples_dropped, s.samples_dropped);
    put(threads_sampled, s.threads_sampled);
    put(threads_skipped, s.threads_skipped);
    put(total_suspend_ns, s.total_suspend_ns);
    put(max_suspend_ns, s.max_suspend_ns);
    put(walk_errors, s.walk_errors);
}

void mach_sampler_reset_stats() {
    // A running sampler keeps counting from zero; the max is per session by construction.
    g_stats.reset();
    g_native_only_samples.store(0, std::memory_order_relaxed);
}

uint64_t mach_sampler_native_only_samples() { return g_native_only_samples.load(std::memory_order_relaxed); }

bool mach_sampler_thread_known(uint64_t thread_id, uintptr_t* stack_lo, uintptr_t* stack_hi) {
    ThreadRegistry* reg = registry_if_enabled();
    ThreadEntry e;
    if (reg == nullptr || !reg->find(thread_id, &e)) return false;
    if (stack_lo != nullptr) *stack_lo = e.stack_lo;
    if (stack_hi != nullptr) *stack_hi = e.stack_hi;
    return true;
}

bool mach_safe_read(uintptr_t addr, void* out, size_t n) {
    if (n == 0) return true;
    if (!plausible_address(addr, n)) return false;
    return MachFetch()(addr, out, n);
}

size_t mach_sampler_thread_count() {
    ThreadRegistry* reg = registry_if_enabled();
    return reg != nullptr ? reg->count() : 0;
}

size_t mach_sampler_attached_count() {
    std::lock_guard<std::mutex> lock(g_attach_mu);
    return g_attached.size();
}

size_t mach_sampler_census(CensusEntry* out, size_t cap) { return g_census.copy(out, cap); }

bool mach_sampler_thread_cpu_ns(uint64_t thread_id, uint64_t* out) {
    ThreadRegistry* reg = registry_if_enabled();
    if (reg == nullptr) return false;
    bool ok = false;
    // Under the registry mutex the port cannot be released; thread_info is a kernel call and
    // takes no user-space lock.
    reg->with_entry(thread_id, [&](const ThreadEntry& e) {
        thread_basic_info_data_t info{};
        mach_msg_type_number_t count = THREAD_BASIC_INFO_COUNT;
        if (thread_info(e.port, THREAD_BASIC_INFO, reinterpret_cast<thread_info_t>(&info), &count) ==
            KERN_SUCCESS) {
            *out = time_value_ns(info.user_time) + time_value_ns(info.system_time);
            ok = true;
        }
    });
    return ok;
}

size_t mach_sampler_thread_name(uint64_t thread_id, char* buf, size_t len) {
    if (buf == nullptr || len == 0) return 0;
    buf[0] = '\0';
    ThreadEntry e;
    ThreadRegistry* reg = registry_if_enabled();
    if (reg == nullptr || !reg->find(thread_id, &e) || e.pthread == 0) return 0;
    char name[kThreadNameBytes] = {};
    // Outside the registry mutex (libpthread takes its list lock); a stale pthread_t is
    // validated by libpthread and gives ESRCH.
    if (pthread_getname_np(reinterpret_cast<pthread_t>(e.pthread), name, sizeof name) != 0) return 0;
    const size_t n = std::strlen(name) < len - 1 ? std::strlen(name) : len - 1;
    std::memcpy(buf, name, n);
    buf[n] = '\0';
    return n;
}

uint64_t mach_sampler_now_ns() { return now_ns(); }

void mach_sampler_after_fork_child() {
    if (g_sampler != nullptr) g_sampler->forget_after_fork();
    if (ThreadRegistry* reg = g_registry.load(std::memory_order_acquire)) {
        if (reg->enabled()) reg->reset_after_fork();
    }
    // The parent's threads may have held these mutexes at fork: rebuild them in place. The old
    // vectors are leaked on purpose (their state cannot be trusted enough to free them).
    new (&g_attach_mu) std::mutex();
    new (&g_attached) std::vector<ThreadCtx*>();
    g_attach_gen.fetch_add(1, std::memory_order_acq_rel);
    new (&g_census) ThreadCensus();
    g_stats.reset();
}

}  // namespace spprof

#endif  // __APPLE__
