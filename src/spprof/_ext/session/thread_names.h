// thread_names.h: a sampled thread's display name: its threading.Thread's name, else the OS name.
//
// threading keeps its live Thread objects in threading._active (ident -> Thread) and forgets
// a thread when it ends; ThreadingNames reads names from there through the C API. Normal
// context, GIL held (os_thread_name needs no GIL). Never on the signal path.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <string>

namespace spprof {

// GIL held. threading._active, held for the length of one look-up or refresh.
class ThreadingNames {
public:
    ThreadingNames();  // empty when threading is not imported (or has no _active dict)
    ~ThreadingNames() { Py_XDECREF(active_); }
    ThreadingNames(const ThreadingNames&) = delete;
    ThreadingNames& operator=(const ThreadingNames&) = delete;

    bool available() const { return active_ != nullptr; }
    // Sets *out to the name of the threading.Thread with this ident, while threading still
    // knows it; otherwise returns false and leaves *out alone. Never leaves an exception set.
    bool name_of(unsigned long ident, std::string* out) const;

private:
    PyObject* active_ = nullptr;  // a new reference, or nullptr
};

// Normal context. The OS's name of a thread, else "Thread-<tid>".
std::string os_thread_name(uint64_t tid);

}  // namespace spprof
