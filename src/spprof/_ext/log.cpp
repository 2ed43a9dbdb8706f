// log.cpp: see log.h.
#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace spprof {
namespace {

std::atomic<bool> g_debug{[] {
    const char* v = std::getenv("SPPROF_DEBUG");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}()};

void vlog(const char* level, const char* fmt, va_list ap) {
    char buf[1024];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    std::fprintf(stderr, "[spprof %s] %s\n", level, buf);
    std::fflush(stderr);
}

}  // namespace

void log_set_debug(bool on) { g_debug.store(on, std::memory_order_relaxed); }
bool log_debug_enabled() { return g_debug.load(std::memory_order_relaxed); }

void log_debug(const char* fmt, ...) {
    if (!log_debug_enabled()) return;
    va_list ap;
    va_start(ap, fmt);
    vlog("debug", fmt, ap);
    va_end(ap);
}

void log_warning(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog("warning", fmt, ap);
    va_end(ap);
}

}  // namespace spprof
