// python_tick.cpp: see python_tick.h.
#include "python_tick.h"

#include <atomic>
#include <limits>

#include "../log.h"
#include "../platform/platform.h"
#include "../sampler_round.h"

namespace spprof {

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

std::atomic<uint64_t> g_due_ns{kNever};
std::atomic<bool> g_queued{false};  // a call is due and nobody has made it yet
std::atomic<uint64_t> g_queued_ns{0};  // when it was queued
std::atomic<uint64_t> g_period_ns{0};
PyObject* g_handler = nullptr;  // GIL

// GIL held: make the call if it is still to be made. -1, with the exception set: the call
// was interrupted by one of the program's (the main thread ran a signal's Python handler
// inside it: KeyboardInterrupt), which the caller lets go on its way.
int call_if_queued() {
    if (!g_queued.exchange(false) || g_handler == nullptr) return 0;
    PyObject* handler = g_handler;
    Py_INCREF(handler);  // the handler may end the calls (and drop our reference) itself
    // An exception the interrupted code has set stays its own (CPython runs pending calls
    // with none set; this is the backstop).
#if PY_VERSION_HEX >= 0x030C0000
    PyObject* raised = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
#endif
    PyObject* result = PyObject_CallNoArgs(handler);
    int rc = 0;
    if (result != nullptr) {
        // A number: the period from now on, in seconds (the handler paces itself).
        if (result != Py_None) {
            const double s = PyFloat_AsDouble(result);
            if (s == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
            } else if (s > 0 && s < 3600) {
                g_period_ns.store(static_cast<uint64_t>(s * 1e9));
            }
        }
        Py_DECREF(result);
    } else if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        log_debug("python tick: its handler raised; no more calls");
        if (g_handler == handler) python_tick_set(nullptr, 0);
    } else {
        rc = -1;  // a BaseException the handler does not catch: not ours to swallow
    }
    Py_DECREF(handler);
#if PY_VERSION_HEX >= 0x030C0000
    if (rc == 0) {
        PyErr_SetRaisedException(raised);
    } else {
        Py_XDECREF(raised);
    }
#else
    if (rc == 0) {
        PyErr_Restore(type, value, tb);
    } else {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
#endif
    return rc;
}

// The main thread's pending call (Py_AddPendingCall): -1 passes the program's exception on
// to the code it interrupted, as the signal's handler would have raised it there.
int pending_call(void*) { return call_if_queued(); }

}  // namespace

void python_tick_set(PyObject* handler, uint64_t period_ns) {
    if (handler == nullptr) {
        sampler_round_set_hook(nullptr);
        g_due_ns.store(kNever);
        g_queued.store(false);
        Py_CLEAR(g_handler);
        return;
    }
    Py_INCREF(handler);
    Py_XSETREF(g_handler, handler);
    g_queued.store(false);  // a queueing that raced the last set(nullptr) is not this one's
    g_period_ns.store(period_ns);
    g_due_ns.store(platform_monotonic_ns() + period_ns);
    sampler_round_set_hook(&python_tick_queue_if_due);
}

void python_tick_queue_if_due() {
    const uint64_t due = g_due_ns.load();
    const uint64_t now = platform_monotonic_ns();
    // A quarter period early is on time: the sampler threads come every period or so, and one
    // that comes just before the due time would otherwise make the period twice as long.
    if (now + g_period_ns.load() / 4 < due) return;
    // One queueing per period whoever comes first; the next period counts from now, so a late
    // call is not followed by a burst.
    uint64_t expected = due;
    if (!g_due_ns.compare_exchange_strong(expected, now + g_period_ns.load())) return;
    if (!g_queued.load()) g_queued_ns.store(now);  // a call still queued keeps its time
    if (!g_queued.exchange(true)) {
        // A full queue (32 calls, shared with the interpreter's signals) leaves it to the drain.
        (void)Py_AddPendingCall(&pending_call, nullptr);
    }
}

bool python_tick_overdue() {
    return g_queued.load() && platform_monotonic_ns() - g_queued_ns.load() >= g_period_ns.load() / 2;
}

uint64_t python_tick_queued_ns() { return g_queued_ns.load(); }

void python_tick_serve() {
    // The drain thread runs no signal handler: nothing of the program's can come here.
    if (call_if_queued() < 0) PyErr_Clear();
}

void python_tick_forget_after_fork() {
    sampler_round_set_hook(nullptr);
    g_due_ns.store(kNever);
    g_queued.store(false);
    Py_CLEAR(g_handler);
}

}  // namespace spprof
