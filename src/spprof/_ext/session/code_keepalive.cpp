// code_keepalive.cpp: see code_keepalive.h. GIL held everywhere.
#include "code_keepalive.h"

#include <new>

#include "../capture/code_facts.h"
#include "../capture/pyframes/thread_state.h"

namespace spprof {

namespace {

// The wrapper is a plain function stored in a type slot, so it reaches the keeper through a
// global; the GIL serialises every access.
CodeKeepAlive* g_active = nullptr;
destructor g_next_dealloc = nullptr;  // what PyCode_Type.tp_dealloc was before us
PyObject* g_releasing = nullptr;      // the object release() is letting go of right now

}  // namespace

// Installed as PyCode_Type.tp_dealloc: runs wherever a code object's count reaches zero.
namespace {

// The calling thread's interpreter, or null (no thread state: finalisation paths).
PyInterpreterState* current_interpreter() {
    PyThreadState* ts = tstate_current_or_null();
    return ts != nullptr ? ts->interp : nullptr;
}

}  // namespace

void code_keepalive_on_dealloc(PyObject* op) {
    CodeKeepAlive* keeper = g_active;
    // Another interpreter's code objects are none of our samples' business, and with its own
    // GIL (3.12+) touching our lists from there would race.
    if (keeper == nullptr || op == g_releasing || current_interpreter() != keeper->interp_) {
        g_next_dealloc(op);
        return;
    }
    try {
        keeper->pending_.push_back(op);
    } catch (const std::bad_alloc&) {
        g_code_generation.fetch_add(1, std::memory_order_release);  // capture caches forget it
        g_next_dealloc(op);  // out of memory: a sample naming it becomes <unknown>, never wrong
        return;
    }
    Py_SET_REFCNT(op, 1);  // resurrected: the keeper owns this reference
    ++keeper->kept_total_;
}

CodeKeepAlive::~CodeKeepAlive() { deactivate(); }

void CodeKeepAlive::activate() {
    if (g_next_dealloc == nullptr) {
        g_next_dealloc = PyCode_Type.tp_dealloc;
        PyCode_Type.tp_dealloc = &code_keepalive_on_dealloc;
    }
    interp_ = current_interpreter();
    g_active = this;
    active_ = true;
}

void CodeKeepAlive::release(std::vector<PyObject*>* objs) {
    if (objs->empty()) return;
    // Before anything is freed: the capture paths' code caches must not outlive these.
    g_code_generation.fetch_add(1, std::memory_order_release);
    for (PyObject* op : *objs) {
        if (Py_REFCNT(op) == 1) {
            // Ours is the last reference: this dealloc must go through. Code objects that die
            // because of it (its nested code) are kept like any other.
            PyObject* outer = g_releasing;
            g_releasing = op;
            Py_DECREF(op);
            g_releasing = outer;
        } else {
            Py_DECREF(op);  // someone took it back (the resolver, a weakref): it lives on
        }
    }
    objs->clear();
}

void CodeKeepAlive::end_of_pass() {
    if (!active_) return;
    std::vector<PyObject*> old;
    old.swap(aging_);
    aging_.swap(pending_);
    release(&old);  // deaths it causes land in pending_
}

void CodeKeepAlive::deactivate() {
    if (!active_) return;
    active_ = false;
    if (g_active == this) g_active = nullptr;
    std::vector<PyObject*> a;
    std::vector<PyObject*> p;
    a.swap(aging_);
    p.swap(pending_);
    release(&a);
    release(&p);
}

void CodeKeepAlive::forget_after_fork() { g_active = nullptr; }

}  // namespace spprof
