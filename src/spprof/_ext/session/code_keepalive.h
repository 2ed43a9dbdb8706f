// code_keepalive.h: keeps code objects that die while profiling alive until the drain has
// resolved every sample that may name them.
//
// Why: a sample stores a bare code pointer; the drain resolves it up to one drain period
// later. Code objects die by refcount all the time (a module's code after import, exec'd and
// compiled code, lambdas of a dropped closure), and their memory is reused at once, often by
// a code object with the same interned name and first line. Validating the pointer at
// resolution can only guess; with this keeper it never has to: a code object cannot be freed
// (so its address cannot be reused) until one full drain pass after the pass during which it
// died has read every ring.
//
// How: PyCode_Type.tp_dealloc is wrapped (once, for the life of the process). While a keeper
// is active, a code object whose count reaches zero is resurrected with one reference that
// the keeper owns (code objects are not tracked by the GC, so nothing else can find them).
// At the end of each drain pass the keeper lets go of the objects that died before the
// previous pass ended; an object nobody else took is then really deallocated. While no keeper
// is active the wrapper only forwards.
//
// Threads: every function here, and the wrapper, runs with the GIL held (a code object is
// only ever deallocated with the GIL held), which is what protects the state. Code objects
// of another interpreter (which may have a GIL of its own) pass straight through.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spprof {

void code_keepalive_on_dealloc(PyObject* op);  // the tp_dealloc wrapper

class CodeKeepAlive {
public:
    CodeKeepAlive() = default;
    ~CodeKeepAlive();  // deactivates if still active (GIL held)
    CodeKeepAlive(const CodeKeepAlive&) = delete;
    CodeKeepAlive& operator=(const CodeKeepAlive&) = delete;

    // GIL held. Installs the wrapper on first use and makes this the active keeper (there is
    // at most one: the one session's).
    void activate();
    // GIL held, after a drain pass has read every ring: releases what died before the
    // previous pass ended, and ages what died since.
    void end_of_pass();
    // GIL held, once no sample can be captured any more and the rings are drained: stops
    // keeping and releases everything held. Idempotent.
    void deactivate();
    // In a forked child (GIL held): stop keeping without touching any reference count; what
    // is held stays alive in the child, which is harmless.
    static void forget_after_fork();

    uint64_t kept_total() const { return kept_total_; }  // code objects held back so far
    size_t held() const { return pending_.size() + aging_.size(); }

private:
    friend void code_keepalive_on_dealloc(PyObject* op);
    static void release(std::vector<PyObject*>* objs);

    std::vector<PyObject*> pending_;  // died since the last pass ended
    std::vector<PyObject*> aging_;    // died before it: released when the next pass ends
    uint64_t kept_total_ = 0;
    PyInterpreterState* interp_ = nullptr;  // the profiled interpreter: others pass through
    bool active_ = false;
};

}  // namespace spprof
