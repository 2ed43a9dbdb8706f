// log.cpp: see log.h.
#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>

namespace spprof {
namespace {

// The same words spprof._debug accepts: 1, true, yes, on (any case); anything else is off.
bool env_flag_on(const char* v) {
    if (v == nullptr) return false;
    char word[8];
    size_t n = 0;
    while (v[n] != '\0' && n + 1 < sizeof word) {
        word[n] = static_cast<char>(std::tolower(static_cast<unsigned char>(v[n])));
        ++n;
    }
    if (v[n] != '\0') return false;  // longer than any accepted word
    word[n] = '\0';
    return std::strcmp(word, "1") == 0 || std::strcmp(word, "true") == 0 ||
           std::strcmp(word, "yes") == 0 || std::strcmp(word, "on") == 0;
}

std::atomic<bool> g_debug{env_flag_on(std::getenv("SPPROF_DEBUG"))};
thread_local bool t_muted = false;  // normal context only (log.h)

void vlog(const char* level, const char* fmt, va_list ap) {
    if (t_muted) return;
    char buf[1024];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    std::fprintf(stderr, "[spprof %s] %s\n", level, buf);
    std::fflush(stderr);
}

}  // namespace

void log_mute_this_thread() { t_muted = true; }

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
