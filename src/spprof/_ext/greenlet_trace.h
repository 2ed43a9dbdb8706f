// greenlet_trace.h: the trace function `--greenlets` sets with greenlet.settrace on a thread
// (spprof/_greenlet_census.py). greenlet calls it at every switch, once the switch is made, on
// the target's stack. It notes the greenlet switching out (the census learns greenlets no
// other way: greenlet keeps no list of them) and the thread's last switch, then calls the
// trace function it replaced. In C: a Python one made a switch cost 3.3x (237 -> 781 ns), and
// no pending call (python_tick.h) can run inside a C function, between a switch and its note.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace spprof {

// `state` is the tuple (ident, previous, known, last_switch, note, active):
//   ident        the thread's ident (an int), the key of last_switch;
//   previous     the trace function replaced, called after (None: none);
//   known        dict id(greenlet) -> anything: the greenlets noted already;
//   last_switch  dict ident -> (time ns, target, the code of the target's innermost frame and
//                the byte offset of its instruction then (f_lasti), the same of its caller
//                (None, -1: none), the id of the greenlet that was running when the periodic
//                call was last queued); no frame and no other greenlet is kept: what the
//                program drops goes when it drops it;
//   note         note(origin, ident), called for an origin whose id is not in `known`;
//   active       a one-item list: None while no session is on (then it only calls on).
// Returns a new callable (event, args), or null with an exception set.
PyObject* greenlet_trace_new(PyObject* state);

// The state of a callable greenlet_trace_new made (borrowed), or null when `obj` is not one.
PyObject* greenlet_trace_state(PyObject* obj);

}  // namespace spprof
