// signal_handler.cpp: the Linux signal path (see signal_handler.h): the sampling signal's
// handler and the capture it runs. Every function in this file except capture_enable,
// capture_disable_and_wait, capture_stats and capture_reset_stats is SIGNAL-SAFE and NO-HEAP.
// Python.h before any system header, as Python requires: 3.15's pyconfig.h defines
// _XOPEN_SOURCE 800, which clashes with the 700 a system header has already set.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "signal_handler.h"

#include <errno.h>
#include <setjmp.h>

#include <atomic>
#include <cstring>

#include "capture/capture_gate.h"
#include "capture/pyframes/gc_state.h"
#include "framewalker.h"
#include "platform/platform.h"
#include "capture/record_writer.h"
#include "capture/sample_record.h"
#include "capture/thread_table.h"
#include "unwind/ucontext_regs.h"
#include "unwind/unwind_tables.h"
#include "unwind/unwinder.h"

namespace spprof {
namespace {

// The session's thread table, for captures (CaptureGate: stop waits for them to leave).
CaptureGate<ThreadTable> g_gate;
std::atomic<const UnwindTables*> g_unwind{nullptr};  // null: Python frames only; read inside the gate
// The main interpreter's "collecting" int (capture/pyframes/gc_state.h); null between sessions.
std::atomic<const int*> g_gc_collecting{nullptr};

struct Counters {
    std::atomic<uint64_t> captured{0}, dropped_full{0}, dropped_busy{0}, no_thread{0},
        walk_errors{0}, deferred{0}, walk_faults{0}, native_faults{0}, unguarded{0}, truncated{0}, idle{0},
        native_unwinds{0}, native_fp_steps{0}, native_leaf_steps{0}, native_cached_steps{0}, capture_ns{0}, subinterpreter{0}, gc{0}, native_thread{0};
    std::atomic<uint64_t> native_stops[10];
};
Counters g_counters;

static_assert(static_cast<int>(UnwindStop::kUnsupported) == 9, "native_stops has one slot per reason");

inline void bump(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }

// A thread found without a Python state whose stack bounds are not known yet (it was running
// whenever the scan looked): the unwinder reads this far above the interrupted stack pointer.
// A read past the real top faults into the guard, which keeps the sample without its native
// frames (native_faults).
constexpr uintptr_t kProvisionalStackBytes = 256u << 10;
constexpr uint32_t kMaxDeferralsInRow = 4;

// SIGNAL-SAFE, NO-HEAP. Whether the calling thread is ctx's thread: its thread state for a
// Python thread, or its kernel tid when it has no state (found without one, or a C thread
// between PyGILState_Release and its next Ensure): a stale signal of a deleted timer may
// reach a thread whose old slot now holds another thread.
inline bool on_ctx_thread(const ThreadCtx* ctx) {
    if (ctx->native_only()) return platform_current_tid() == ctx->native_tid_;
    const auto* self = reinterpret_cast<struct _ts*>(PyGILState_GetThisThreadState());
    return self == ctx->tstate_ || (self == nullptr && platform_current_tid() == ctx->native_tid_);
}

// SIGNAL-SAFE. This ctx's Python thread, running a subinterpreter: its TSS entry holds that
// interpreter's state (3.12+; capture_into walks the thread's own chain under a marker frame).
inline bool in_subinterpreter(const ThreadCtx* ctx) {
    if (ctx->native_only()) return false;
    const PyThreadState* self = PyGILState_GetThisThreadState();
    return self != nullptr && reinterpret_cast<const struct _ts*>(self) != ctx->tstate_ &&
           self->interp != PyInterpreterState_Main();
}

// What the guarded part of a capture leaves behind, in memory the fault jump does not lose.
struct CaptureWork {
    const RawFrame* volatile py_end = nullptr;  // end of the Python frames written so far
    WalkResult walk;                            // complete only when the walk returned
    uint32_t native_depth = 0;                  // written once, when the unwind returned
    UnwindStatus native;
    bool python_done = false;
    bool native_ran = false;
    int64_t subinterpreter = -1;  // 3.9-3.11: id of the subinterpreter this thread runs, else -1
};

// SIGNAL-SAFE, NO-HEAP. The reads of a capture: the Python walk, then the native unwind.
// Runs armed (guarded_walk). Kept out of guarded_walk: a function that calls sigsetjmp keeps
// its variables in memory, which would cost the walk a reload per frame.
__attribute__((noinline)) SPPROF_NO_SANITIZE_ADDRESS void armed_walk(ThreadCtx* ctx, uintptr_t tstate,
                                                                     RawFrame* frames, const void* ucontext,
                                                                     const UnwindTables* unwind,
                                                                     CaptureWork* work) {
    work->py_end = frames;
#if PY_VERSION_HEX < 0x030C0000
    // Before 3.12 the thread's TSS entry stays its main-interpreter state while it runs a
    // subinterpreter; the current (GIL-holding) state says so. That state may be another
    // thread's, ending right now: read under the guard, and only if it was made by this
    // thread. (run_string runs on the interpreter's first thread state, made by the thread
    // that created it: on other threads the time stays on the line that called run_string.)
    PyThreadState* current = _PyThreadState_UncheckedGet();
    if (current != nullptr && reinterpret_cast<struct _ts*>(current) != ctx->tstate_ &&
        plausible_address(reinterpret_cast<uintptr_t>(current), sizeof *current) &&
        current->thread_id == ctx->ident_ && current->interp != PyInterpreterState_Main())
        work->subinterpreter = PyInterpreterState_GetID(current->interp);
#endif
    // A thread found without a Python state has none right now (tstate 0): native frames only.
    if (tstate != 0)
        work->walk = walk_python_stack(DirectReader{}, tstate, frames, kMaxPythonFrames, &ctx->code_cache_,
                                       VolatileProgress{&work->py_end});
    work->python_done = true;
    if (unwind != nullptr && ucontext != nullptr) {
        RegisterContext regs;
        if (register_context_from_ucontext(ucontext, &regs)) {
            UnwindStatus st;
            uintptr_t lo = ctx->stack_lo_, hi = ctx->stack_hi_;
            if (hi == 0 && ctx->native_only()) {
                lo = static_cast<uintptr_t>(regs.sp);
                hi = lo + kProvisionalStackBytes;
            }
            work->native_depth = unwind_native(unwind->current(), regs, lo, hi,
                                               reinterpret_cast<uint64_t*>(frames + work->walk.depth),
                                               kMaxNativeFrames, &st);
            work->native = st;
            work->native_ran = true;
        }
    }
}

// SIGNAL-SAFE, NO-HEAP. Runs armed_walk armed: a load that faults (a torn chain pointing at
// unmapped memory) lands in the fault guard's handler, whose claim (claim_fault) jumps back to
// the sigsetjmp below, and the capture goes on with what `work` holds. False after such a
// jump. Not inlined: sigsetjmp needs a frame of its own that outlives the walk.
__attribute__((noinline)) bool guarded_walk(ThreadCtx* ctx, uintptr_t tstate, RawFrame* frames,
                                            const void* ucontext, const UnwindTables* unwind,
                                            CaptureWork* work) {
    // savemask 0: no sigprocmask call per capture. The jump leaves the mask as the fault
    // handler had it, which (SA_NODEFER, empty sa_mask) is this handler's own.
    if (sigsetjmp(ctx->fault_env_, 0) != 0) return false;
    ctx->fault_armed_.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    armed_walk(ctx, tstate, frames, ucontext, unwind, work);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    ctx->fault_armed_.store(false, std::memory_order_relaxed);
    return true;
}

// SIGNAL-SAFE, NO-HEAP. True when the calling thread is running the cyclic GC of the main
// interpreter. The flag is interpreter-wide; the collector holds the GIL, so "collecting and
// this thread holds the GIL" names it. A plain load is enough: a thread that holds the GIL
// saw every write the flag had before the GIL came to it, and its own writes in program order.
// Residual error (docs/architecture.md, "The <GC> frame"): a finalizer run by the collection
// that lets the GIL go (I/O, sleep, a switch interval) hands the flag to whichever thread
// takes the GIL until the finalizer gets it back; those samples are charged to <GC> too.
bool running_gc(bool has_gil) {
    if (!has_gil) return false;
    const int* flag = g_gc_collecting.load(std::memory_order_relaxed);
    return flag != nullptr && *flag != 0;
}

// SIGNAL-SAFE, NO-HEAP. Puts `marker` in front of the record's frames (leaf first), moving the
// native pcs that follow along; nothing when the record is full.
void prepend_frame(RawFrame* frames, WalkResult* w, uint32_t native_depth, const RawFrame& marker) {
    if (w->depth >= kMaxPythonFrames) return;
    std::memmove(frames + 1, frames, w->depth * sizeof(RawFrame) + native_depth * sizeof(uint64_t));
    frames[0] = marker;
    ++w->depth;
}

// SIGNAL-SAFE, NO-HEAP. Writes one record for the calling thread into ctx's ring.
bool capture_into(ThreadCtx* ctx, uint64_t weight_ns, const void* ucontext, const UnwindTables* unwind,
                  bool idle = false) {
    if (ctx == nullptr || ctx->magic_ != kThreadCtxMagic ||
        ctx->state_.load(std::memory_order_acquire) != ThreadState::kAttached) {
        bump(g_counters.no_thread);
        return false;
    }
    // The thread's own tstate from TSS: NULL once the thread deleted it (it is ending), and
    // never the GIL holder's, unlike PyThreadState_Get().
    PyThreadState* self = PyGILState_GetThisThreadState();
    // A thread of ours running a subinterpreter (run_string, interpreters.Interpreter.exec)
    // has that interpreter's thread state current. Its own (main-interpreter) chain is still
    // the caller's, stable while the subinterpreter runs: walk that, under a leaf frame
    // naming the subinterpreter.
    int64_t subinterpreter = -1;
    PyThreadState* sub = nullptr;
    // Found without a Python state, or a Python thread whose state is gone while the thread
    // runs on (C code between PyGILState_Release and the next Ensure; the drain's next scan
    // makes it native-only): identified by its tid.
    const bool native_only = ctx->native_only() || self == nullptr;
    if (native_only) {
        // It may hold a state now (PyGILState_Ensure from C): its frames are walked then (a
        // subinterpreter's are not read, as below), else the sample is native only.
        if (platform_current_tid() != ctx->native_tid_) {
            bump(g_counters.no_thread);
            return false;
        }
        if (self != nullptr && self->interp != PyInterpreterState_Main()) self = nullptr;
    } else if (self != nullptr && reinterpret_cast<struct _ts*>(self) != ctx->tstate_ &&
        self->interp != PyInterpreterState_Main()) {
        // 3.12+: the TSS entry follows a swap. It may be a state the interpreter's creator made
        // (run_string swaps to the interpreter's first thread state, whatever thread runs it),
        // but it is bound to this thread now.
        sub = self;
    }
    if (sub != nullptr) {
        subinterpreter = PyInterpreterState_GetID(sub->interp);
        self = reinterpret_cast<PyThreadState*>(ctx->tstate_);
    }
    if (!native_only && (self == nullptr || reinterpret_cast<struct _ts*>(self) != ctx->tstate_)) {
        bump(g_counters.no_thread);
        return false;
    }
    // The guard stepped aside for a fault that was not ours (or is not installed): no
    // unguarded walk. (A handler the program installed since the drain's last look is not
    // known here; docs/architecture.md, "Torn stacks and the fault guard", point 5.)
    if (!platform_fault_guard_ready()) {
        bump(g_counters.unguarded);
        return false;
    }
    if (ctx->busy_.exchange(true, std::memory_order_acquire)) {
        bump(g_counters.dropped_busy);
        ctx->dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    // The walk writes straight into the ring's space: no copy on the signal path.
    RecordWriter record(ctx->ring_.get());
    if (!record.open()) {
        bump(g_counters.dropped_full);
        ctx->dropped_.fetch_add(1, std::memory_order_relaxed);
        ctx->busy_.store(false, std::memory_order_release);
        return false;
    }
    const uint64_t started = platform_monotonic_ns();
    RawFrame* const frames = record.frames();
    CaptureWork work;
    const bool clean = guarded_walk(ctx, reinterpret_cast<uintptr_t>(self), frames, ucontext, unwind, &work);
    WalkResult w = work.walk;
    uint32_t native_depth = work.native_depth;
    if (!clean) {
        // A load faulted. In the Python walk: keep the frames before it (the root side is
        // lost). In the native unwind: keep every Python frame and drop the native ones.
        if (work.python_done) {
            bump(g_counters.native_faults);
            native_depth = 0;
        } else {
            bump(g_counters.walk_faults);
            w.depth = static_cast<uint32_t>(work.py_end - frames);
            w.truncated = true;
        }
    }
    if (w.error) {
        bump(g_counters.walk_errors);
        w.truncated = true;  // the chain was torn: its root side is lost, as for a deep stack
    }
    if (w.truncated) bump(g_counters.truncated);
    if (work.native_ran) {
        bump(g_counters.native_unwinds);
        g_counters.native_fp_steps.fetch_add(work.native.fp_steps, std::memory_order_relaxed);
        g_counters.native_leaf_steps.fetch_add(work.native.leaf_steps, std::memory_order_relaxed);
        g_counters.native_cached_steps.fetch_add(work.native.cached_steps, std::memory_order_relaxed);
        const auto stop = static_cast<uint32_t>(work.native.stop);
        if (stop < 10) bump(g_counters.native_stops[stop]);
    }
    // A Python thread on CPU with not one Python frame readable: the walk met a stack in the
    // middle of a change (CPython 3.11/3.12 entering the eval loop from C: ~30 instructions
    // per entry, a generator resumed by sum() enters on every item). The thread's next sample,
    // a moment as random as this one, carries its time, up to kMaxDeferralsInRow times in a
    // row (two torn moments one tick apart are rare, not impossible): a stack of junk is worse
    // than a sample a tick later. The native pcs alone do not say which Python code ran.
    // An empty chain read cleanly is such a moment too when the native stack is inside the
    // eval loop (the stale slot held 0); without native frames it cannot be told from C code
    // running between two callbacks.
    const bool torn = w.error || !clean ||
                      (w.depth == 0 && unwind != nullptr &&
                       eval_calls_in(unwind->eval_ranges(), reinterpret_cast<const uint64_t*>(frames), native_depth) > 0);
    if (w.depth == 0 && torn && !native_only && !idle && sub == nullptr &&
        ctx->deferrals_in_row_.load(std::memory_order_relaxed) < kMaxDeferralsInRow) {
        ctx->carried_ns_.fetch_add(weight_ns, std::memory_order_relaxed);
        ctx->deferrals_in_row_.fetch_add(1, std::memory_order_relaxed);
        bump(g_counters.deferred);
        record.abandon();
        ctx->busy_.store(false, std::memory_order_release);
        return false;
    }
    if (w.depth == 0 && native_depth == 0 && !clean) {
        // Nothing readable at all: no record (counted above). Its time, and any carried one,
        // waits for the thread's next record.
        if (!idle) ctx->carried_ns_.fetch_add(weight_ns, std::memory_order_relaxed);
        record.abandon();
        ctx->busy_.store(false, std::memory_order_release);
        return false;
    }
    // A load per capture; the read-modify-write only on the rare capture that has one to take.
    if (!idle && ctx->carried_ns_.load(std::memory_order_relaxed) != 0) {
        weight_ns += ctx->carried_ns_.exchange(0, std::memory_order_relaxed);
        ctx->deferrals_in_row_.store(0, std::memory_order_relaxed);
    }
    if (native_only && w.depth == 0) {
        // No Python frame: one root frame names the thread (<thread "OMP worker 3">), above
        // its native frames if any. It goes where a Python frame would (the drain puts Python
        // frames the native walk did not place at the root end); the pcs move along.
        std::memmove(frames + 1, frames, native_depth * sizeof(uint64_t));
        frames[0] = RawFrame{kThreadNameFrameCode, 0, 0};
        w.depth = 1;
        bump(g_counters.native_thread);
    }
    if (subinterpreter < 0) subinterpreter = work.subinterpreter;
    if (subinterpreter >= 0) {
        bump(g_counters.subinterpreter);
        if (w.depth < kMaxPythonFrames) {
            // Leaf first: the marker goes in front, the native pcs after the frames move along.
            std::memmove(frames + 1, frames, w.depth * sizeof(RawFrame) + native_depth * sizeof(uint64_t));
            frames[0] = RawFrame{kSubinterpreterFrameCode, 0, static_cast<uint32_t>(subinterpreter)};
            ++w.depth;
        }
    }
    // PyGILState_Check compares the GIL holder (an atomic on 3.9-3.11, libpython's own
    // thread-local attached state on 3.12+) with our TSS entry: no lock, no allocation.
    const bool has_gil = PyGILState_Check() != 0;
    // The collection runs inside the leaf Python frame (the one that allocated, or on 3.12+
    // the one whose eval-breaker check ran it): <GC> goes on its leaf side. Python code the
    // collection runs (finalizers, callbacks) is on the same chain, so it sits under <GC>.
    if (!idle && subinterpreter < 0 && running_gc(has_gil)) {
        bump(g_counters.gc);
        prepend_frame(frames, &w, native_depth, RawFrame{kGcFrameCode, 0, 0});
    }
    RawSampleHeader hdr{};
    hdr.timestamp_ns = started;
    hdr.weight_ns = weight_ns;
    hdr.native_tid = ctx->native_tid_;
    hdr.thread_serial = ctx->serial_;
    hdr.flags = (w.truncated ? kSampleTruncated : 0u) | (idle ? kSampleIdle : kSampleOnCpu) |
                kSampleGilKnown | (has_gil ? kSampleHasGil : 0u);
    // Only the frames the thread's last record did not have at its root end are kept
    // (root_share.h); the native pcs move down with them.
    const uint32_t shared = root_share_encode(frames, w.depth, native_depth, &ctx->share_base_);
    if (w.depth > ctx->share_deepest_.load(std::memory_order_relaxed))
        ctx->share_deepest_.store(w.depth, std::memory_order_relaxed);
    hdr.depth = static_cast<uint16_t>(w.depth - shared);
    hdr.shared_root = static_cast<uint16_t>(shared);
    // Native pcs follow the Python frames actually kept: after a fault in the Python walk
    // there are none (the unwind never ran).
    hdr.native_depth = static_cast<uint16_t>(native_depth);
    record.commit(hdr);
    ctx->captured_.fetch_add(1, std::memory_order_relaxed);
    bump(g_counters.captured);
    g_counters.capture_ns.fetch_add(platform_monotonic_ns() - started, std::memory_order_relaxed);
    ctx->busy_.store(false, std::memory_order_release);
    return true;
}

// SIGNAL-SAFE, NO-HEAP. The fault guard's claim (platform_fault_guard_install): runs in the
// SIGSEGV/SIGBUS handler of the faulting thread. When that thread is inside guarded_walk, jumps
// back there and does not return; otherwise returns and the fault is not ours. The lookup may
// scan the whole table: it runs once per fault, never per sample.
void claim_fault() {
    const uint64_t tid = platform_current_tid();
    ThreadCtx* armed = nullptr;
    {
        GateScope<ThreadTable> scope(g_gate);  // the table outlives this scope
        const ThreadTable* table = scope.get();
        if (table == nullptr) return;
        ThreadCtx* ctx = table->by_tid(tid);
        if (ctx == nullptr || ctx->native_tid_ != tid || !ctx->fault_armed_.load(std::memory_order_relaxed)) {
            ctx = nullptr;
            const uint32_t n = table->published();
            for (uint32_t i = 0; i < n && ctx == nullptr; ++i) {
                ThreadCtx* c = table->by_serial(i);
                if (c != nullptr && c->native_tid_ == tid && c->fault_armed_.load(std::memory_order_relaxed))
                    ctx = c;
            }
        }
        armed = ctx;
    }
    // The capture that armed it still holds its own place in the gate, so ctx stays valid.
    if (armed == nullptr) return;
    armed->fault_armed_.store(false, std::memory_order_relaxed);
    siglongjmp(armed->fault_env_, 1);
}

}  // namespace

void capture_enable(ThreadTable* table, const UnwindTables* unwind) {
    g_unwind.store(unwind, std::memory_order_release);
    g_gc_collecting.store(gc_collecting_flag(PyInterpreterState_Main()), std::memory_order_release);
    g_gate.publish(table);
}

bool capture_disable_and_wait() {
    // A capture is a few microseconds; a thread preempted inside one may take a scheduler
    // slice or two. One second means something is badly wrong: report it, never hang.
    const bool done = g_gate.close_and_wait();
    g_unwind.store(nullptr, std::memory_order_release);
    return done;
}

FaultClaimFn capture_fault_claim() { return &claim_fault; }

bool capture_by_serial(uint32_t serial, uint64_t weight_ns, const void* ucontext) {
    GateScope<ThreadTable> scope(g_gate);
    ThreadTable* table = scope.get();
    if (table == nullptr) return false;
    ThreadCtx* ctx = table->by_serial(serial);
    // The thread's CPU timer expired: count its CPU time whether or not a record follows
    // (platform_thread_finish counts the expiries never delivered from it). A thread running a
    // subinterpreter has that interpreter's state in its TSS entry (3.12+): still this ctx's
    // thread, as capture_into decides.
    if (ctx != nullptr && ctx->magic_ == kThreadCtxMagic && (on_ctx_thread(ctx) || in_subinterpreter(ctx)))
        ctx->timer_cpu_ns_.fetch_add(weight_ns, std::memory_order_relaxed);
    return capture_into(ctx, weight_ns, ucontext, g_unwind.load(std::memory_order_acquire));
}

bool capture_wall_by_serial(uint32_t serial, const void* ucontext) {
    GateScope<ThreadTable> scope(g_gate);
    ThreadTable* table = scope.get();
    if (table == nullptr) return false;
    ThreadCtx* ctx = table->by_serial(serial);
    if (ctx == nullptr || ctx->magic_ != kThreadCtxMagic) return false;
    // A signal whose weight an earlier delivery already took stands for no time: skip it.
    const uint64_t weight = ctx->pending_weight_ns_.exchange(0, std::memory_order_acq_rel);
    if (weight == 0) return true;
    const bool ok = capture_into(ctx, weight, ucontext, g_unwind.load(std::memory_order_acquire),
                                 ctx->pending_idle_.exchange(false, std::memory_order_relaxed));
    // The CPU this capture cost is not the thread running: the wall sampler measures the next
    // tick from here. Without it a sleeping thread whose captures cost more than the run
    // threshold (a slow build) looks busy at every tick and is signalled again and again.
    uint64_t cpu = 0;
    if (platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &cpu))
        ctx->last_cpu_ns_.store(cpu, std::memory_order_relaxed);
    return ok;
}

bool capture_by_tid(uint64_t native_tid, uint64_t weight_ns, const void* ucontext) {
    GateScope<ThreadTable> scope(g_gate);
    ThreadTable* table = scope.get();
    if (table == nullptr) return false;
    ThreadCtx* ctx = table->by_tid(native_tid);
    // The process timer (ITIMER_PROF) says only that the process used another interval, and
    // under load the kernel notices fewer expiries than were due (measured: 30 signals for
    // 300 ms of one thread's CPU at 5 ms). So the sample stands for this thread's own CPU
    // since its previous sample (or its registration): every thread's sampled CPU adds up to
    // its clock, as the per-thread timers' overrun counts make theirs. One clock read per
    // sample (a system call, signal-safe) on this fallback path only.
    if (ctx != nullptr && ctx->magic_ == kThreadCtxMagic && on_ctx_thread(ctx)) {
        uint64_t now = 0;
        if (platform_thread_cpu_ns_of(native_tid, ctx->ident_, &now)) {
            // From the mark platform_thread_attach set (the CPU the session owns of it).
            const uint64_t last = ctx->last_cpu_ns_.exchange(now, std::memory_order_relaxed);
            weight_ns = now > last ? now - last : 0;
            if (weight_ns == 0) return true;  // a second signal in the same CPU instant: no time
        }
    }
    return capture_into(ctx, weight_ns, ucontext, g_unwind.load(std::memory_order_acquire));
}

bool capture_quiescent() { return g_gate.in_flight() == 0; }
const ThreadTable* capture_gate_enter() { return g_gate.enter(); }
void capture_gate_leave() { g_gate.leave(); }

bool capture_take_drain_request() { return record_take_drain_request(); }

CaptureStats capture_stats() {
    CaptureStats s;
    s.captured = g_counters.captured.load(std::memory_order_relaxed);
    s.dropped_full = g_counters.dropped_full.load(std::memory_order_relaxed);
    s.dropped_busy = g_counters.dropped_busy.load(std::memory_order_relaxed);
    s.no_thread = g_counters.no_thread.load(std::memory_order_relaxed);
    s.walk_errors = g_counters.walk_errors.load(std::memory_order_relaxed);
    s.deferred = g_counters.deferred.load(std::memory_order_relaxed);
    s.walk_faults = g_counters.walk_faults.load(std::memory_order_relaxed);
    s.native_faults = g_counters.native_faults.load(std::memory_order_relaxed);
    s.unguarded = g_counters.unguarded.load(std::memory_order_relaxed);
    s.subinterpreter = g_counters.subinterpreter.load(std::memory_order_relaxed);
    s.gc = g_counters.gc.load(std::memory_order_relaxed);
    s.native_thread = g_counters.native_thread.load(std::memory_order_relaxed);
    s.truncated = g_counters.truncated.load(std::memory_order_relaxed);
    s.idle = g_counters.idle.load(std::memory_order_relaxed);
    s.capture_ns = g_counters.capture_ns.load(std::memory_order_relaxed);
    s.native_unwinds = g_counters.native_unwinds.load(std::memory_order_relaxed);
    s.native_fp_steps = g_counters.native_fp_steps.load(std::memory_order_relaxed);
    s.native_cached_steps = g_counters.native_cached_steps.load(std::memory_order_relaxed);
    s.native_leaf_steps = g_counters.native_leaf_steps.load(std::memory_order_relaxed);
    for (int i = 0; i < 10; ++i) s.native_stops[i] = g_counters.native_stops[i].load(std::memory_order_relaxed);
    return s;
}

void capture_reset_stats() {
    g_counters.captured.store(0);
    g_counters.dropped_full.store(0);
    g_counters.dropped_busy.store(0);
    g_counters.no_thread.store(0);
    g_counters.walk_errors.store(0);
    g_counters.deferred.store(0);
    g_counters.walk_faults.store(0);
    g_counters.native_faults.store(0);
    g_counters.unguarded.store(0);
    g_counters.subinterpreter.store(0);
    g_counters.gc.store(0);
    g_counters.native_thread.store(0);
    g_counters.truncated.store(0);
    g_counters.idle.store(0);
    g_counters.capture_ns.store(0);
    g_counters.native_unwinds.store(0);
    g_counters.native_fp_steps.store(0);
    g_counters.native_cached_steps.store(0);
    g_counters.native_leaf_steps.store(0);
    for (auto& c : g_counters.native_stops) c.store(0);
}

void capture_count_idle() { bump(g_counters.idle); }

void capture_count_sampled(bool written) { bump(written ? g_counters.captured : g_counters.dropped_full); }
void capture_count_gc() { bump(g_counters.gc); }

SignalPath g_signal_path;

void on_sample_signal(int signo, siginfo_t* si, void* uc) {
    const int saved_errno = errno;
    SignalPath& path = g_signal_path;
    const SignalDelivery d = path.read(signo, si);
    if (d.kind == SignalDelivery::kQueuedBySelf && d.value == kCalibrationValue) {
        errno = saved_errno;
        return;
    }
    const auto route = static_cast<SignalRoute>(path.route.load(std::memory_order_acquire));
    const uint64_t interval = path.interval_ns.load(std::memory_order_relaxed);
    const bool rt = signo == path.rt_signo.load(std::memory_order_relaxed);
    // A timer or request of ours carries kTimerValueMagic | serial, never a pointer: a foreign
    // signal is never dereferenced.
    const bool magic = (d.value & 0xFFFFFFFF00000000ull) == kTimerValueMagic;
    bool ours = false;
    if (d.kind == SignalDelivery::kTimer && rt && magic &&
        (route == SignalRoute::kPerThread || route == SignalRoute::kWall)) {
        ours = true;
        path.signals.fetch_add(1, std::memory_order_relaxed);
        path.overruns.fetch_add(d.overrun, std::memory_order_relaxed);
        if (!capture_by_serial(static_cast<uint32_t>(d.value), interval * (1 + d.overrun), uc))
            path.no_thread.fetch_add(1, std::memory_order_relaxed);
    } else if (d.kind == SignalDelivery::kQueuedBySelf && rt && magic && route == SignalRoute::kWall) {
        ours = true;
        path.signals.fetch_add(1, std::memory_order_relaxed);
        if (!capture_wall_by_serial(static_cast<uint32_t>(d.value), uc))
            path.no_thread.fetch_add(1, std::memory_order_relaxed);
    } else if (d.kind == SignalDelivery::kProcessTimer && route == SignalRoute::kItimer) {
        ours = true;
        path.signals.fetch_add(1, std::memory_order_relaxed);
        if (!capture_by_tid(platform_current_tid(), interval, uc))
            path.no_thread.fetch_add(1, std::memory_order_relaxed);
    }
    if (!ours) path.chain(signo, si, uc);
    errno = saved_errno;
}

}  // namespace spprof
