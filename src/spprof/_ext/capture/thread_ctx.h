// thread_ctx.h: what the capture path knows about one sampled Python thread.
//
// A ThreadCtx is created by the session (GIL held) when a Python thread is discovered. When
// the thread ends it is unpublished from the ThreadTable and kept for a grace period
// (thread_table.h) before it is freed and its slot reused: a timer signal queued before the
// timer was deleted, or a sampler that looked it up just before, still finds valid memory,
// detached. Its ring is written only by the capture path of that thread (Linux: the thread's
// own handler; macOS: the sampler thread) and the wall census, and read only by the drain.
#pragma once

#include <setjmp.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "code_facts.h"
#include "ringbuffer.h"
#include "root_share.h"

struct _ts;  // PyThreadState, kept opaque here so platform code needs no Python.h

namespace spprof {

struct PlatformThread;  // per-OS data (Linux: the POSIX timer), made by platform_thread_attach
// Owns it: the deleter (platform_thread_free) releases what it holds. Null when not armed.
using PlatformThreadPtr = std::unique_ptr<PlatformThread, void (*)(PlatformThread*)>;

// Checked by the capture path before it trusts a ThreadCtx found through the session tables.
constexpr uint64_t kThreadCtxMagic = 0x7370'7072'6f66'5443ull;  // "spprofTC"

enum class ThreadState : uint32_t { kAttached = 1, kDetached = 2 };

// ThreadCtx::census_tail_from_ns_ while the census's visit holds the span (no clock reads 1).
constexpr uint64_t kCensusTailHeld = 1;

struct ThreadCtx {
    ThreadCtx(uint32_t serial, uint64_t generation, struct _ts* tstate, uint64_t native_tid,
              unsigned long ident, std::unique_ptr<RingBuffer> ring)
        : serial_(serial), generation_(generation), tstate_(tstate), native_tid_(native_tid),
          ident_(ident), ring_(std::move(ring)), share_frames_(new RawFrame[kMaxPythonFrames]) {
        share_base_.frames = share_frames_.get();
    }
    ThreadCtx(const ThreadCtx&) = delete;
    ThreadCtx& operator=(const ThreadCtx&) = delete;

    // A thread found by the scan of the process's OS threads without a Python thread state
    // (an OpenMP or OpenBLAS worker, a C library's thread): tstate_ is null, its kernel tid is
    // its identity, and a capture walks whatever state it has at that moment, if any.
    bool native_only() const { return tstate_ == nullptr; }

    const uint64_t magic_ = kThreadCtxMagic;
    std::atomic<ThreadState> state_{ThreadState::kAttached};
    const uint32_t serial_;          // slot in the session's thread table (reused once freed)
    const uint64_t generation_;      // unique per session: tells a reused slot's threads apart
    struct _ts* const tstate_;       // the thread's PyThreadState; compared, never trusted alone;
                                     // null for a thread found without one (native_only)
    const uint64_t native_tid_;      // kernel thread id
    const unsigned long ident_;      // threading.get_ident()
    // Written only while state_ is kAttached; once the thread is detached and drained the
    // session takes it back for the next thread (no capture can reach it then: see
    // SessionThreads::retire).
    std::unique_ptr<RingBuffer> ring_;
    // The ring's records share their root-side frames with the one before (root_share.h): the
    // frames of the ring's last record, for its next writer. Whoever holds busy_.
    // Not value-initialised: a thread touches only as many frames as its deepest record had
    // (share_deepest_, set by the writers; read by the session's memory count).
    std::unique_ptr<RawFrame[]> share_frames_;
    RootShareBase share_base_;
    std::atomic<uint32_t> share_deepest_{0};
    std::atomic<bool> busy_{false};  // capture in progress: a nested capture drops instead
    std::atomic<uint64_t> captured_{0};
    std::atomic<uint64_t> dropped_{0};
    // Thread CPU clock when registered, then at the end of each wall-mode capture (Linux: the
    // wall sampler's "did it run" baseline, so a capture's own cost never counts as running),
    // or at each sample of the Mach sampler (THREAD_BASIC_INFO), or at each sample of the
    // process timer (itimer fallback: the sample's weight is the CPU since this reading).
    // Per-thread-timer captures leave it alone: no clock syscall on their path.
    std::atomic<uint64_t> last_cpu_ns_{0};
    // Wall mode (Linux): the thread's CPU clock at the start of its span below (registration,
    // the census's latest reading, or a window's end), so that a thread that ends is credited
    // with its CPU time to within one census period.
    std::atomic<uint64_t> census_cpu_ns_{0};
    // Wall mode (Linux), a thread with a CPU timer: the time from which no record holds its
    // off-CPU time yet (its registration, the census's last visit, or a window's end), 0 while
    // someone writes it. Whoever exchanges it for 0 accounts for the span since then: the
    // census at its next visit, the thread as it ends, or a window's end for a long wait
    // (SessionThreads::write_wait_tail, which stores census_cpu_ns_ and then its own time
    // back). census_carry_ns_, census_long_wait_ and census_at_wait_ are stored before it, read
    // after taking it.
    // kCensusTailHeld while a census visit holds it: a thread that ends waits for the visit's
    // hand-back (microseconds; a walk under emulation, milliseconds).
    std::atomic<uint64_t> census_tail_from_ns_{0};
    // Off-CPU time before census_tail_from_ns_ that the census carries and no record holds
    // yet (wall_census.h): the thread that ends writes it with its span.
    std::atomic<uint64_t> census_carry_ns_{0};
    // The census passes this thread over (a long wait): a window's end writes its span.
    std::atomic<bool> census_long_wait_{false};
    // The census's last visit found it blocked on a known stack (or carries the end of such
    // a wait): whoever writes its span next puts the time off CPU there (kSampleAtWait), not
    // on a stack its CPU timer sampled after it woke.
    std::atomic<bool> census_at_wait_{false};
    // CPU time its own per-thread CPU timer has counted since it was armed (each delivery adds
    // interval x (1 + overrun)): the thread's CPU clock at its last expiry, minus the reading
    // taken just before arming. An ended thread's clock can no longer be read; this can.
    std::atomic<uint64_t> timer_cpu_ns_{0};
    // Wall mode: time the next capture stands for, accumulated by the sampler thread before
    // it signals (several ticks add up if a signal is still pending), taken by the handler.
    std::atomic<uint64_t> pending_weight_ns_{0};
    // Time of an on-CPU capture that found no Python frame it could read (CPython 3.11/3.12
    // publish a new cframe before its first frame, so a sample in that window reads a stale
    // slot): the thread's next sample carries it. Written by whoever holds busy_; the session
    // takes what is left when the thread ends (session_threads.cpp).
    std::atomic<uint64_t> carried_ns_{0};
    // Torn captures deferred since the thread's last record (the handler's, under busy_):
    // a few in a row are allowed (one after another came in 4 runs of 40 of a map() loop at
    // 1 ms); the bound keeps a thread whose every capture is torn writing something.
    std::atomic<uint32_t> deferrals_in_row_{0};
    // Wall mode: no stack recorded at registration (the thread registered itself and is
    // running): the sampler's first tick asks it for one whatever its CPU clock says.
    std::atomic<bool> needs_first_sample_{false};
    // Wall mode: the pending request is for a thread whose CPU clock did not move (its first
    // sample): the capture is flagged idle, not on-CPU.
    std::atomic<bool> pending_idle_{false};
    // Linux: a per-thread CPU timer samples this thread (set by platform_thread_attach, cleared
    // by detach). Wall mode's census relies on it for the thread's CPU time.
    std::atomic<bool> cpu_timer_armed_{false};
    // Wall mode: whether the thread has a CPU timer is settled (platform_thread_attach has
    // returned) and its first stack asked for. The table publishes a ctx before that; a census
    // visit in between took it for a thread without a timer and kept its span, and a short
    // thread then ended with nothing to write (a 3 ms nap lost whole). Set by the session.
    std::atomic<bool> timer_settled_{false};
    // Before its CPU timer is deleted while the ctx is still attached (the thread ends, or is
    // retired): the census leaves it alone from here. Else a visit in between took it for a
    // thread whose timer was refused, took its span and put the time since its last visit on
    // a signal to the ending thread (flagged on CPU), and the thread found no span to write
    // (a 12 ms nap showed 2 ms off CPU, once in CI). The census re-reads the flag when it
    // finds no timer armed: the detach's release orders this store before that.
    void census_let_go() { timer_settled_.store(false, std::memory_order_release); }
    // The thread CPU time its timer's expiries are counted from (platform_thread_attach): its
    // clock at registration, or 0 for a thread the threading hook registered (it was born in
    // the session, so its start-up CPU is the session's too). Set before attach.
    uint64_t timer_origin_cpu_ns_ = 0;
    // The thread blocks the sampling signal (its signal mask, seen by the scan): no timer, and
    // the wall census leaves it alone (a signal it never takes is no sample, and its CPU time
    // is not idle time). Set by the session, GIL held.
    std::atomic<bool> signal_blocked_{false};
    // What the timer's schedule owed when it was armed: expiries between the origin and the
    // arming (a hooked thread's start-up), for the session to write (Linux; GIL held).
    uint64_t timer_owed_at_arm_ns_ = 0;
    // busy_ also makes the ring's producers take turns: the thread's own handler, in wall
    // mode the census thread writing an idle record for a thread it did not signal, and the
    // Mach sampler thread (record_writer.h, write_foreign_record). Whoever
    // fails to take it drops and counts; nobody waits.
    PlatformThreadPtr platform_{nullptr, nullptr};  // set by platform_thread_attach, reset by detach
    // The thread's stack, set at registration before sampling is armed: the native unwinder
    // reads saved registers only inside it (0/0: record only the interrupted pc).
    uintptr_t stack_lo_ = 0;
    uintptr_t stack_hi_ = 0;
    // Facts of the code objects this thread's captures met (code_facts.h); used only by the
    // thread's own capture path, never by a sampler walking it from outside.
    CodeFactsCache code_cache_;
    // Linux capture path: while fault_armed_ is set, the thread's own capture is reading
    // interpreter memory, and a fault there jumps back to fault_env_ (signal_handler.cpp,
    // claim_fault). Written and read only on this thread (by its handler and the fault
    // handler nested in it).
    sigjmp_buf fault_env_;
    std::atomic<bool> fault_armed_{false};
};

static_assert(std::atomic<ThreadState>::is_always_lock_free, "used from the signal handler");
static_assert(std::atomic<bool>::is_always_lock_free, "used from the signal handler");

}  // namespace spprof
