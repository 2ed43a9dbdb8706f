// control_wake.cpp: see control_wake.h.
#include "control_wake.h"

#include <atomic>

#include "../platform/platform.h"
#include "drain_timer.h"

namespace spprof {

namespace {

std::atomic<int> g_fd{-1};
DrainTimer g_timer;  // the handler, and the time it asked for

}  // namespace

void control_wake_set(int fd, PyObject* handler) {
    if (fd < 0 || handler == nullptr) {
        g_fd.store(-1);
        g_timer.set(nullptr, DrainTimer::kNever);
        return;
    }
    g_timer.set(handler, DrainTimer::kNever);
    g_fd.store(fd);
}

bool control_wake_due() {
    const int fd = g_fd.load();
    if (fd < 0) return false;
    return g_timer.due(platform_monotonic_ns()) || platform_fd_readable(fd);
}

void control_wake_serve() {
    if (g_fd.load() < 0) return;
    g_timer.call("control channel");
    if (!g_timer.has_handler()) g_fd.store(-1);  // it raised, or ended the listening itself
}

void control_wake_forget_after_fork() {
    g_fd.store(-1);
    g_timer.forget_after_fork();
}

}  // namespace spprof
