// thread_start_hook.cpp: the C method in place of threading.Thread._bootstrap_inner (see thread_start_hook.h).
#include "thread_start_hook.h"

namespace spprof {

namespace {

// self: the tuple (original, register_thread). Returns original(thread)'s result.
PyObject* bootstrap_inner(PyObject* pair, PyObject* thread) {
    PyObject* registered = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(pair, 1), thread, nullptr);
    if (registered == nullptr)
        PyErr_Clear();  // the registrar catches its own errors; never let one stop the thread
    Py_XDECREF(registered);
    return PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(pair, 0), thread, nullptr);
}

PyMethodDef kBootstrapInnerDef = {"_bootstrap_inner", bootstrap_inner, METH_O,
                                  "spprof: registers the new thread, then runs threading's _bootstrap_inner"};

PyObject* wrapped_function(PyObject* obj) {
    if (obj == nullptr || !PyInstanceMethod_Check(obj)) return nullptr;
    PyObject* fn = PyInstanceMethod_GET_FUNCTION(obj);
    if (!PyCFunction_Check(fn)) return nullptr;
    if (reinterpret_cast<PyCFunctionObject*>(fn)->m_ml != &kBootstrapInnerDef) return nullptr;
    return fn;
}

}  // namespace

PyObject* thread_start_hook_new(PyObject* original, PyObject* register_thread) {
    PyObject* pair = PyTuple_Pack(2, original, register_thread);
    if (pair == nullptr) return nullptr;
    PyObject* fn = PyCFunction_NewEx(&kBootstrapInnerDef, pair, nullptr);
    Py_DECREF(pair);
    if (fn == nullptr) return nullptr;
    PyObject* method = PyInstanceMethod_New(fn);  // binds like a function: self is the Thread
    Py_DECREF(fn);
    return method;
}

bool is_thread_start_hook(PyObject* obj) { return wrapped_function(obj) != nullptr; }

PyObject* thread_start_hook_original(PyObject* obj) {
    PyObject* fn = wrapped_function(obj);
    if (fn == nullptr) return nullptr;
    return PyTuple_GET_ITEM(PyCFunction_GET_SELF(fn), 0);
}

}  // namespace spprof
