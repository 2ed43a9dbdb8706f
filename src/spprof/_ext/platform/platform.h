// platform.h: the one OS-neutral surface over timers, signals, clocks and thread ids.
//
// linux.cpp implements it with POSIX per-thread CPU timers (timer_create on the thread's CPU
// clock, SIGEV_THREAD_ID) or the process-wide setitimer(ITIMER_PROF) fallback, both feeding
// one SIGPROF handler. darwin.cpp implements it over the Mach sampler (darwin_mach.h).
// Call sites carry no #ifdef; only files under platform/ include OS headers.
//
// Threads: every function here except the clocks is called from normal context with the GIL
// held (start/stop/attach/detach run from Python calls or the drain). The clocks are
// SIGNAL-SAFE.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../error.h"

namespace spprof {

struct ThreadCtx;

enum class TimerKind {
    kAuto,       // per-thread CPU timers, falling back to the process timer when refused
    kPerThread,  // per-thread CPU timers only
    kProcess,    // setitimer(ITIMER_PROF): process-wide, lands on whichever thread runs
    kWall,       // wall-clock mode: per-thread CPU timers for CPU time plus the session's census
                 // thread, which signals threads with platform_signal_thread (Linux); the
                 // platform samples every thread itself (macOS)
};

// What the platform's sampling model asks of the session, declared once (platform_traits()):
// the session branches on these, never on the platform or on a timer's name.
struct PlatformTraits {
    // Wall mode: the session runs its own census thread (wall_sampler.h) for the time threads
    // spend off CPU, because the platform samples only threads that run (Linux: CPU timers).
    // False where the platform's sampler sees blocked threads itself (macOS: Mach suspension,
    // which flags their records kSampleIdle in wall mode).
    bool session_wall_census = false;
    // Samples taken while the thread runs the cyclic GC get a <GC> frame. The capture needs
    // to know the sampled thread holds the GIL: the signal path asks PyGILState_Check on the
    // thread, the Mach sampler reads the GIL's holder (capture/pyframes/gil_state.h). True on
    // both; a platform whose capture could not tell the collector apart would say false.
    bool gc_frames = false;
};

// One counter only this platform has, exported by stats() under its name.
struct PlatformCounter {
    const char* name = nullptr;  // static string
    uint64_t value = 0;
};

struct PlatformStats {
    // Fields with one meaning on every platform.
    const char* timer = "none";   // "per-thread", "itimer", "wall" or "mach" (static string)
    uint64_t signals = 0;         // sampling signals that reached our handler; the overhead
                                  // budget prices each (platform_calibrate_signal_ns). macOS
                                  // samples without a signal: 0
    uint64_t timers_active = 0;   // threads armed for sampling right now (Linux: per-thread
                                  // timers; macOS: threads attached to the Mach sampler)
    uint64_t timer_failures = 0;  // threads that could not be armed
    // Counters of this platform's sampling model only (Linux: foreign signals, timer
    // overruns; macOS: the Mach sampler's ticks, suspensions and skips).
    static constexpr size_t kMaxExtra = 12;
    PlatformCounter extra[kMaxExtra];
    size_t extra_count = 0;
    void add(const char* name, uint64_t value) {
        if (extra_count < kMaxExtra) extra[extra_count++] = PlatformCounter{name, value};
    }
};

// The Linux handler hands each delivery to capture_by_serial / capture_by_tid (declared in
// signal_handler.h, SIGNAL-SAFE): a per-thread timer carries kTimerValueMagic | serial in its
// sigev_value, never a pointer, so a foreign SIGPROF is never dereferenced.
constexpr uint64_t kTimerValueMagic = 0x5350'5046'0000'0000ull;  // "SPPF" in the high half

// ---- lifecycle ----------------------------------------------------------------------------
Error platform_init();     // once per process, at module import
void platform_cleanup();   // at module teardown

// What this platform's sampling model asks of the session. Any thread; constant.
PlatformTraits platform_traits();

// Start sampling: install the handler, start the process timer if that is the kind in use.
// Per-thread timers are armed by platform_thread_attach. Every platform writes each sample
// into the sampled thread's own ThreadCtx ring (record_writer.h): Linux from the thread's
// handler, macOS from the Mach sampler's thread.
Error platform_timer_create(uint64_t interval_ns, TimerKind kind);
// Stop sampling: disarm everything, discard signals still pending, restore the previous
// handler. Threads must be detached first. Nothing here is the caller's to act on: what
// could not be undone is logged. Idempotent.
void platform_timer_destroy();

// Arm sampling for one thread. On failure with kAuto the platform may switch the whole
// session to the process timer (then the call succeeds). GIL held.
Error platform_thread_attach(ThreadCtx* ctx);
// Disarm one thread's timer. Idempotent. GIL held. A sample already under way may still use
// ctx until it leaves the capture gate (signal_handler.h): the session frees ctx only once
// the gate was seen empty after it unpublished ctx from its ThreadTable (thread_table.h).
void platform_thread_detach(ThreadCtx* ctx);
// What a thread's own CPU timer still owed it when it ended (platform_thread_finish).
struct TimerResidual {
    uint64_t expiries = 0;   // expiries due by the thread's final CPU time, never delivered
    uint64_t weight_ns = 0;  // the CPU time they stand for (intervals may have changed)
    // The thread's CPU up to its end is settled: delivered plus owed expiries stand for it (in
    // expectation), so a thread that drew none still has its CPU in the profile's total.
    bool settled = false;
};
// GIL held, on ctx's own thread as it ends (the threading exit watch: its CPU clock can still
// be read, its timer is still armed), or from stop() for threads still alive. Deletes the thread's CPU timer, then counts the
// expiries that fell due and were never delivered: in the thread's last stretch of CPU that no
// scheduler tick examined (the kernel notices CPU-timer expiries only at a tick that finds the
// thread running, and an exiting thread's timers are deleted, never fired), and between
// ctx->timer_origin_cpu_ns_ and the arming. Linux: each timer's first expiry is drawn
// uniformly in (0, interval], so delivered + owed expiries are CPU / interval in expectation
// (docs/architecture.md, "Short threads"). The itimer fallback: the thread's CPU since its last
// sample, as one expiry per interval (at least one). {} where the thread has no timer (a refused
// timer, macOS's Mach sampler) or the call was made before.
TimerResidual platform_thread_finish(ThreadCtx* ctx);
// After the session's threads were attached: true when sampling reaches at least one thread
// (false: per-thread timers only, and every one was refused). GIL held.
bool platform_sampling_armed();

// Native (C) frames in samples. Linux: recorded by the unwinder once it exists (not yet: the
// Python API refuses native=True); macOS: the Mach sampler's frame-pointer walk.
void platform_set_native_unwinding(bool enabled);

void platform_get_stats(PlatformStats* out);
void platform_reset_stats();  // at session start

// After fork(), in the child: forget timers (they are not inherited) and restore the
// previous handler, without touching anything the parent owns.
void platform_after_fork_child();

// Overhead budget: change the sampling interval of a running session. platform_set_interval
// sets the interval samples are weighted by (and the process timer's); per-thread timers are
// re-armed one by one with platform_thread_set_interval. GIL held. kNotImplemented where the
// platform cannot (macOS).
Error platform_set_interval(uint64_t interval_ns);
void platform_thread_set_interval(ThreadCtx* ctx, uint64_t interval_ns);
// Average cost of one signal delivery to the calling thread (kernel entry, handler dispatch,
// sigreturn), measured by signalling ourselves `rounds` times; 0 where not applicable.
// Normal context, after platform_timer_create.
uint64_t platform_calibrate_signal_ns(uint32_t rounds);
// CPU time of the whole process (all threads). SIGNAL-SAFE.
uint64_t platform_process_cpu_ns();

// Called by the drain: if the application replaced our SIGPROF handler while sampling, chain
// to theirs from now on and reinstall ours; true when that happened. GIL held.
bool platform_keep_handler();
// The same question without acting on it: one sigaction read. Drain thread, no GIL needed.
bool platform_handler_replaced();

// The signal samples arrive on this session (Linux: a real-time signal chosen at start for
// the per-thread timers, SIGPROF for the itimer fallback); 0 where none (macOS) or stopped.
int platform_sampling_signal();

// The process's CPU clock when sampling was given up to the program (Linux: it took the itimer
// fallback's SIGPROF or ITIMER_PROF), 0 when it was not; kept until the next session starts.
uint64_t platform_sampling_given_up_cpu_ns();

// Wall mode: deliver a sample request to thread `tid` of this process, carrying
// kTimerValueMagic | serial. False when the thread is gone. Sampler thread.
bool platform_signal_thread(uint64_t tid, uint32_t serial);

// Wall mode: 1 when thread `tid` is running or waiting for a CPU, 0 when it is blocked (or
// stopped), -1 when that cannot be told. Sampler thread (Linux: one /proc read).
int platform_thread_runnable(uint64_t tid);

// ---- spprof's threads and signals (platform/thread_signals_posix.cpp) ---------------------------
// Normal context: pthread_create, the new thread starting with every signal blocked but those
// a faulting instruction raises, so that signals sent to the process reach the program's
// threads only. Returns pthread_create's result.
int platform_thread_create(pthread_t* thread, void* (*fn)(void*), void* arg);
// Any thread: the same block, on the calling thread.
void platform_block_signals_in_this_thread();
// Normal context: the signals that block holds (for spprof's Python threads, _own_threads.py).
std::vector<int> platform_blocked_signals();

// ---- the control socket (platform/fd_poll_posix.cpp) ------------------------------------------
// True when `fd` has something to read (a connection waiting on a listening socket), has
// failed or is not open (the program closed our number: its owner must find out). Never
// blocks. Any thread, no GIL.
bool platform_fd_readable(int fd);

// ---- the fault guard -------------------------------------------------------------------------
// A capture follows pointers of a frame chain that the interrupted code may have left torn
// (CPython 3.12 entering a generator, greenlet switching stacks, C code we have not met), so
// one of its loads may fault. Linux: while a session runs, spprof's SIGSEGV/SIGBUS handler
// stands in front of the program's. For each fault raised by the kernel it first calls
// `claim`, which jumps back into the capture that faulted and does not return; every other
// fault goes to the handler that was there before, as if spprof were not installed (the guard
// steps aside and the faulting instruction runs again). macOS has nothing to guard: the Mach
// sampler reads through calls that return an error instead of faulting.
using FaultClaimFn = void (*)();
// Session start, GIL held. Remembers the handlers it stands in front of.
Error platform_fault_guard_install(FaultClaimFn claim);
// Drain thread, no GIL needed, at every wake-up: when the program installed a SIGSEGV or
// SIGBUS handler of its own since (faulthandler.enable(), a crash reporter), put the guard
// back in front of whatever is there now; after the guard stepped aside for a fault that was
// not ours, only once 5 s have passed (that fault is usually the program crashing, and its
// handlers must finish undisturbed). True when it did.
bool platform_fault_guard_keep();
// Session stop: restore the handlers that were there before, where ours is still in front.
void platform_fault_guard_remove();
// SIGNAL-SAFE: false while the guard knows it is not in front (it stepped aside, or is not
// installed); captures then skip the walk. A handler the program installs after the guard
// goes unnoticed until the next platform_fault_guard_keep(), one drain wake-up later.
bool platform_fault_guard_ready();
// Times platform_fault_guard_keep() put the guard back in front. Any thread.
uint64_t platform_fault_guard_retaken();

// ---- the /proc descriptors (Linux; proc_task_files.h) ----------------------------------------
// What the session reads from /proc while the program runs goes through descriptors it keeps
// above the program's numbers (held_fd.h): /proc/self/task, opened here, and each thread's stat
// file, opened once when first read. Session start, GIL held; nothing to do on macOS.
Error platform_proc_files_open();
// Session stop, spprof's threads joined: closes all of them (those still ours).
void platform_proc_files_close();
// Per-thread reads done the old way (open, read, close) because the per-thread budget was
// spent, and per-thread descriptors opened, since the module was loaded. Any thread.
uint64_t platform_proc_files_over_budget();
uint64_t platform_proc_thread_fds_opened();

// ---- a descriptor table of spprof's own (Linux; fd_table_linux.cpp) -------------------------
// On one of spprof's threads, first thing, normal context: the thread leaves the program's
// descriptor table for one of its own holding none of the program's descriptors (Linux:
// unshare(CLONE_FILES), then every copy closed, so the program's last close of a pipe or a
// socket stays the last). What the thread opens from then on takes no number of the program's,
// and the program's closes, dup2s and closeranges never reach it; its /proc reads
// (platform_thread_runnable) go through descriptors opened in its own table. Only for threads
// that never use a descriptor of the program's (no stderr, no control socket). True when it
// did; false when the OS refused (counted; the thread shares the program's table as before),
// and on macOS, where spprof's threads open no file while the program runs.
bool platform_own_fd_table_enter();
// The same thread, before it ends (after platform_own_fd_table_enter, whatever it returned).
void platform_own_fd_table_leave();
// Threads that got a table of their own, and that were refused one, since the module loaded.
void platform_own_fd_table_counts(uint64_t* made, uint64_t* refused);

// ---- exit signals (the CLI, start(output_path=...)) ------------------------------------------
// Under the CLI, SIGTERM, SIGHUP and SIGQUIT end the program as they would without spprof,
// after the profile is written. The handler (SIGNAL-SAFE, exit_signals_posix.cpp) only counts
// the signal in an atomic slot and posts a semaphore (no file descriptor); the watcher thread
// (exit_signals.h) waits on it, writes the profile and calls platform_die_by_signal.
//
// Install the handler for each of those signals whose action is SIG_DFL now: an action the
// program or a library set first keeps priority, and one it sets later replaces ours. With
// SA_RESTART, so the program's restartable system calls go on. GIL held. Fails when the
// semaphore cannot be made; installing twice is an error.
Error platform_exit_signals_install();
// Watcher thread: blocks until a signal arrives and returns its number; 0 after
// platform_exit_signals_wake(); -1 when the handler is not installed.
int platform_exit_signals_wait();
// Any thread: make platform_exit_signals_wait() return 0.
void platform_exit_signals_wake();
// GIL held, watcher joined: put SIG_DFL back where our handler still is, disarm it.
// Returns a signal that arrived after the watcher stopped reading (the caller should end the
// process by it), else 0. Idempotent. In a forked child the same happens by itself
// (pthread_atfork), and the handler of a child that still runs it acts as SIG_DFL.
int platform_exit_signals_remove();
// GIL held, right after the program's signal.signal() call changed `signo`'s action: if
// the handler is installed, `signo` is one of those signals and its action is now SIG_DFL
// (a handler round trip that restored the default, as uvicorn's shutdown does), put our
// handler back: it ends the process by the signal as SIG_DFL would, after the profile.
// Returns true when it did. Python's own table (signal.getsignal) is not touched.
bool platform_exit_signals_reclaim(int signo);
// True in a forked child of the process that installed the handler: its watcher thread was
// not copied, so there is nothing to wake or join. Any thread.
bool platform_exit_signals_inherited();
// "SIGTERM", "SIGHUP", "SIGQUIT", else "signal" (a static string). Any thread.
const char* platform_signal_name(int signo);
// Any thread: restore `signo`'s default action and raise it, so that the process ends the
// way it would without spprof (killed by the signal; a core dump for SIGQUIT where enabled).
[[noreturn]] void platform_die_by_signal(int signo);

// ---- clocks and the current thread's id (SIGNAL-SAFE) ------------------------------------------
uint64_t platform_monotonic_ns();
// CPU time of another thread by native id; returns false when it is gone.
bool platform_thread_cpu_ns_of(uint64_t native_tid, unsigned long ident, uint64_t* out);
// CPU time of the calling thread (0 when unreadable).
uint64_t platform_own_cpu_ns();
uint64_t platform_current_tid();

// ---- ids, memory, stacks, names (normal context, NOT signal-safe) ----------------------------
// Kernel tid of the thread whose threading ident (pthread_t) is `ident`; 0 when unknown.
// Normal context: the thread must be alive.
uint64_t platform_tid_from_ident(unsigned long ident);
// Reads memory that may have been freed or unmapped: false instead of a fault ("no fault",
// not "signal-safe": a system call per read on Linux). For validating pointers at resolution
// time and for the wall census's walks from outside.
bool platform_read_no_fault(uintptr_t addr, void* out, size_t n);
// Stack range [lo, hi) of the live thread whose threading ident (pthread_t) is `ident`.
// Normal context (may read /proc and allocate for the main thread).
bool platform_thread_stack_bounds(unsigned long ident, uintptr_t* lo, uintptr_t* hi);
// [lo, hi) of the function containing `addr`, from the loaded image itself (Linux: the ELF
// dynamic symbol's size; macOS: the next entry of LC_FUNCTION_STARTS). Normal context.
bool platform_function_extent(const void* addr, uint64_t* lo, uint64_t* hi);
// Thread name as the OS knows it (Linux: /proc comm). Normal context. Returns bytes written.
size_t platform_thread_name(uint64_t native_tid, char* buf, size_t len);

// ---- the process's OS threads (normal context, NOT signal-safe: files, allocation) -------------
// Threads with no Python state (OpenMP, OpenBLAS, rayon, a C library's own) are sampled too
// where the platform can sample any thread (Linux: a CPU timer aimed at it; macOS: the Mach
// sampler suspends it). The session finds them here.
struct OsThread {
    uint64_t tid = 0;
};
// Every OS thread of this process now. False where the platform cannot list them. Linux:
// /proc/self/task; macOS: task_threads (the Mach sampler samples them by thread id).
bool platform_os_threads(std::vector<OsThread>* out);
// What lists them, for stats()["os_threads_scan"]: "proc" (Linux), "task_threads" (macOS).
const char* platform_os_threads_source();
// When thread `tid` started, in an opaque unit that only grows (Linux: /proc stat field 22,
// clock ticks since boot): a tid the kernel reused for a new thread gets a new value. 0 when
// the thread is gone or it cannot be told. macOS: ids are never reused, so 1 while it lives.
uint64_t platform_thread_start_ticks(uint64_t tid);
// Whether a thread with id `tid` lives in this process. Linux: tgkill(pid, tid, 0), no file
// opened; macOS: as platform_thread_start_ticks.
bool platform_thread_exists(uint64_t tid);
// 1 when thread `tid` blocks signal `signo` (its signal mask), 0 when not, -1 when unknown.
int platform_thread_blocks_signal(uint64_t tid, int signo);
// Stack range [lo, hi) of live thread `tid`, known by its tid only (no pthread_t): the
// mapping that holds its stack pointer while it waits in the kernel. False while it runs (its
// stack pointer is not known then) and where not supported.
bool platform_thread_stack_bounds_by_tid(uint64_t tid, uintptr_t* lo, uintptr_t* hi);

}  // namespace spprof
