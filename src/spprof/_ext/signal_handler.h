// signal_handler.h: the Linux signal path: the sampling signal's handler and the capture it runs.
//
// on_sample_signal is the handler: platform/linux.cpp installs it with sigaction (and owns
// the timers, the choice of signal and the handler it chains to) and keeps g_signal_path
// telling it what a delivery of ours looks like. The handler decodes each delivery and calls
// capture_by_serial / capture_by_tid / capture_wall_by_serial. Those find the ThreadCtx, check that the interrupted
// thread really is that ctx's Python thread, walk its Python frames into the ctx's ring, and
// count what went wrong. The walk trusts nothing it reads (framewalker.h) and runs under the
// fault guard (platform/fault_guard_linux.cpp): a load that faults ends the walk, the frames
// read before it are kept, and the fault is counted instead of killing the program. Everything named capture_* here is SIGNAL-SAFE and NO-HEAP: no
// allocation, no locks, no Python API beyond PyGILState_GetThisThreadState (a TSS read, no
// lock, as faulthandler uses it), no logging, bounded loops, errno untouched.
//
// capture_enable / capture_disable_and_wait bracket a session (normal context, GIL held).
#pragma once

#include <signal.h>  // siginfo_t: POSIX, so this compiles on every platform; installed on Linux only

#include <atomic>
#include <cstdint>

#include "platform/platform.h"

namespace spprof {

// ---- the handler -------------------------------------------------------------------------

// Which deliveries are samples, set by platform/linux.cpp as it starts and switches timers.
enum class SignalRoute : int {
    kNone = 0,
    kPerThread = 1,  // per-thread CPU timers on the real-time signal
    kItimer = 2,     // setitimer(ITIMER_PROF) on SIGPROF
    kWall = 3,       // per-thread CPU timers plus the wall census's requests (SI_QUEUE)
};

// One delivery as the platform reads it from its siginfo (fields only Linux has: si_overrun,
// SI_KERNEL). SIGNAL-SAFE.
struct SignalDelivery {
    enum Kind { kOther, kTimer, kQueuedBySelf, kProcessTimer } kind = kOther;
    uint64_t value = 0;    // kTimer, kQueuedBySelf: the sigev / sigqueue value
    uint64_t overrun = 0;  // kTimer: expirations folded into this delivery
};

// What the handler reads on each delivery. platform/linux.cpp fills `read` and `chain` before
// it installs the handler (sigaction orders those writes before any delivery) and keeps the
// rest current; the counters are the handler's.
struct SignalPath {
    SignalDelivery (*read)(int signo, const siginfo_t* si) = nullptr;
    // Hands a delivery that is not ours to the handler installed before ours.
    void (*chain)(int signo, siginfo_t* si, void* uc) = nullptr;
    std::atomic<int> route{static_cast<int>(SignalRoute::kNone)};
    std::atomic<int> rt_signo{0};            // the per-thread timers' signal; 0 when none
    std::atomic<uint64_t> interval_ns{0};    // what one timer expiration stands for
    std::atomic<uint64_t> signals{0};        // deliveries taken as samples (or sample requests)
    std::atomic<uint64_t> overruns{0};       // timer expirations folded into a delivery
    std::atomic<uint64_t> no_thread{0};      // samples for a thread we do not sample
};
extern SignalPath g_signal_path;

// sigev value of the calibration signals (platform_calibrate_signal_ns): returned from at once.
constexpr uint64_t kCalibrationValue = kTimerValueMagic | 0xFFFFFFFFull;

// SIGNAL-SAFE, NO-HEAP: the sampling signal's handler (SA_SIGINFO). errno is preserved.
void on_sample_signal(int signo, siginfo_t* si, void* uc);

// ---- the capture ---------------------------------------------------------------------------

class ThreadTable;
class UnwindTables;

struct CaptureStats {
    uint64_t idle = 0;          // wall mode: idle records written by the sampler thread
    uint64_t captured = 0;      // records written
    uint64_t dropped_full = 0;  // ring full: the drain fell behind
    uint64_t dropped_busy = 0;  // a capture was already running on that thread
    uint64_t no_thread = 0;     // the signal hit a thread we do not sample (or one ending)
    uint64_t walk_errors = 0;   // the walk met an implausible value (a torn chain); frames before it kept
    uint64_t deferred = 0;      // no Python frame readable: the thread's next sample carries the time
    uint64_t walk_faults = 0;   // a load of the Python walk faulted and was recovered; frames before it kept
    uint64_t native_faults = 0; // a load of the native unwind faulted; the Python frames were kept
    uint64_t unguarded = 0;     // captures skipped: the fault guard was not in front
    uint64_t truncated = 0;     // deeper than kMaxPythonFrames
    uint64_t subinterpreter = 0; // captures of a thread running a subinterpreter (leaf frame <subinterpreter N>)
    uint64_t gc = 0;             // captures of a thread running the cyclic GC (frame <GC>)
    uint64_t native_thread = 0;  // captures of a thread found without a Python state, with no Python frame
    uint64_t capture_ns = 0;           // time spent inside captures (handler cost, not delivery)
    uint64_t native_unwinds = 0;       // captures that unwound native frames
    uint64_t native_fp_steps = 0;      // native frames found by the frame-pointer fallback
    uint64_t native_cached_steps = 0;  // CFI steps taken by a row an earlier walk kept (step cache)
    uint64_t native_leaf_steps = 0;    // interrupted functions without CFI left by the leaf heuristic
    uint64_t native_stops[10] = {};    // why native walks ended, by UnwindStop
};

// Normal context. Points the capture path at `table`; samples are recorded from now on.
// `unwind` (may be null): native frames are unwound from the signal's register context too.
void capture_enable(ThreadTable* table, const UnwindTables* unwind);
// Normal context. Stops recording and waits until no capture is still running, so the table
// may be freed afterwards (capture_gate.h: the handshake). Bounded: gives up after ~1 s (and
// says so through the return).
bool capture_disable_and_wait();

// The claim the fault guard calls for each fault (platform_fault_guard_install): recovers the
// faults of a capture's own reads on the faulting thread, returns for every other fault.
FaultClaimFn capture_fault_claim();

// SIGNAL-SAFE. `weight_ns` is the sampled time this delivery stands for; `ucontext` is the
// handler's third argument (the interrupted registers), or null.
bool capture_by_serial(uint32_t serial, uint64_t weight_ns, const void* ucontext);
bool capture_by_tid(uint64_t native_tid, uint64_t weight_ns, const void* ucontext);
// SIGNAL-SAFE. Wall mode: the weight is what the sampler thread left in the ctx.
bool capture_wall_by_serial(uint32_t serial, const void* ucontext);

// Normal context. True when no capture (and no wall census tick) is inside the capture gate
// right now: any of them that loaded a ctx the ThreadTable unpublished before this call has
// finished with it (capture_gate.h).
bool capture_quiescent();
// Samplers on threads of their own (the wall census, the Mach sampler) hold the gate like a
// capture while they use ctxs (SIGNAL-SAFE). enter() returns the session's table, null when
// captures are disabled; every enter() is paired with one leave().
const ThreadTable* capture_gate_enter();
void capture_gate_leave();

// Drain thread. True once since the last call if a capture asked for a drain (its ring would
// fill within 200 ms at its rate, or is half full: record_ring_wants_drain): the drain, which
// otherwise takes the GIL only every few periods, should run now.
bool capture_take_drain_request();

CaptureStats capture_stats();
// Sampler thread (wall mode) and registration: the idle-record counter lives with the others.
void capture_count_idle();
// The Mach sampler: one record written into a thread's ring (or refused: ring full or busy).
void capture_count_sampled(bool written);
// The Mach sampler: one record marked <GC> (stats()["samples_in_gc"]).
void capture_count_gc();
void capture_reset_stats();

}  // namespace spprof
