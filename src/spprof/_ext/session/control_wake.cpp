// control_wake.cpp: see control_wake.h.
#include "control_wake.h"

#include <atomic>
#include <cstdint>
#include <limits>

#include "../log.h"
#include "../platform/platform.h"

namespace spprof {

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

std::atomic<int> g_fd{-1};
std::atomic<uint64_t> g_due_ns{kNever};
PyObject* g_handler = nullptr;  // GIL

// The handler's answer: seconds until its next call, or None.
uint64_t due_from(PyObject* result) {
    if (result == Py_None) return kNever;
    const double s = PyFloat_AsDouble(result);
    if (s == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return kNever;
    }
    const double ns = s <= 0 ? 0.0 : s * 1e9;
    return platform_monotonic_ns() + (ns > 3.6e12 ? static_cast<uint64_t>(3.6e12) : static_cast<uint64_t>(ns));
}

}  // namespace

void control_wake_set(int fd, PyObject* handler) {
    if (fd < 0 || handler == nullptr) {
        g_fd.store(-1);
        g_due_ns.store(kNever);
        Py_CLEAR(g_handler);
        return;
    }
    Py_INCREF(handler);
    Py_XSETREF(g_handler, handler);
    g_due_ns.store(kNever);
    g_fd.store(fd);
}

bool control_wake_due() {
    const int fd = g_fd.load();
    if (fd < 0) return false;
    return platform_monotonic_ns() >= g_due_ns.load() || platform_fd_readable(fd);
}

void control_wake_serve() {
    if (g_handler == nullptr || g_fd.load() < 0) return;
    PyObject* handler = g_handler;
    Py_INCREF(handler);  // the handler may end the listening (and drop our reference) itself
    g_due_ns.store(kNever);
    PyObject* result = PyObject_CallNoArgs(handler);
    if (result == nullptr) {
        PyErr_Clear();
        log_debug("control channel: its handler raised; no longer listening");
        if (g_handler == handler) control_wake_set(-1, nullptr);
    } else {
        if (g_handler == handler && g_fd.load() >= 0) g_due_ns.store(due_from(result));
        Py_DECREF(result);
    }
    Py_DECREF(handler);
}

void control_wake_forget_after_fork() {
    g_fd.store(-1);
    g_due_ns.store(kNever);
    Py_CLEAR(g_handler);
}

}  // namespace spprof
