// platform/linux.cpp: platform.h on Linux.
//
// Sampling: one handler, on_sample_signal (signal_handler.cpp: it decodes each delivery through
// read_delivery below and runs the capture; this file installs it and chains for it), fed
// either by a POSIX CPU-time timer per thread (timer_create on the thread's CPU clock,
// SIGEV_THREAD_ID, each delivery weighted by 1 + overrun because CPU-clock timers fire on the
// scheduler tick) or by the process-wide setitimer(ITIMER_PROF) fallback,
// which lands on whichever thread is running and is looked up by tid. Wall mode uses the
// per-thread timers too, for the time threads run (wall_sampler.h).
// Signals: the per-thread timers deliver a real-time signal no one else has a handler for,
// chosen at start (from SIGRTMAX down), so SIGPROF and ITIMER_PROF stay the program's (a
// yappi-style sampler, gperftools, the program's own). The itimer fallback has to use SIGPROF:
// it refuses when the program already has a SIGPROF handler or an ITIMER_PROF running. A
// delivery spprof did not send (wrong si_code, sender or value) is chained to the handler
// installed before ours, never taken as a sample.
#if defined(__linux__)

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "../log.h"
#include "../signal_handler.h"
#include "../capture/thread_ctx.h"
#include "platform.h"
#include "proc_task_files.h"

namespace spprof {

// A thread timer's schedule, for the expiries owed at the thread's end (platform_thread_finish):
// expiries fall at anchor_cpu_ns, then every interval_ns of the thread's CPU clock;
// anchor_weight_ns is ThreadCtx::timer_cpu_ns_ when the anchor was set (what was delivered
// before it); carried_* what an earlier schedule (before a re-arm) owed. Written when armed and
// re-armed; GIL held, like every reader.
struct TimerSchedule {
    uint64_t anchor_cpu_ns = 0;
    uint64_t anchor_weight_ns = 0;
    uint64_t interval_ns = 0;  // 0: unknown, owes nothing
    uint64_t carried_expiries = 0;
    uint64_t carried_ns = 0;
    uint64_t settled = 0;  // expiries of this schedule owed at arming, written by the session then

    // Expiries due by CPU time `cpu` and not delivered by `weight` (ThreadCtx::timer_cpu_ns_).
    uint64_t owed(uint64_t cpu, uint64_t weight) const {
        if (interval_ns == 0) return 0;
        const uint64_t delivered_ns = weight > anchor_weight_ns ? weight - anchor_weight_ns : 0;
        const uint64_t delivered = (delivered_ns + interval_ns / 2) / interval_ns;
        const uint64_t due = cpu >= anchor_cpu_ns ? (cpu - anchor_cpu_ns) / interval_ns + 1 : 0;
        return due > delivered + settled ? due - delivered - settled : 0;
    }
};

// One thread's POSIX timer, deleted with its owner. Exists only while armed: glibc hands out
// kernel timer id 0 as a valid timer_t, so "no timer" is the absence of this object, never a
// zero id.
struct PlatformThread {
    explicit PlatformThread(timer_t timer) : id(timer) {}
    PlatformThread(const PlatformThread&) = delete;
    PlatformThread& operator=(const PlatformThread&) = delete;
    ~PlatformThread() {
        // EINVAL only: the id is ours and deleted once, so there is nothing else to undo.
        if (timer_delete(id) != 0) log_debug("timer_delete failed: %s", std::strerror(errno));
    }
    const timer_t id;
    TimerSchedule schedule;
};

namespace {

// The deleter of ThreadCtx::platform_ (thread_ctx.h).
void platform_thread_free(PlatformThread* p) { delete p; }

using Route = SignalRoute;
SignalPath& g_path = g_signal_path;  // what the handler (signal_handler.cpp) reads

Route route() { return static_cast<Route>(g_path.route.load(std::memory_order_acquire)); }
void set_route(Route r) { g_path.route.store(static_cast<int>(r), std::memory_order_release); }

TimerKind g_kind = TimerKind::kAuto;
// Our handler on one signal, and the handler before ours, read by the handler for chaining.
// Two slots: a replacement (the application installed its own handler after start()) is
// written into the idle slot and published by flipping the index, so a handler never reads a
// half-written sigaction.
struct SignalSlot {
    std::atomic<int> signo{0};
    bool installed = false;
    struct sigaction prev[2];
    std::atomic<int> prev_slot{0};
};
SignalSlot g_rt;    // the real-time signal of the per-thread timers (and wall requests)
SignalSlot g_prof;  // SIGPROF, for the itimer fallback only

struct Counters {
    std::atomic<uint64_t> foreign{0}, timers_active{0}, timer_failures{0};
    std::atomic<uint64_t> itimer_yielded{0};  // 1 once the program took SIGPROF or ITIMER_PROF
    std::atomic<uint64_t> itimer_yielded_at_cpu_ns{0};  // the process's CPU clock then
};
Counters g_stats;

inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
}

// The first expiry of every timer is drawn uniformly in (0, interval] from a splitmix64
// stream (seeded at each platform_timer_create). Phase zero made a thread that uses less than
// one interval of CPU invisible and lost every thread's last partial interval; a uniform phase
// makes the expiries a thread meets CPU / interval in expectation, whatever its CPU, and
// breaks lock-step with periodic work. Normal context; atomic so two callers never share a draw.
std::atomic<uint64_t> g_phase_state{0};

uint64_t draw_phase(uint64_t interval) {
    uint64_t z = g_phase_state.fetch_add(0x9E3779B97F4A7C15ull, std::memory_order_relaxed) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return interval == 0 ? 0 : 1 + z % interval;  // the modulo's bias is below 2^-40 for intervals under 1 h
}

struct timespec to_timespec(uint64_t ns) {
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(ns / 1000000000ull);
    ts.tv_nsec = static_cast<long>(ns % 1000000000ull);
    return ts;
}

// SIGNAL-SAFE (g_signal_path.chain): forwards a signal that is not ours to whoever had it
// before us. A default action (terminate) is not replayed: a stray signal while profiling is
// counted and dropped.
void chain(int signo, siginfo_t* si, void* uc) {
    bump(g_stats.foreign);
    const SignalSlot& slot = signo == g_rt.signo.load(std::memory_order_relaxed) ? g_rt : g_prof;
    const struct sigaction& prev = slot.prev[slot.prev_slot.load(std::memory_order_acquire)];
    if (prev.sa_flags & SA_SIGINFO) {
        if (prev.sa_sigaction != nullptr) prev.sa_sigaction(signo, si, uc);
    } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN &&
               prev.sa_handler != nullptr) {
        prev.sa_handler(signo);
    }
}

// SIGNAL-SAFE (g_signal_path.read): what Linux's siginfo says about one delivery. A timer's
// expirations and the itimer's kernel origin are Linux fields (si_overrun, SI_KERNEL).
SignalDelivery read_delivery(int signo, const siginfo_t* si) {
    SignalDelivery d;
    if (si == nullptr) return d;
    if (si->si_code == SI_TIMER) {
        d.kind = SignalDelivery::kTimer;
        d.value = reinterpret_cast<uint64_t>(si->si_value.sival_ptr);
        d.overrun = si->si_overrun > 0 ? static_cast<uint64_t>(si->si_overrun) : 0;
    } else if (si->si_code == SI_QUEUE && si->si_pid == getpid()) {
        d.kind = SignalDelivery::kQueuedBySelf;
        d.value = reinterpret_cast<uint64_t>(si->si_value.sival_ptr);
    } else if (signo == SIGPROF && si->si_code == SI_KERNEL) {
        d.kind = SignalDelivery::kProcessTimer;
    }
    return d;
}

clockid_t thread_cpu_clock(uint64_t tid) {
    // The kernel's encoding of a per-thread CPU clock: ~tid << 3 | CPUCLOCK_PERTHREAD | SCHED.
    return static_cast<clockid_t>((~static_cast<unsigned int>(tid) << 3) | 6u);
}

// Queues signal `signo` carrying `value` to thread `tid` of this process (SI_QUEUE).
bool queue_signal(pid_t tid, int signo, uint64_t value) {
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    info.si_signo = signo;
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    info.si_value.sival_ptr = reinterpret_cast<void*>(value);
    return syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, signo, &info) == 0;
}

bool is_ours(const struct sigaction& sa) { return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_sample_signal; }

// False when timers refuse `signo` itself (EINVAL). A kernel accepts every real-time signal, but
// qemu-user (make test-arm64) cannot map the highest ones to host signals and refuses them
// while sigaction on them succeeds. Any other failure (EAGAIN: RLIMIT_SIGPENDING reached) is
// not the signal's fault and is left to the timer setup to report. The probe is never armed.
bool timer_accepts(int signo) {
    struct sigevent sev;
    std::memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = signo;
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) return errno != EINVAL;
    timer_delete(timer);
    return true;
}

// The real-time signal for this session: the highest one whose action is the default (no
// handler, not ignored) and that timers accept. 0 when every one is taken.
int choose_rt_signal() {
    for (int signo = SIGRTMAX; signo >= SIGRTMIN; --signo) {
        struct sigaction cur;
        if (sigaction(signo, nullptr, &cur) != 0) continue;
        if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL && timer_accepts(signo)) return signo;
    }
    return 0;
}

// Why the itimer fallback cannot run here (the program owns SIGPROF or ITIMER_PROF), or null.
const char* itimer_taken() {
    struct sigaction cur;
    if (sigaction(SIGPROF, nullptr, &cur) == 0 && !is_ours(cur) &&
        ((cur.sa_flags & SA_SIGINFO) ? cur.sa_sigaction != nullptr
                                     : (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN)))
        return "the program already has a SIGPROF handler; the itimer timer would take its signals";
    struct itimerval tv;
    if (getitimer(ITIMER_PROF, &tv) == 0 && (tv.it_value.tv_sec != 0 || tv.it_value.tv_usec != 0))
        return "the program already runs an ITIMER_PROF timer; the itimer timer would replace it";
    return nullptr;
}

struct sigaction our_action() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sample_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sa;
}

Error install_handler(SignalSlot& slot, int signo) {
    // Before the handler can run: sigaction orders these plain stores before any delivery.
    g_path.read = &read_delivery;
    g_path.chain = &chain;
    if (&slot == &g_rt) g_path.rt_signo.store(signo, std::memory_order_release);
    const struct sigaction sa = our_action();
    struct sigaction prev;
    if (sigaction(signo, &sa, &prev) != 0) return Error::os("sigaction on the sampling signal failed", errno);
    slot.prev[0] = prev;
    slot.prev_slot.store(0, std::memory_order_release);
    slot.signo.store(signo, std::memory_order_release);
    slot.installed = true;
    return Error::none();
}

void restore_handler(SignalSlot& slot) {
    if (!slot.installed) return;
    const int signo = slot.signo.load();
    struct sigaction current;
    if (sigaction(signo, nullptr, &current) != 0) {
        // Cannot happen for a signal we installed on (EINVAL only); leave it as it is.
        log_warning("signal %d: cannot read its handler (%s); leaving it in place", signo, std::strerror(errno));
    } else if (is_ours(current)) {
        // Ignoring a signal discards any instance still pending (POSIX), so a timer signal
        // queued before its timer was deleted cannot reach the previous (maybe default,
        // process-terminating) disposition.
        struct sigaction ign;
        std::memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigemptyset(&ign.sa_mask);
        if (sigaction(signo, &ign, nullptr) != 0 || sigaction(signo, &slot.prev[slot.prev_slot.load()], nullptr) != 0)
            log_warning("signal %d: restoring the previous handler failed (%s)", signo, std::strerror(errno));
    } else {
        log_debug("signal %d handler was replaced by the application; leaving theirs in place", signo);
    }
    slot.installed = false;
}

void restore_handlers() {
    restore_handler(g_rt);
    restore_handler(g_prof);
}

// The itimer fallback: SIGPROF and ITIMER_PROF, unless the program uses either.
Error start_itimer_fallback(uint64_t interval_ns);

// The itimer fallback's interval as setitimer holds it (us), to tell the program's timer from
// ours; 0 when spprof runs no ITIMER_PROF (not started, stopped, or given to the program).
std::atomic<uint64_t> g_itimer_interval_us{0};

Error start_itimer(uint64_t interval_ns) {
    struct itimerval tv;
    tv.it_interval.tv_sec = static_cast<time_t>(interval_ns / 1000000000ull);
    tv.it_interval.tv_usec = static_cast<suseconds_t>((interval_ns % 1000000000ull) / 1000);
    // The first expiry at a random phase too, in whole microseconds (the itimer's unit).
    const uint64_t interval_us = interval_ns / 1000;
    const uint64_t first_us = interval_us > 0 ? draw_phase(interval_us) : 1;
    tv.it_value.tv_sec = static_cast<time_t>(first_us / 1000000ull);
    tv.it_value.tv_usec = static_cast<suseconds_t>(first_us % 1000000ull);
    if (setitimer(ITIMER_PROF, &tv, nullptr) != 0) return Error::os("setitimer(ITIMER_PROF) failed", errno);
    g_itimer_interval_us.store(static_cast<uint64_t>(tv.it_interval.tv_sec) * 1000000ull +
                                   static_cast<uint64_t>(tv.it_interval.tv_usec),
                               std::memory_order_relaxed);
    return Error::none();
}

void stop_itimer() {
    // Given to the program (yield_itimer): the ITIMER_PROF running now is its own.
    if (g_itimer_interval_us.exchange(0, std::memory_order_relaxed) == 0) return;
    struct itimerval tv;
    std::memset(&tv, 0, sizeof tv);
    // EINVAL only (a zero value is always valid); say so rather than leave a timer silently.
    if (setitimer(ITIMER_PROF, &tv, nullptr) != 0)
        log_warning("stopping ITIMER_PROF failed: %s", std::strerror(errno));
}

// Creates and arms one thread's CPU timer on a schedule whose first expiry is at a random
// phase after ctx->timer_origin_cpu_ns_; `anchor_cpu_ns`: the thread's CPU clock at that first
// expiry. Expiries of the schedule that fell before the arming are owed at the thread's end.
// Normal context.
Error arm_thread_timer(ThreadCtx* ctx, uint64_t interval_ns, timer_t* out, uint64_t* anchor_cpu_ns,
                       uint64_t* owed_at_arm) {
    struct sigevent sev;
    std::memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = g_rt.signo.load(std::memory_order_relaxed);
#if defined(sigev_notify_thread_id)
    sev.sigev_notify_thread_id = static_cast<pid_t>(ctx->native_tid_);
#else
    sev._sigev_un._tid = static_cast<pid_t>(ctx->native_tid_);
#endif
    sev.sigev_value.sival_ptr = reinterpret_cast<void*>(kTimerValueMagic | ctx->serial_);
    timer_t id;
    if (timer_create(thread_cpu_clock(ctx->native_tid_), &sev, &id) != 0)
        return Error::os("timer_create on the thread CPU clock failed", errno);
    // Read just before arming: the kernel counts it_value from the clock at timer_settime.
    uint64_t cpu = 0;
    platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &cpu);
    const uint64_t origin = ctx->timer_origin_cpu_ns_ <= cpu ? ctx->timer_origin_cpu_ns_ : cpu;
    const uint64_t anchor = origin + draw_phase(interval_ns);
    // The schedule's first expiry still ahead of the clock.
    const uint64_t next = anchor > cpu ? anchor : anchor + ((cpu - anchor) / interval_ns + 1) * interval_ns;
    struct itimerspec its;
    its.it_interval = to_timespec(interval_ns);
    its.it_value = to_timespec(next - cpu);
    if (timer_settime(id, 0, &its, nullptr) != 0) {
        const int e = errno;
        timer_delete(id);
        return Error::os("timer_settime failed", e);
    }
    *out = id;
    *anchor_cpu_ns = anchor;
    *owed_at_arm = anchor > cpu ? 0 : (cpu - anchor) / interval_ns + 1;
    return Error::none();
}

Error start_itimer_fallback(uint64_t interval_ns) {
    if (const char* why = itimer_taken()) return Error::runtime(why);
    Error e = install_handler(g_prof, SIGPROF);
    if (!e.ok()) return e;
    e = start_itimer(interval_ns);
    if (!e.ok()) restore_handler(g_prof);
    return e;
}

}  // namespace

Error platform_init() { return Error::none(); }

void platform_cleanup() {}

PlatformTraits platform_traits() {
    PlatformTraits t;
    t.session_wall_census = true;  // CPU timers see threads that run only
    t.gc_frames = true;            // the handler runs on the sampled thread: PyGILState_Check
    return t;
}

Error platform_timer_create(uint64_t interval_ns, TimerKind kind) {
    if (route() != Route::kNone) return Error::runtime("sampling timer already running");
    g_path.interval_ns.store(interval_ns, std::memory_order_relaxed);
    g_kind = kind;
    g_phase_state.store(platform_monotonic_ns() * 0x2545F4914F6CDD1Dull ^ static_cast<uint64_t>(getpid()),
                        std::memory_order_relaxed);
    if (kind == TimerKind::kProcess) {
        set_route(Route::kItimer);
        Error e = start_itimer_fallback(interval_ns);
        if (!e.ok()) {
            set_route(Route::kNone);
            return e;
        }
        log_debug("timer: setitimer(ITIMER_PROF) every %llu ns, signal SIGPROF",
                  static_cast<unsigned long long>(interval_ns));
        return e;
    }
    const int signo = choose_rt_signal();
    if (signo == 0) return Error::runtime("every real-time signal has a handler: none is free for the per-thread timers");
    Error e = install_handler(g_rt, signo);
    if (!e.ok()) return e;
    if (kind == TimerKind::kWall) {
        set_route(Route::kWall);
        log_debug("timer: per-thread CPU timers every %llu ns plus the wall census, signal SIGRTMIN+%d",
                  static_cast<unsigned long long>(interval_ns), signo - SIGRTMIN);
        return Error::none();
    }
    set_route(Route::kPerThread);
    log_debug("timer: per-thread CPU timers every %llu ns, signal SIGRTMIN+%d",
              static_cast<unsigned long long>(interval_ns), signo - SIGRTMIN);
    return Error::none();
}

namespace {
// The itimer fallback weights each sample by the thread's CPU since the one before
// (capture_by_tid): the first counts from now. What the session owns of the thread before now
// (a thread born in the session: its start-up, origin 0) is owed like a timer's expiries before
// its arming: written by the hook on threading's bootstrap frames, not on the target.
void itimer_mark_origin(ThreadCtx* ctx) {
    uint64_t cpu = 0;
    const uint64_t origin = ctx->timer_origin_cpu_ns_;
    if (!platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &cpu) || cpu < origin) cpu = origin;
    ctx->timer_owed_at_arm_ns_ = cpu - origin;
    ctx->last_cpu_ns_.store(cpu, std::memory_order_relaxed);
}
}  // namespace

Error platform_thread_attach(ThreadCtx* ctx) {
    const Route mode = route();
    // The process timer covers every thread.
    if (mode == Route::kItimer) {
        itimer_mark_origin(ctx);
        return Error::none();
    }
    if (mode != Route::kPerThread && mode != Route::kWall) return Error::runtime("sampling is not running");
    if (ctx->platform_ != nullptr) return Error::none();
    timer_t id;
    uint64_t anchor = 0, owed_at_arm = 0;
    const uint64_t interval = g_path.interval_ns.load(std::memory_order_relaxed);
    Error e = arm_thread_timer(ctx, interval, &id, &anchor, &owed_at_arm);
    if (e.ok()) {
        ctx->platform_ = PlatformThreadPtr(new PlatformThread(id), &platform_thread_free);
        TimerSchedule& sched = ctx->platform_->schedule;
        sched.anchor_cpu_ns = anchor;
        sched.anchor_weight_ns = ctx->timer_cpu_ns_.load(std::memory_order_relaxed);
        sched.interval_ns = interval;
        sched.settled = owed_at_arm;
        ctx->timer_owed_at_arm_ns_ = owed_at_arm * interval;
        ctx->cpu_timer_armed_.store(true, std::memory_order_release);
        bump(g_stats.timers_active);
        log_debug("thread %llu: per-thread timer armed", static_cast<unsigned long long>(ctx->native_tid_));
        return e;
    }
    if (!platform_thread_exists(ctx->native_tid_)) {  // a signal 0, no /proc file opened
        // Gone between the scan's listing and timer_create (EINVAL for a dead thread's clock):
        // not a refusal, nothing to fall back from; the caller counts it.
        log_debug("thread %llu ended before its timer was armed", static_cast<unsigned long long>(ctx->native_tid_));
        return Error::os("the thread ended before its timer was armed", ESRCH);
    }
    bump(g_stats.timer_failures);
    if (mode == Route::kWall) {
        // The census signals this thread whenever it ran instead (coarser, still wall time).
        log_warning("thread %llu: no CPU timer (%s: %s); the wall census samples it alone",
                    static_cast<unsigned long long>(ctx->native_tid_), e.what, std::strerror(e.err));
        return e;
    }
    if (g_kind == TimerKind::kAuto && g_stats.timers_active.load() == 0) {
        // Per-thread timers are refused here (seccomp, RLIMIT_SIGPENDING): fall back to the
        // process timer for the whole session rather than mixing the two.
        log_warning("per-thread CPU timers unavailable (%s: %s); falling back to setitimer(ITIMER_PROF)",
                    e.what, std::strerror(e.err));
        Error it = start_itimer_fallback(g_path.interval_ns.load(std::memory_order_relaxed));
        if (it.ok()) {
            itimer_mark_origin(ctx);
            set_route(Route::kItimer);
        } else {
            log_warning("no itimer fallback either: %s", it.what);
        }
        return it;
    }
    log_warning("thread %llu will not be sampled: %s (%s)", static_cast<unsigned long long>(ctx->native_tid_),
                e.what, std::strerror(e.err));
    return e;
}

void platform_thread_detach(ThreadCtx* ctx) {
    if (ctx->platform_ == nullptr) return;
    ctx->cpu_timer_armed_.store(false, std::memory_order_release);
    ctx->platform_.reset();  // deletes the timer
    g_stats.timers_active.fetch_sub(1, std::memory_order_relaxed);
}

namespace {
// The itimer fallback's residual: the thread's CPU after its last sample (each sample took the
// CPU before it, capture_by_tid), all of it for a thread the process timer's signal never
// reached. The exchange leaves nothing for a second call or a sample racing this one.
TimerResidual itimer_residual(ThreadCtx* ctx) {
    TimerResidual r;
    // Given to the program (yield_itimer): the CPU since is the balance's "after the program
    // took SIGPROF", not this thread's.
    if (g_stats.itimer_yielded.load(std::memory_order_relaxed) != 0) return r;
    uint64_t cpu = 0;
    if (!platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &cpu)) return r;
    r.settled = true;
    const uint64_t last = ctx->last_cpu_ns_.exchange(cpu, std::memory_order_relaxed);
    if (cpu <= last) return r;
    const uint64_t interval = g_path.interval_ns.load(std::memory_order_relaxed);
    r.weight_ns = cpu - last;
    r.expiries = interval > 0 && r.weight_ns > interval ? (r.weight_ns + interval / 2) / interval : 1;
    return r;
}
}  // namespace

TimerResidual platform_thread_finish(ThreadCtx* ctx) {
    TimerResidual r;
    PlatformThread* p = ctx->platform_.get();
    if (p == nullptr) return route() == Route::kItimer ? itimer_residual(ctx) : r;
    // An expiry that is due but was never fired (no tick found the thread running since) is
    // reported as 1 ns left (kernel/time/posix-cpu-timers.c, __posix_cpu_timer_get).
    struct itimerspec left;
    const bool overdue = timer_gettime(p->id, &left) == 0 && left.it_value.tv_sec == 0 && left.it_value.tv_nsec == 1;
    const uint64_t weight_before = ctx->timer_cpu_ns_.load(std::memory_order_relaxed);
    uint64_t cpu = 0;
    const bool have_cpu = platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &cpu);
    const TimerSchedule schedule = p->schedule;
    r.expiries = schedule.carried_expiries;
    r.weight_ns = schedule.carried_ns;
    uint64_t owed = 0;
    if (have_cpu) {
        // Deleted before counting: nothing can fire after the count. A signal a tick queued in
        // between was delivered as one of these system calls returned, and is in timer_cpu_ns_.
        platform_thread_detach(ctx);
        const uint64_t weight_after = ctx->timer_cpu_ns_.load(std::memory_order_relaxed);
        owed = schedule.owed(cpu, weight_after);
        // The kernel said one is due and none fired since: at least that one (the anchor is
        // read around timer_settime, so it can be a few microseconds off).
        if (owed == 0 && overdue && weight_after == weight_before) owed = 1;
        r.settled = true;
    } else {
        platform_thread_detach(ctx);
    }
    r.expiries += owed;
    r.weight_ns += owed * schedule.interval_ns;
    return r;
}

bool platform_sampling_armed() {
    // The process timer and the wall census reach every thread; per-thread timers only the
    // threads they were armed for.
    const Route mode = route();
    return mode == Route::kItimer || mode == Route::kWall ||
           (mode == Route::kPerThread && g_stats.timers_active.load() > 0);
}

void platform_timer_destroy() {
    if (route() == Route::kItimer) stop_itimer();
    set_route(Route::kNone);
    restore_handlers();
}

void platform_set_native_unwinding(bool /*enabled*/) {}

void platform_get_stats(PlatformStats* out) {
    const Route mode = route();
    out->timer = mode == Route::kItimer      ? "itimer"
                 : mode == Route::kPerThread ? "per-thread"
                 : mode == Route::kWall      ? "wall"
                                             : "none";
    out->signals = g_path.signals.load();
    out->timers_active = g_stats.timers_active.load();
    out->timer_failures = g_stats.timer_failures.load();
    out->add("foreign_signals", g_stats.foreign.load());
    out->add("timer_overruns", g_path.overruns.load());
    out->add("sig_itimer_yielded", g_stats.itimer_yielded.load());
}

void platform_reset_stats() {
    g_path.signals.store(0);
    g_path.overruns.store(0);
    g_path.no_thread.store(0);
    g_stats.foreign.store(0);
    g_stats.timer_failures.store(0);
    g_stats.itimer_yielded.store(0);
    g_stats.itimer_yielded_at_cpu_ns.store(0);
}

uint64_t platform_sampling_given_up_cpu_ns() { return g_stats.itimer_yielded_at_cpu_ns.load(); }

void platform_after_fork_child() {
    // Timers and itimers are not inherited; the handler is. Put the parent's previous handler
    // back so the child runs as if it had never been profiled.
    set_route(Route::kNone);
    g_stats.timers_active.store(0);
    platform_fault_guard_remove();
    for (SignalSlot* slot : {&g_rt, &g_prof}) {
        if (!slot->installed) continue;
        sigaction(slot->signo.load(), &slot->prev[slot->prev_slot.load()], nullptr);  // nothing to tell in a child
        slot->installed = false;
    }
}

Error platform_set_interval(uint64_t interval_ns) {
    g_path.interval_ns.store(interval_ns, std::memory_order_relaxed);
    if (route() == Route::kItimer && g_prof.installed) return start_itimer(interval_ns);
    return Error::none();
}

void platform_thread_set_interval(ThreadCtx* ctx, uint64_t interval_ns) {
    if (ctx->platform_ == nullptr) return;
    // Keep the time left to the next expiry (capped by the new interval): re-arming from zero
    // would drop the CPU time the thread spent since its last sample.
    struct itimerspec old;
    uint64_t left = interval_ns;
    bool overdue = false;  // 1 ns left: due, not yet fired (platform_thread_finish)
    if (timer_gettime(ctx->platform_->id, &old) == 0) {
        const uint64_t rem = static_cast<uint64_t>(old.it_value.tv_sec) * 1000000000ull +
                             static_cast<uint64_t>(old.it_value.tv_nsec);
        if (rem > 0 && rem < left) left = rem;
        overdue = rem == 1;
    }
    struct itimerspec its;
    its.it_interval = to_timespec(interval_ns);
    its.it_value = to_timespec(left);
    uint64_t cpu = 0;
    const bool have_cpu = platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &cpu);
    const uint64_t weight = ctx->timer_cpu_ns_.load(std::memory_order_relaxed);
    // On failure the timer keeps its old interval: samples stay weighted by the new one, so
    // say so (drain thread, a control path).
    if (timer_settime(ctx->platform_->id, 0, &its, nullptr) == 0) {
        // The new schedule: the next expiry `left` from now, then every interval. What the
        // old one owed so far is carried to the thread's end.
        TimerSchedule& sched = ctx->platform_->schedule;
        uint64_t owed = have_cpu ? sched.owed(cpu, weight) : 0;
        if (overdue && owed > 0) --owed;  // that one is the new schedule's first, 1 ns away
        sched.carried_expiries += owed;
        sched.carried_ns += owed * sched.interval_ns;
        sched.anchor_cpu_ns = cpu + left;
        sched.anchor_weight_ns = weight;
        sched.interval_ns = have_cpu ? interval_ns : 0;  // unknown clock: owe nothing rather than guess
        sched.settled = 0;
    } else {
        log_warning("thread %llu: re-arming its CPU timer failed (%s); it keeps its old interval",
                    static_cast<unsigned long long>(ctx->native_tid_), std::strerror(errno));
    }
}

uint64_t platform_calibrate_signal_ns(uint32_t rounds) {
    const SignalSlot& slot = g_rt.installed ? g_rt : g_prof;
    if (rounds == 0 || !slot.installed) return 0;
    const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
    // A signal queued to ourselves is delivered before the system call returns, so each
    // round trip times one delivery of our handler.
    const uint64_t t0 = platform_monotonic_ns();
    for (uint32_t i = 0; i < rounds; ++i) queue_signal(tid, slot.signo.load(), kCalibrationValue);
    return (platform_monotonic_ns() - t0) / rounds;
}

uint64_t platform_process_cpu_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {
// True when our handler is installed on slot's signal but its current action is someone
// else's (in *current).
bool handler_replaced(const SignalSlot& slot, struct sigaction* current) {
    if (!slot.installed) return false;
    if (sigaction(slot.signo.load(), nullptr, current) != 0) return false;
    return !is_ours(*current);
}

bool keep_handler(SignalSlot& slot) {
    struct sigaction current;
    if (!handler_replaced(slot, &current)) return false;
    // The application installed its own handler on our signal while we sample: make it the
    // one we chain to (so it still gets its signals) and put ours back in front of it.
    const int idle = 1 - slot.prev_slot.load(std::memory_order_relaxed);
    slot.prev[idle] = current;
    slot.prev_slot.store(idle, std::memory_order_release);
    const struct sigaction sa = our_action();
    sigaction(slot.signo.load(), &sa, nullptr);
    return true;
}

// The interval of the ITIMER_PROF running now, in us; 0 when none runs.
uint64_t itimer_interval_now_us() {
    struct itimerval tv;
    if (getitimer(ITIMER_PROF, &tv) != 0) return 0;
    if (tv.it_value.tv_sec == 0 && tv.it_value.tv_usec == 0) return 0;
    return static_cast<uint64_t>(tv.it_interval.tv_sec) * 1000000ull + static_cast<uint64_t>(tv.it_interval.tv_usec);
}

// True when the program has taken the itimer fallback's SIGPROF (its own handler) or its
// ITIMER_PROF (a timer at another interval, or none: the program stopped ours) since start.
bool itimer_taken_by_program() {
    if (!g_prof.installed) return false;
    struct sigaction current;
    if (handler_replaced(g_prof, &current)) return true;
    const uint64_t ours = g_itimer_interval_us.load(std::memory_order_relaxed);
    return ours != 0 && itimer_interval_now_us() != ours;
}

// The program took SIGPROF or ITIMER_PROF after start (its own sampler): both are process-wide
// and there is one of each, so its timer and handler win. spprof stops its own ITIMER_PROF if
// it still runs (else it would feed the program's handler), hands SIGPROF back to the handler
// that was there before start if its own is still installed, and samples no more; the profile
// keeps the time before. Said once, counted (sig_itimer_yielded). Drain thread.
void yield_itimer() {
    const uint64_t ours = g_itimer_interval_us.exchange(0, std::memory_order_relaxed);
    if (ours != 0 && itimer_interval_now_us() == ours) {
        struct itimerval off;
        std::memset(&off, 0, sizeof off);
        setitimer(ITIMER_PROF, &off, nullptr);
    }
    struct sigaction current;
    if (sigaction(SIGPROF, nullptr, &current) == 0 && is_ours(current))
        sigaction(SIGPROF, &g_prof.prev[g_prof.prev_slot.load()], nullptr);
    g_prof.installed = false;
    g_stats.itimer_yielded_at_cpu_ns.store(platform_process_cpu_ns(), std::memory_order_relaxed);
    g_stats.itimer_yielded.store(1, std::memory_order_relaxed);
    log_warning("the program installed its own SIGPROF handler or ITIMER_PROF timer: they are its own, so "
                "spprof stops sampling (--timer itimer shares both with the program); the profile covers the "
                "time before. The per-thread timers (--timer thread) leave SIGPROF and ITIMER_PROF to the program");
}
}  // namespace

bool platform_handler_replaced() {
    struct sigaction current;
    return handler_replaced(g_rt, &current) || itimer_taken_by_program();
}

bool platform_keep_handler() {
    const bool rt = keep_handler(g_rt);
    if (itimer_taken_by_program()) yield_itimer();
    return rt;
}

int platform_sampling_signal() {
    if (g_rt.installed) return g_rt.signo.load();
    return g_prof.installed ? SIGPROF : 0;
}

bool platform_signal_thread(uint64_t tid, uint32_t serial) {
    // By tid rather than pthread_sigqueue by pthread_t: a pthread_t of a thread that exited is
    // undefined behaviour, a stale tid is ESRCH (or a thread the handler will not recognise,
    // since the serial's tstate will not match).
    return queue_signal(static_cast<pid_t>(tid), g_rt.signo.load(std::memory_order_relaxed), kTimerValueMagic | serial);
}

int platform_thread_runnable(uint64_t tid) {
    char buf[512];
    // Through the thread's held descriptor (proc_task_files.h): no open per tick.
    ssize_t n = proc_task_stat(tid, buf, sizeof buf);
    if (n == -2) {
        char path[64];
        std::snprintf(path, sizeof path, "/proc/self/task/%llu/stat", static_cast<unsigned long long>(tid));
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return -1;
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) buf[n] = '\0';
    }
    if (n <= 0) return -1;
    // "tid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
    const char* paren = std::strrchr(buf, ')');
    if (paren == nullptr || paren[1] != ' ' || paren[2] == '\0') return -1;
    return paren[2] == 'R' ? 1 : 0;
}

uint64_t platform_monotonic_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool platform_thread_cpu_ns_of(uint64_t native_tid, unsigned long /*ident*/, uint64_t* out) {
    struct timespec ts;
    if (clock_gettime(thread_cpu_clock(native_tid), &ts) != 0) return false;
    *out = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
    return true;
}

uint64_t platform_own_cpu_ns() {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t platform_current_tid() { return static_cast<uint64_t>(syscall(SYS_gettid)); }

uint64_t platform_tid_from_ident(unsigned long ident) {
    clockid_t clk;
    if (pthread_getcpuclockid(static_cast<pthread_t>(ident), &clk) != 0) return 0;
    // Inverse of thread_cpu_clock(): glibc builds the clock id from the thread's kernel tid.
    const unsigned int bits = static_cast<unsigned int>(clk) >> 3;
    return static_cast<uint64_t>(~bits & 0x1FFFFFFFu);
}

size_t platform_thread_name(uint64_t native_tid, char* buf, size_t len) {
    if (len == 0) return 0;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%llu/comm", static_cast<unsigned long long>(native_tid));
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    const ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0) return 0;
    size_t m = static_cast<size_t>(n);
    while (m > 0 && (buf[m - 1] == '\n' || buf[m - 1] == '\0')) --m;
    buf[m] = '\0';
    return m;
}

}  // namespace spprof

#endif  // __linux__
