// thread_names.cpp: thread names from threading._active and the OS (see thread_names.h).
#include "thread_names.h"

#include "../platform/platform.h"

namespace spprof {

ThreadingNames::ThreadingNames() {
    PyObject* name = PyUnicode_FromString("threading");
    if (name == nullptr) {
        PyErr_Clear();
        return;
    }
    PyObject* threading = PyImport_GetModule(name);
    Py_DECREF(name);
    if (threading == nullptr) {
        PyErr_Clear();
        return;
    }
    PyObject* active = PyObject_GetAttrString(threading, "_active");
    Py_DECREF(threading);
    if (active == nullptr || !PyDict_Check(active)) {
        Py_XDECREF(active);
        PyErr_Clear();
        return;
    }
    active_ = active;
}

bool ThreadingNames::name_of(unsigned long ident, std::string* out) const {
    if (active_ == nullptr) return false;
    PyObject* key = PyLong_FromUnsignedLong(ident);
    if (key == nullptr) {
        PyErr_Clear();
        return false;
    }
    PyObject* thread = PyDict_GetItemWithError(active_, key);  // borrowed
    Py_DECREF(key);
    if (thread == nullptr) {
        PyErr_Clear();
        return false;
    }
    bool found = false;
    PyObject* name = PyObject_GetAttrString(thread, "_name");
    if (name != nullptr && PyUnicode_Check(name)) {
        const char* utf8 = PyUnicode_AsUTF8(name);
        if (utf8 != nullptr) {
            *out = utf8;
            found = true;
        }
    }
    Py_XDECREF(name);
    PyErr_Clear();
    return found;
}

std::string os_thread_name(uint64_t tid) {
    char buf[64];
    if (platform_thread_name(tid, buf, sizeof buf) > 0) return std::string(buf);
    return "Thread-" + std::to_string(tid);
}

}  // namespace spprof
