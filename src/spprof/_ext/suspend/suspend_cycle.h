// suspend/suspend_cycle.h: one suspend -> read registers -> copy -> resume cycle.
//
// The order every Mach sampler must keep (FIELD-NOTES section 5), written once over a thread
// layer so that it is tested on Linux with a fake layer and runs on macOS over the Mach one
// (platform/darwin_mach.cpp). A ThreadLayer provides:
//
//   using Handle = ...;                              // mach thread port on macOS
//   SuspendStatus suspend(Handle);                   // thread_suspend
//   bool get_state(Handle, RegisterContext*);          // thread_get_state, count checked
//   ResumeStatus resume(Handle);                     // thread_resume
//   uint64_t now_ns();                               // a monotonic clock with no locks
//
// Rules kept here: a thread whose suspend failed is never resumed; a thread whose suspend
// succeeded is resumed exactly once, on every path (ScopedSuspension resumes in its
// destructor); KERN_ABORTED (kAborted) is retried a bounded number of times; the copy step
// runs only between a successful suspend and the resume, and nothing else does.
//
// Everything in this header runs on the sampler thread; what runs between suspend and resume
// is NO-HEAP: no allocation, no locks, no logging, no Python API, bounded loops. The copy
// callable passed in must keep the same rules.
#pragma once

#include <cstdint>

#include "../unwind/native_stack.h"
#include "suspend_stats.h"

namespace spprof {

enum class SuspendStatus : uint8_t {
    kOk,
    kGone,     // KERN_TERMINATED / KERN_INVALID_ARGUMENT / dead name: the thread exited, skip it
    kAborted,  // KERN_ABORTED: interrupted before it took effect, try again
    kFailed,   // anything else: skip the thread this tick
};

enum class ResumeStatus : uint8_t {
    kOk,
    kGone,     // the thread exited while suspended: nothing is left suspended
    kAborted,  // interrupted before it took effect, try again
    kFailed,   // the thread stays suspended: fatal for the process, reported loudly by the caller
};

// Bounded retries of an interrupted suspend or resume: an interruption is rare (a signal or
// thread_abort racing the call); three tries make a spurious skip unlikely while keeping a
// pathological thread from stalling the tick.
constexpr int kMaxSuspendAttempts = 3;
constexpr int kMaxResumeAttempts = 3;

// RAII owner of one suspension. Non-copyable; resumes in the destructor unless resume() ran.
template <class Layer>
class ScopedSuspension {
public:
    using Handle = typename Layer::Handle;

    ScopedSuspension(Layer& layer, Handle thread) : layer_(layer), thread_(thread) {
        for (attempts_ = 1;; ++attempts_) {
            status_ = layer_.suspend(thread_);
            if (status_ != SuspendStatus::kAborted || attempts_ == kMaxSuspendAttempts) break;
        }
        suspended_ = status_ == SuspendStatus::kOk;
    }
    ScopedSuspension(const ScopedSuspension&) = delete;
    ScopedSuspension& operator=(const ScopedSuspension&) = delete;
    ~ScopedSuspension() {
        if (suspended_) (void)resume();
    }

    bool suspended() const { return suspended_; }
    SuspendStatus status() const { return status_; }
    int attempts() const { return attempts_; }

    // Resume now (once). Calling it when not suspended is a no-op returning kOk.
    ResumeStatus resume() {
        if (!suspended_) return ResumeStatus::kOk;
        suspended_ = false;
        ResumeStatus rs = ResumeStatus::kFailed;
        for (int i = 0; i < kMaxResumeAttempts; ++i) {
            rs = layer_.resume(thread_);
            if (rs != ResumeStatus::kAborted) break;
        }
        // Still aborted after the retries: the suspension is still in force.
        return rs == ResumeStatus::kAborted ? ResumeStatus::kFailed : rs;
    }

private:
    Layer& layer_;
    Handle thread_;
    SuspendStatus status_ = SuspendStatus::kFailed;
    int attempts_ = 0;
    bool suspended_ = false;
};

struct CycleResult {
    enum Outcome : uint8_t {
        kSampled,        // suspended, registers read, copy ran, resumed
        kGone,           // the thread no longer exists: skipped, never resumed
        kSuspendFailed,  // suspend refused: skipped, never resumed
        kStateFailed,    // suspended and resumed, but the registers could not be read
        kResumeFailed,   // the thread is still suspended: the caller must report it loudly
    };
    Outcome outcome = kSuspendFailed;
    bool gone_after = false;    // the thread exited while suspended (resume said so)
    int suspend_attempts = 0;
    uint64_t suspended_ns = 0;  // length of the suspended window (suspend done -> resume done)
    RegisterContext regs;
};

// Suspend `thread`, read its registers, run copy(regs) (NO-HEAP), resume. Sampler thread.
template <class Layer, class Copy>
CycleResult suspend_and_copy(Layer& layer, typename Layer::Handle thread, Copy&& copy) {
    CycleResult r;
    ScopedSuspension<Layer> suspension(layer, thread);
    r.suspend_attempts = suspension.attempts();
    if (!suspension.suspended()) {
        r.outcome = suspension.status() == SuspendStatus::kGone ? CycleResult::kGone
                                                                : CycleResult::kSuspendFailed;
        return r;
    }
    // ---- suspended window: NO-HEAP from here to resume() ----
    const uint64_t t0 = layer.now_ns();
    const bool state_ok = layer.get_state(thread, &r.regs);
    if (state_ok) copy(static_cast<const RegisterContext&>(r.regs));
    const ResumeStatus rs = suspension.resume();
    // ---- every thread runs again ----
    const uint64_t t1 = layer.now_ns();
    r.suspended_ns = t1 > t0 ? t1 - t0 : 0;
    r.gone_after = rs == ResumeStatus::kGone;
    if (rs == ResumeStatus::kFailed) {
        r.outcome = CycleResult::kResumeFailed;
    } else if (!state_ok) {
        r.outcome = CycleResult::kStateFailed;
    } else {
        r.outcome = CycleResult::kSampled;
    }
    return r;
}

// Fold one cycle into the counters. Sampler thread, after the resume.
inline void record_cycle(SuspendStats& stats, const CycleResult& r) {
    switch (r.outcome) {
        case CycleResult::kSampled:
            stats.add_sampled();
            stats.add_suspend_ns(r.suspended_ns);
            break;
        case CycleResult::kGone:
        case CycleResult::kSuspendFailed:
            stats.add_skipped();
            break;
        case CycleResult::kStateFailed:
            stats.add_walk_error();
            stats.add_suspend_ns(r.suspended_ns);
            break;
        case CycleResult::kResumeFailed:
            stats.add_resume_failure();
            stats.add_suspend_ns(r.suspended_ns);
            break;
    }
}

}  // namespace spprof
