// exit_calls.cpp: the stand-ins for os._exit, os.execv, os.execve and _signal.signal
// (exit_calls.h).
#include "exit_calls.h"

#include <initializer_list>

#include "platform/platform.h"

namespace spprof {
namespace {

enum Kind { kExit, kExecv, kExecve, kSignal, kKindCount };

// One wrapped builtin. Process-wide on purpose: the functions wrapped are the process's own
// (one os module), and a stand-in kept by the program must reach its original at any time.
struct Slot {
    const char* module;     // where the original lives ("posix"); os re-exports it
    const char* name;       // attribute name in both modules
    PyObject* original;     // strong reference, kept for the life of the process once taken
    PyObject* stand_in;     // our builtin, or nullptr when not made yet
    PyMethodDef def;        // the stand-in's definition: the original's name and doc
    bool installed;
};

PyObject* call_exit(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* call_execv(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* call_execve(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* call_signal(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);

Slot g_slots[kKindCount] = {
    {"posix", "_exit", nullptr, nullptr, {}, false},
    {"posix", "execv", nullptr, nullptr, {}, false},
    {"posix", "execve", nullptr, nullptr, {}, false},
    {"_signal", "signal", nullptr, nullptr, {}, false},
};
// METH_FASTCALL | METH_KEYWORDS, spelled out: CPython renamed its typedef in 3.13.
using FastCallKw = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);
FastCallKw const kTrampolines[kKindCount] = {call_exit, call_execv, call_execve, call_signal};

PyObject* g_hook = nullptr;  // strong reference while the exit calls are hooked

// The stand-in of slot k, made once from the original in `module` (a builtin).
PyObject* stand_in(Kind k, PyObject* module) {
    Slot& s = g_slots[k];
    if (s.stand_in != nullptr) return s.stand_in;
    PyObject* original = PyObject_GetAttrString(module, s.name);
    if (original == nullptr) return nullptr;
    if (!PyCFunction_Check(original)) {
        Py_DECREF(original);
        PyErr_Format(PyExc_RuntimeError, "%s.%s is not the builtin any more", s.module, s.name);
        return nullptr;
    }
    auto* fn = reinterpret_cast<PyCFunctionObject*>(original);
    s.def.ml_name = fn->m_ml->ml_name;
    s.def.ml_doc = fn->m_ml->ml_doc;  // the docstring and text signature inspect reads
    s.def.ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(kTrampolines[k]));
    s.def.ml_flags = METH_FASTCALL | METH_KEYWORDS;
    // The original's __self__ (its module) and __module__, so the stand-in reads the same.
    s.stand_in = PyCFunction_NewEx(&s.def, fn->m_self, fn->m_module);
    if (s.stand_in == nullptr) {
        Py_DECREF(original);
        return nullptr;
    }
    s.original = original;
    return s.stand_in;
}

// Replace `name` in `module` by the stand-in where it is still the original.
bool swap_in(PyObject* module, const Slot& s) {
    PyObject* cur = PyObject_GetAttrString(module, s.name);
    if (cur == nullptr) {
        PyErr_Clear();
        return true;  // not there (another platform's os): nothing to cover
    }
    const bool ours_to_take = cur == s.original;
    Py_DECREF(cur);
    return !ours_to_take || PyObject_SetAttrString(module, s.name, s.stand_in) == 0;
}

void swap_out(PyObject* module, const Slot& s) {
    PyObject* cur = PyObject_GetAttrString(module, s.name);
    if (cur == nullptr) {
        PyErr_Clear();
        return;
    }
    if (cur == s.stand_in && PyObject_SetAttrString(module, s.name, s.original) != 0) PyErr_Clear();
    Py_DECREF(cur);
}

Error install(Kind k) {
    Slot& s = g_slots[k];
    if (s.installed) return Error::none();
    PyObject* home = PyImport_ImportModule(s.module);
    if (home == nullptr) {
        PyErr_Clear();
        return Error::runtime("could not import the module of a call spprof covers");
    }
    const bool made = stand_in(k, home) != nullptr;
    bool ok = made && swap_in(home, s);
    if (ok && k != kSignal) {
        PyObject* os = PyImport_ImportModule("os");
        ok = os != nullptr && swap_in(os, s);
        Py_XDECREF(os);
    }
    Py_DECREF(home);
    if (!ok) {
        PyErr_Clear();
        return Error::runtime("could not cover os._exit / os.exec* / signal.signal");
    }
    s.installed = true;
    return Error::none();
}

void uninstall(Kind k) {
    Slot& s = g_slots[k];
    if (!s.installed) return;
    s.installed = false;
    PyObject* home = PyImport_ImportModule(s.module);
    if (home != nullptr) {
        swap_out(home, s);
        Py_DECREF(home);
    }
    if (k != kSignal) {
        PyObject* os = PyImport_ImportModule("os");
        if (os != nullptr) {
            swap_out(os, s);
            Py_DECREF(os);
        }
    }
    PyErr_Clear();
}

// hook(event, name, args, kwargs); true when it returned a true value. Never raises: a hook
// that fails is reported as unraisable and the program's call goes on.
bool call_hook(PyObject* hook, const char* event, const Slot& s, PyObject* args, PyObject* kwargs) {
    PyObject* r = PyObject_CallFunction(hook, "ssOO", event, s.name, args, kwargs);
    if (r == nullptr) {
        PyErr_WriteUnraisable(hook);
        return false;
    }
    const int truth = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (truth < 0) PyErr_Clear();
    return truth == 1;
}

// The exit and exec stand-ins: the hook first, then the original, then "failed" if needed.
PyObject* forward(Kind k, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    const Slot& s = g_slots[k];
    // A local reference: the hook may unhook itself (the session stops) before "failed".
    PyObject* hook = g_hook;
    if (hook == nullptr) return PyObject_Vectorcall(s.original, args, nargs, kwnames);
    Py_INCREF(hook);
    PyObject* tuple = PyTuple_New(nargs);
    PyObject* kwargs = kwnames != nullptr ? PyDict_New() : (Py_INCREF(Py_None), Py_None);
    bool acted = false;
    if (tuple != nullptr && kwargs != nullptr) {
        for (Py_ssize_t i = 0; i < nargs; ++i) {
            Py_INCREF(args[i]);
            PyTuple_SET_ITEM(tuple, i, args[i]);
        }
        bool ok = true;
        const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
        for (Py_ssize_t i = 0; i < nkw && ok; ++i)
            ok = PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) == 0;
        if (ok) acted = call_hook(hook, "before", s, tuple, kwargs);
    }
    PyErr_Clear();  // only from building the arguments: the call below decides what raises
    PyObject* result = PyObject_Vectorcall(s.original, args, nargs, kwnames);
    if (result == nullptr && acted) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        call_hook(hook, "failed", s, tuple, kwargs);
        PyErr_Restore(type, value, tb);
    }
    Py_XDECREF(tuple);
    Py_XDECREF(kwargs);
    Py_DECREF(hook);
    return result;
}

PyObject* call_exit(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    return forward(kExit, args, nargs, kwnames);
}
PyObject* call_execv(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    return forward(kExecv, args, nargs, kwnames);
}
PyObject* call_execve(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    return forward(kExecve, args, nargs, kwnames);
}

unsigned g_signal_holders = 0;   // SignalCallHolder bits of the stand-in's holders (GIL)
uint64_t g_signal_retakes = 0;   // sampling signal taken back by the stand-in (GIL)

// _signal.signal(signalnum, handler): the original, then our exit handler back where the
// program restored SIG_DFL, and our sampling handler back in front of the program's.
PyObject* call_signal(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    PyObject* result = PyObject_Vectorcall(g_slots[kSignal].original, args, nargs, kwnames);
    if (result != nullptr && nargs >= 1 && PyLong_Check(args[0])) {
        const long signo = PyLong_AsLong(args[0]);
        if (signo == -1 && PyErr_Occurred()) {
            PyErr_Clear();
        } else if (signo > 0 && signo < 1024) {
            platform_exit_signals_reclaim(static_cast<int>(signo));
            if (signo == platform_sampling_signal() && platform_keep_handler()) ++g_signal_retakes;
        }
    }
    return result;
}

}  // namespace

Error exit_calls_hook(PyObject* hook) {
    for (Kind k : {kExit, kExecv, kExecve}) {
        Error e = install(k);
        if (!e.ok()) {
            exit_calls_unhook();
            return e;
        }
    }
    Py_INCREF(hook);
    PyObject* old = g_hook;
    g_hook = hook;
    Py_XDECREF(old);
    return Error::none();
}

void exit_calls_unhook() {
    for (Kind k : {kExit, kExecv, kExecve}) uninstall(k);
    Py_CLEAR(g_hook);
}

Error signal_call_hook(SignalCallHolder who) {
    Error e = install(kSignal);
    if (e.ok()) g_signal_holders |= static_cast<unsigned>(who);
    return e;
}

void signal_call_unhook(SignalCallHolder who) {
    g_signal_holders &= ~static_cast<unsigned>(who);
    if (g_signal_holders == 0) uninstall(kSignal);
}

uint64_t signal_call_retakes() { return g_signal_retakes; }

void signal_call_reset_retakes() { g_signal_retakes = 0; }

}  // namespace spprof
