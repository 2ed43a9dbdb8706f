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
#include <vector>

namespace spprof {

// GIL held. threading._active, held for the length of one look-up or refresh.
class ThreadingNames {
public:
    ThreadingNames();  // empty when threading is not imported (or has no _active dict)
    ~ThreadingNames() {
        Py_XDECREF(active_);
        Py_XDECREF(name_attr_);
    }
    ThreadingNames(const ThreadingNames&) = delete;
    ThreadingNames& operator=(const ThreadingNames&) = delete;

    bool available() const { return active_ != nullptr; }
    // Sets *out to the name of the threading.Thread with this ident, while threading still
    // knows it; otherwise returns false and leaves *out alone. Never leaves an exception set.
    bool name_of(unsigned long ident, std::string* out) const;
    // Calls fn(ident, name) for every Thread threading knows whose _name is a str (borrowed
    // for the call), in one walk of _active: a look-up per thread cost more (idents are stack
    // addresses, so their int hashes share their low bits and _active's probes collide).
    // Never leaves an exception set.
    template <class Fn>
    void for_each_name(Fn&& fn) const;

private:
    // The Thread's _name when it is a str (a new reference), else nullptr, no error set.
    PyObject* name_str(PyObject* thread) const;

    PyObject* active_ = nullptr;     // a new reference, or nullptr
    PyObject* name_attr_ = nullptr;  // "_name", interned; a new reference, or nullptr
};

template <class Fn>
void ThreadingNames::for_each_name(Fn&& fn) const {
    if (active_ == nullptr) return;
    Py_ssize_t pos = 0;
    PyObject* key = nullptr;
    PyObject* thread = nullptr;
    while (PyDict_Next(active_, &pos, &key, &thread)) {
        const unsigned long ident = PyLong_AsUnsignedLong(key);
        if (ident == static_cast<unsigned long>(-1) && PyErr_Occurred()) {
            PyErr_Clear();
            continue;
        }
        // A Thread subclass's _name may be code that changes _active: keep this one alive.
        Py_INCREF(thread);
        PyObject* name = name_str(thread);
        if (name != nullptr) fn(ident, name);
        Py_XDECREF(name);
        Py_DECREF(thread);
        PyErr_Clear();
    }
}

// Live thread records by threading ident, for one refresh of their names: open addressing
// in one reused array (no allocation per pass once it has grown). Several records may share
// an ident (a pthread_t reused before the scan retired the thread that had it): find() gives
// each of them, as the look-up per record did.
class IdentIndex {
public:
    void clear_for(size_t count);  // room for `count` records, every slot empty
    void add(unsigned long ident, uint32_t id);
    template <class Fn>
    void find(unsigned long ident, Fn&& fn) const {
        if (slots_.empty()) return;
        for (size_t i = slot_of(ident);; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.id == kEmpty) return;
            if (s.ident == ident) fn(s.id);
        }
    }
    size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }

private:
    static constexpr uint32_t kEmpty = UINT32_MAX;
    struct Slot {
        unsigned long ident;
        uint32_t id;
    };
    size_t slot_of(unsigned long ident) const {
        // Fibonacci hashing: the high bits of the product mix every bit of the ident in.
        return static_cast<size_t>((static_cast<uint64_t>(ident) * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
    }
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    unsigned shift_ = 64;
};

// Normal context. The OS's name of a thread as UTF-8 text (utf8_text.h), else "Thread-<tid>".
std::string os_thread_name(uint64_t tid);

}  // namespace spprof
