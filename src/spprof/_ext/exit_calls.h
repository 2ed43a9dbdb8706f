// exit_calls.h: spprof's stand-ins for the calls that end or replace the process without
// running any Python finaliser (os._exit, os.execv, os.execve), and for _signal.signal.
//
// os._exit and os.exec* skip atexit: only code that runs before them can write the profile.
// While a session with an output runs, `os._exit`, `os.execv` and `os.execve` (and the same
// names in `posix`, the module they come from) are replaced by builtins made from the
// originals' own method definitions: same name, module, `__self__`, docstring and text
// signature, no Python frame in a traceback. Every other os.exec* (execl, execle, execlp,
// execvp, execvpe) looks execv/execve up in the os module when called, so it is covered too.
// A stand-in calls hook("before", name, args, kwargs) (args a tuple, kwargs a dict or None);
// a true result means the hook acted (wrote the profile); then it calls the original with the
// same arguments, and if that raises after the hook acted (an exec that failed), it calls
// hook("failed", name, args, kwargs) and lets the exception go on unchanged.
//
// `_signal.signal` (which `signal.signal` calls) gets a stand-in while the exit signals are
// watched (exit_signals.h): after the program's call succeeds, a watched signal whose action
// it set to SIG_DFL gets spprof's handler back (platform_exit_signals_reclaim). Python's own
// table, and so `signal.getsignal` and the value `signal.signal` returns, is untouched.
//
// Removal puts an original back only where the stand-in still is: a replacement the program
// made meanwhile wins. A stand-in the program kept a reference to goes on forwarding.
// Threads: all GIL held (main interpreter).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "error.h"

namespace spprof {

// Install the os._exit / os.execv / os.execve stand-ins with `hook`, or swap the hook if
// they are in place. A name whose current object is not a builtin is left alone.
Error exit_calls_hook(PyObject* hook);
// Put the originals back (where ours still are) and drop the hook.
void exit_calls_unhook();

// Install / remove the _signal.signal stand-in. The exit-signal watcher and the session each
// hold it while they run; the last holder's unhook removes it. While it is in place, a
// successful call on the sampling signal (platform_sampling_signal) takes the signal back at
// once (platform_keep_handler: ours in front, the program's chained for signals spprof did
// not send), so spprof's ticks reach the program's handler for microseconds at most, not
// until the next drain pass (up to 50 ms).
enum class SignalCallHolder : unsigned { kExitSignals = 1, kSession = 2 };
Error signal_call_hook(SignalCallHolder who);
void signal_call_unhook(SignalCallHolder who);
// Times the stand-in took the sampling signal back since the last reset (session start).
uint64_t signal_call_retakes();
void signal_call_reset_retakes();

}  // namespace spprof
