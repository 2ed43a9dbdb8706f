// drain_timer.cpp: see drain_timer.h.
#include "drain_timer.h"

#include "../log.h"
#include "../platform/platform.h"

namespace spprof {

namespace {

constexpr double kMaxWaitNs = 3.6e12;  // an hour

// The handler's answer: when its next call is due, kNever for None.
uint64_t due_from(PyObject* result) {
    if (result == Py_None) return DrainTimer::kNever;
    const double s = PyFloat_AsDouble(result);
    if (s == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return DrainTimer::kNever;
    }
    const double ns = s <= 0 ? 0.0 : s * 1e9;
    return platform_monotonic_ns() + static_cast<uint64_t>(ns > kMaxWaitNs ? kMaxWaitNs : ns);
}

}  // namespace

void DrainTimer::set(PyObject* handler, uint64_t first_ns) {
    due_ns_.store(kNever);
    if (handler == nullptr) {
        Py_CLEAR(handler_);
        return;
    }
    Py_INCREF(handler);
    Py_XSETREF(handler_, handler);
    if (first_ns != kNever) due_ns_.store(platform_monotonic_ns() + first_ns);
}

bool DrainTimer::due(uint64_t now_ns) const { return now_ns >= due_ns_.load(); }

void DrainTimer::call(const char* what) {
    if (handler_ == nullptr) return;
    PyObject* handler = handler_;
    Py_INCREF(handler);  // the handler may set another or none (and drop our reference) itself
    due_ns_.store(kNever);
    PyObject* result = PyObject_CallNoArgs(handler);
    if (result == nullptr) {
        PyErr_Clear();
        log_debug("%s: its handler raised; no more calls", what);
        if (handler_ == handler) set(nullptr, kNever);
    } else {
        if (handler_ == handler) due_ns_.store(due_from(result));
        Py_DECREF(result);
    }
    Py_DECREF(handler);
}

void DrainTimer::forget_after_fork() {
    due_ns_.store(kNever);
    Py_CLEAR(handler_);
}

DrainTimer& python_drain_timer() {
    static DrainTimer timer;
    return timer;
}

}  // namespace spprof
