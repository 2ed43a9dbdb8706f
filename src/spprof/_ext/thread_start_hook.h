// thread_start_hook.h: what spprof puts in place of threading.Thread._bootstrap_inner while a
// session runs, so that every new threading.Thread registers itself, on its own thread, before
// its target runs.
//
// A profile hook (threading.setprofile) did this before: the program could see it
// (threading.getprofile() was not None), undo it (threading.setprofile(None), as yappi does),
// and on 3.12+ each new thread's sys.setprofile re-instrumented the code every thread was
// running (PEP 669), so a thread start cost more the more threads were alive. This callable
// is a C method: it leaves no frame on the thread's stack and nothing in sys/threading hooks.
#pragma once

#include <Python.h>

namespace spprof {

// A method (an instancemethod: `self` is the Thread) that calls register_thread(thread), then
// original(thread), and returns what that returns. An exception from register_thread is
// dropped (the program's thread must run). New reference, or null with an exception set.
PyObject* thread_start_hook_new(PyObject* original, PyObject* register_thread);

// True when `obj` is a callable thread_start_hook_new made (stop() restores the original only
// when Thread._bootstrap_inner is still ours).
bool is_thread_start_hook(PyObject* obj);

// The `original` a thread_start_hook_new callable wraps (borrowed), or null when `obj` is not one.
PyObject* thread_start_hook_original(PyObject* obj);

}  // namespace spprof
