// python_tick.h: a periodic call into Python without a thread of ours (the censuses of waiting
// asyncio tasks and greenlets in wall mode, spprof/_censuses.py).
//
// When the period has passed, the call is queued (python_tick_queue_if_due, no GIL): as a
// pending call (Py_AddPendingCall) the main thread makes at its next bytecode boundary, and
// for the drain thread, which makes it with the GIL if nobody has within half a period. Both
// are needed. An event loop lets the GIL go in every select() and takes it back at once; a
// thread doing that every millisecond keeps a waiting thread (the drain) from the GIL for
// seconds, since each release restarts CPython's switch timer: the main thread makes the call
// then. A main thread blocked in select() runs no pending call: the drain gets the GIL then.
// The queueing is done by threads that never wait for the GIL (the sampler threads, through
// sampler_round.h) as well as the drain, which may be the one kept waiting.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace spprof {

// GIL held. Call `handler()` every `period_ns`; handler nullptr: no more calls (the reference
// is dropped). A handler that returns a number of seconds sets the period from then on.
void python_tick_set(PyObject* handler, uint64_t period_ns);

// Any thread, no GIL, not a signal handler (it may lock): queue the call if the period has
// passed since the last queueing.
void python_tick_queue_if_due();

// Any thread, no GIL: a call was queued half a period ago or more and nobody has made it yet
// (the main thread, which makes it at once when it runs Python, is blocked).
bool python_tick_overdue();

// Any thread: when the call being made (or the last one) was queued. A main thread blocked
// when it was makes it at its first bytecode after waking: the greenlet census tells the
// time it samples from the time the call is made (_greenlet_census.py).
uint64_t python_tick_queued_ns();

// GIL held (the drain thread): make the queued call, unless it was made already. An
// exception (the handler catches its own: this is the backstop) is logged and ends the calls.
void python_tick_serve();

// In a forked child, GIL held: the parent's handler is not the child's to call.
void python_tick_forget_after_fork();

}  // namespace spprof
