// log.h: spprof's debug log (SPPROF_DEBUG=1) and warnings, to stderr.
//
// Normal context only: Python calls, the drain thread, the Mach sampler thread outside its
// suspended window. Never from a signal handler (it formats with vsnprintf and locks stdio).
#pragma once

namespace spprof {

void log_set_debug(bool on);
bool log_debug_enabled();
void log_debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warning(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// The calling thread logs nothing from now on: its descriptor table is its own (platform.h,
// platform_own_fd_table_enter), with no stderr in it.
void log_mute_this_thread();

}  // namespace spprof
