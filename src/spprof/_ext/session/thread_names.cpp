// thread_names.cpp: thread names from threading._active and the OS (see thread_names.h).
#include "thread_names.h"

#include "../platform/platform.h"
#include "../utf8_text.h"
#include "proc_reads.h"

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
    name_attr_ = PyUnicode_InternFromString("_name");
    if (name_attr_ == nullptr) PyErr_Clear();
}

PyObject* ThreadingNames::name_str(PyObject* thread) const {
    PyObject* name = name_attr_ != nullptr ? PyObject_GetAttr(thread, name_attr_) : nullptr;
    if (name != nullptr && !PyUnicode_Check(name)) Py_CLEAR(name);
    PyErr_Clear();
    return name;
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
    Py_INCREF(thread);
    PyObject* name = name_str(thread);
    Py_ssize_t size = 0;
    const char* utf8 = name != nullptr ? PyUnicode_AsUTF8AndSize(name, &size) : nullptr;
    if (utf8 != nullptr) out->assign(utf8, static_cast<size_t>(size));
    Py_XDECREF(name);
    Py_DECREF(thread);
    PyErr_Clear();
    return utf8 != nullptr;
}

void IdentIndex::clear_for(size_t count) {
    size_t want = 16;
    unsigned bits = 4;
    while (want < 2 * count) {
        want <<= 1;
        ++bits;
    }
    // Kept between passes; given back when the threads it was grown for are long gone.
    if (slots_.capacity() > 8 * want) std::vector<Slot>().swap(slots_);
    slots_.assign(want, Slot{0, kEmpty});
    mask_ = want - 1;
    shift_ = 64 - bits;
}

void IdentIndex::add(unsigned long ident, uint32_t id) {
    size_t i = slot_of(ident);
    while (slots_[i].id != kEmpty) i = (i + 1) & mask_;
    slots_[i] = Slot{ident, id};
}

std::string os_thread_name(uint64_t tid) {
    char buf[64];
    // Bytes a C library chose (pthread_setname_np), not necessarily UTF-8: the export decodes
    // every name strictly, and one Latin-1 name made stop() raise and lose the profile.
    if (proc_thread_name(tid, buf, sizeof buf) > 0) return utf8_text(buf);
    return "Thread-" + std::to_string(tid);
}

}  // namespace spprof
