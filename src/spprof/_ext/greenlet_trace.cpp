// greenlet_trace.cpp: the trace function of `--greenlets` (see greenlet_trace.h).
#include "greenlet_trace.h"

#include <cstdint>

#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>  // PyFrame_GetBack (Python.h declares it from 3.11 on)
#endif

#include "platform/platform.h"
#include "session/python_tick.h"

namespace spprof {

namespace {

enum : Py_ssize_t { kIdent, kPrevious, kKnown, kLastSwitch, kNote, kActive, kStateSize };
enum : Py_ssize_t { kAt, kTarget, kCode, kLasti, kCallerCode, kCallerLasti, kQueuedOrigin, kRecordSize };

// The byte offset of the frame's last instruction, as frame.f_lasti and code.co_lines() count.
// Before 3.11 there is no accessor: the attribute, not the struct (whose unit changed in 3.10).
long frame_lasti(PyFrameObject* frame) {
#if PY_VERSION_HEX >= 0x030B0000
    return PyFrame_GetLasti(frame);
#else
    PyObject* v = PyObject_GetAttrString(reinterpret_cast<PyObject*>(frame), "f_lasti");
    const long lasti = v != nullptr ? PyLong_AsLong(v) : -1;
    Py_XDECREF(v);
    if (lasti == -1) PyErr_Clear();
    return lasti;
#endif
}

// record[at] = the frame's code (None without a frame), record[at + 1] = the offset of its
// instruction, not its line: the census turns the few it reads into lines (a line number is
// a search of the code's line table, at every switch).
void set_code_and_lasti(PyObject* record, Py_ssize_t at, PyFrameObject* frame) {
    PyObject* code = frame != nullptr ? reinterpret_cast<PyObject*>(PyFrame_GetCode(frame)) : nullptr;
    if (code == nullptr) {
        code = Py_None;
        Py_INCREF(code);
    }
    PyObject* lasti = PyLong_FromLong(frame != nullptr ? frame_lasti(frame) : -1);
    if (lasti == nullptr) {
        lasti = Py_None;
        Py_INCREF(lasti);
    }
    PyTuple_SET_ITEM(record, at, code);
    PyTuple_SET_ITEM(record, at + 1, lasti);
}

// Record the switch and note the origin; errors are cleared (greenlet would raise them in the
// program's switch).
void note_switch(PyObject* state, PyObject* origin, PyObject* target) {
    PyObject* ident = PyTuple_GET_ITEM(state, kIdent);
    PyObject* last_switch = PyTuple_GET_ITEM(state, kLastSwitch);
    const uint64_t now = platform_monotonic_ns();
    // The greenlet running when the call was queued (its id: nothing of the program's is kept
    // alive here): this switch's origin if it is the first switch since, else what the one
    // before recorded.
    PyObject* queued_origin = nullptr;
    PyObject* last = PyDict_GetItemWithError(last_switch, ident);  // borrowed
    if (last != nullptr && PyTuple_Check(last) && PyTuple_GET_SIZE(last) == kRecordSize) {
        const uint64_t at = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(last, kAt));
        if (at != static_cast<uint64_t>(-1) && at > python_tick_queued_ns()) {
            queued_origin = PyTuple_GET_ITEM(last, kQueuedOrigin);
            Py_INCREF(queued_origin);
        }
    }
    PyErr_Clear();
    if (queued_origin == nullptr) queued_origin = PyLong_FromVoidPtr(origin);
    // Where the target resumes: its code and instruction, not its frame (a frame kept here
    // would keep its locals alive after it returns: a file the program closes by dropping
    // it would stay open).
    // And its caller's: the program's line when the wait was in a library (gevent.sleep).
    PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());  // new reference or null
    PyFrameObject* caller = frame != nullptr ? PyFrame_GetBack(frame) : nullptr;  // new or null
    PyObject* record = PyTuple_New(kRecordSize);
    PyObject* at = PyLong_FromUnsignedLongLong(now);
    if (record != nullptr && at != nullptr && queued_origin != nullptr) {
        Py_INCREF(target);
        PyTuple_SET_ITEM(record, kAt, at);
        PyTuple_SET_ITEM(record, kTarget, target);
        set_code_and_lasti(record, kCode, frame);
        set_code_and_lasti(record, kCallerCode, caller);
        PyTuple_SET_ITEM(record, kQueuedOrigin, queued_origin);
        if (PyErr_Occurred() || PyDict_SetItem(last_switch, ident, record) < 0) PyErr_Clear();
    } else {
        Py_XDECREF(at);
        Py_XDECREF(queued_origin);
        PyErr_Clear();
    }
    Py_XDECREF(record);
    Py_XDECREF(caller);
    Py_XDECREF(frame);
    PyObject* key = PyLong_FromVoidPtr(origin);
    if (key == nullptr) {
        PyErr_Clear();
        return;
    }
    const int known = PyDict_Contains(PyTuple_GET_ITEM(state, kKnown), key);
    Py_DECREF(key);
    if (known == 0) {
        PyObject* r = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(state, kNote), origin, ident, nullptr);
        Py_XDECREF(r);
    }
    PyErr_Clear();
}

PyObject* trace_call(PyObject* state, PyObject* call_args) {
    PyObject* event = nullptr;
    PyObject* args = nullptr;
    if (!PyArg_UnpackTuple(call_args, "greenlet_trace", 2, 2, &event, &args)) return nullptr;
    if (PyList_GET_ITEM(PyTuple_GET_ITEM(state, kActive), 0) != Py_None && PyTuple_Check(args) &&
        PyTuple_GET_SIZE(args) == 2)
        note_switch(state, PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1));
    PyObject* previous = PyTuple_GET_ITEM(state, kPrevious);
    if (previous == Py_None) Py_RETURN_NONE;
    return PyObject_CallFunctionObjArgs(previous, event, args, nullptr);  // theirs to raise
}

PyMethodDef kTraceDef = {"spprof_greenlet_trace", trace_call, METH_VARARGS,
                         "spprof --greenlets: notes the greenlet switching out, then calls the trace it replaced"};

}  // namespace

PyObject* greenlet_trace_new(PyObject* state) {
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != kStateSize ||
        !PyDict_Check(PyTuple_GET_ITEM(state, kKnown)) || !PyDict_Check(PyTuple_GET_ITEM(state, kLastSwitch)) ||
        !PyCallable_Check(PyTuple_GET_ITEM(state, kNote)) || !PyList_Check(PyTuple_GET_ITEM(state, kActive)) ||
        PyList_GET_SIZE(PyTuple_GET_ITEM(state, kActive)) != 1) {
        PyErr_SetString(PyExc_TypeError,
                        "greenlet_trace: state must be (ident, previous, known dict, last_switch dict, note, [active])");
        return nullptr;
    }
    return PyCFunction_NewEx(&kTraceDef, state, nullptr);
}

PyObject* greenlet_trace_state(PyObject* obj) {
    if (obj == nullptr || !PyCFunction_Check(obj)) return nullptr;
    if (reinterpret_cast<PyCFunctionObject*>(obj)->m_ml != &kTraceDef) return nullptr;
    return PyCFunction_GET_SELF(obj);
}

}  // namespace spprof
