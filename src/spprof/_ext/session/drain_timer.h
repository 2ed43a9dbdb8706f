// drain_timer.h: a Python handler the drain thread calls, with the GIL, when the time it
// asked for has come. No thread of ours waits for it: the drain wakes every period anyway.
//
// Two users: the control channel's timed calls (control_wake.h, a window's end) and the
// one timer Python sets with _ext._drain_timer (a --subprocesses root merging its finished
// children's files as they come, spprof/_family_files.py). The handler returns the seconds
// until its next call, or None for none until it is set again.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <atomic>
#include <cstdint>
#include <limits>

namespace spprof {

class DrainTimer {
public:
    static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

    DrainTimer() = default;
    DrainTimer(const DrainTimer&) = delete;
    DrainTimer& operator=(const DrainTimer&) = delete;

    // GIL held. Call `handler()` once `first_ns` have passed (kNever: not until a call's answer
    // asks for one); handler nullptr: no more calls (the reference is dropped).
    void set(PyObject* handler, uint64_t first_ns);
    // Any thread, no GIL: a handler is set and its time has come.
    bool due(uint64_t now_ns) const;
    // GIL held, on the drain thread. One call. An exception (the handler catches its own: this
    // is the backstop) is logged under `what` and ends the calls.
    void call(const char* what);
    // GIL held: a handler is set (a call that raised leaves none).
    bool has_handler() const { return handler_ != nullptr; }
    // In a forked child, GIL held: the parent's handler is not the child's to call.
    void forget_after_fork();

private:
    std::atomic<uint64_t> due_ns_{kNever};
    PyObject* handler_ = nullptr;  // GIL
};

// The timer _ext._drain_timer sets.
DrainTimer& python_drain_timer();

}  // namespace spprof
