// control_wake.h: the drain thread's ear for the control socket (`spprof dump PID`,
// `spprof record --pid PID`; the channel itself is spprof/_control.py).
//
// The channel listens without a thread of its own (a thread of ours in every profiled
// process would be one more for CPython's fork warning and for programs that count theirs):
// at every wake-up the drain thread asks control_wake_due(), without the GIL, whether a
// connection waits on the socket or the time the handler asked for has come, and if so
// calls control_wake_serve() with the GIL. The handler never blocks and returns the seconds
// until it wants its next call (None: only when a connection comes).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace spprof {

// GIL held. Listen on `fd` (a non-blocking listening socket the channel owns) and call
// `handler()` when due; fd < 0 or handler nullptr: listen no more (the reference is dropped).
void control_wake_set(int fd, PyObject* handler);

// Any thread, no GIL: a connection waits (or the fd failed), or the handler's time has come.
bool control_wake_due();

// GIL held, on the drain thread. One call of the handler. An exception (the handler catches
// its own: this is the backstop) is logged and ends the listening.
void control_wake_serve();

// In a forked child, GIL held: the parent's socket and handler are not the child's to call.
void control_wake_forget_after_fork();

}  // namespace spprof
