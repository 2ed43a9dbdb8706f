// error.h: the one error convention of spprof's native code.
//
// Internal functions return an Error: a static message (never allocated, so it is safe to
// build anywhere but in a signal handler, where nothing is reported at all) and an optional
// errno. Only module.cpp turns an Error into a Python exception; sampling failures on the
// hot path are never Errors, they become counters in stats().
#pragma once

namespace spprof {

enum class ErrorKind { kNone, kValue, kRuntime, kOS, kMemory, kNotImplemented };

struct Error {
    ErrorKind kind = ErrorKind::kNone;
    const char* what = nullptr;  // static string, never owned
    int err = 0;                 // errno when kind == kOS, else 0

    bool ok() const { return kind == ErrorKind::kNone; }
    static Error none() { return Error{}; }
    static Error value(const char* w) { return Error{ErrorKind::kValue, w, 0}; }
    static Error runtime(const char* w) { return Error{ErrorKind::kRuntime, w, 0}; }
    static Error os(const char* w, int e) { return Error{ErrorKind::kOS, w, e}; }
    static Error memory(const char* w) { return Error{ErrorKind::kMemory, w, 0}; }
    static Error not_implemented(const char* w) { return Error{ErrorKind::kNotImplemented, w, 0}; }
};

}  // namespace spprof
