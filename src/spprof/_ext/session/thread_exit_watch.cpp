// thread_exit_watch.cpp: the watch object (see thread_exit_watch.h).
#include "thread_exit_watch.h"

#include <cstddef>

namespace spprof {
namespace {

// The dict key: a name no Python code uses (threading.local keys are its own objects).
constexpr const char* kKey = "spprof._ext.thread_exit_watch";

struct Watch {
    PyObject_HEAD
    PyObject* owner;  // a strong reference
    ThreadExitFn on_exit;
    PyThreadState* ts;
    uint64_t tid;
};

void watch_dealloc(PyObject* self) {
    Watch* w = reinterpret_cast<Watch*>(self);
    // The callback reads a clock and updates C++ state: it neither raises nor clears an
    // exception that may be propagating while the dict is cleared.
    if (w->on_exit != nullptr && w->owner != nullptr) w->on_exit(w->owner, w->ts, w->tid);
    Py_CLEAR(w->owner);
    PyTypeObject* type = Py_TYPE(self);
    PyObject_Free(self);
    Py_DECREF(type);
}

PyTypeObject* watch_type() {
    // A heap type made once and kept: instances hold a reference to it (watch_dealloc drops
    // it). Not GC-tracked: a watch holds only the module, which never refers back to it.
    static PyTypeObject* type = nullptr;
    if (type == nullptr) {
        static PyType_Slot slots[] = {
            {Py_tp_dealloc, reinterpret_cast<void*>(watch_dealloc)},
            {Py_tp_doc, const_cast<char*>("spprof: deallocated when its thread's state is cleared.")},
            {0, nullptr}};
        static PyType_Spec spec = {"spprof._ext._ThreadExitWatch", static_cast<int>(sizeof(Watch)), 0,
                                   Py_TPFLAGS_DEFAULT, slots};
        type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
    }
    return type;
}

}  // namespace

bool thread_exit_watch_install(PyObject* owner, ThreadExitFn on_exit, uint64_t tid) {
    PyTypeObject* type = watch_type();
    if (type == nullptr) {
        PyErr_Clear();
        return false;
    }
    PyObject* dict = PyThreadState_GetDict();  // borrowed; creates it
    if (dict == nullptr) {
        PyErr_Clear();
        return false;
    }
    // One from an earlier session on this thread serves: it calls the module, which passes
    // the end to whichever session runs then.
    PyObject* present = PyDict_GetItemString(dict, kKey);  // borrowed
    if (present != nullptr && Py_TYPE(present) == type) return true;
    Watch* w = PyObject_New(Watch, type);
    if (w == nullptr) {
        PyErr_Clear();
        return false;
    }
    Py_INCREF(owner);
    w->owner = owner;
    w->on_exit = on_exit;
    w->ts = PyThreadState_Get();
    w->tid = tid;
    const int rc = PyDict_SetItemString(dict, kKey, reinterpret_cast<PyObject*>(w));
    Py_DECREF(w);
    if (rc < 0) {
        PyErr_Clear();
        return false;
    }
    return true;
}

}  // namespace spprof
