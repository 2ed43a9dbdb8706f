// thread_exit_watch.h: notice a hooked thread's end while its CPU clock can still be read.
//
// A thread made by threading ends with PyThreadState_Clear on itself, GIL held, which drops
// its thread-state dict. A small object left in that dict is deallocated right there: the
// thread's last moment that runs our code and can read its own clock. Without it the session
// learns of the end from the next scan, when the clock is gone, and an ended thread's CPU
// time was the CPU timer's count: up to an interval short, more when scheduler ticks missed
// the thread's last expiry. Normal context, GIL held. Never on the signal path.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace spprof {

// Called when a watch is deallocated: `owner` as given to thread_exit_watch_install, `ts` and
// `tid` the thread it was installed on. The dict is also cleared by other threads (the
// forking thread in a child, finalization): the callback checks it runs on `ts`.
using ThreadExitFn = void (*)(PyObject* owner, PyThreadState* ts, uint64_t tid);

// GIL held, on the thread to watch. Puts a watch holding a reference to `owner` in the
// current thread state's dict, unless one is there from an earlier session. Returns false,
// with no exception left set, if that failed: the thread is then simply not watched.
bool thread_exit_watch_install(PyObject* owner, ThreadExitFn on_exit, uint64_t tid);

}  // namespace spprof
