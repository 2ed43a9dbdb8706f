// exit_dump.h: the profile written without the GIL when an exit signal finds it held.
//
// When SIGTERM, SIGHUP or SIGQUIT arrives while C code holds the GIL longer than the
// exit-signal watcher waits (exit_signals.h, 2 s), no Python writer can run. What the drain
// has already put in the session (resolved frames and their strings, interned stacks, sample
// rows, thread records) is plain C++ memory: exit_dump_write() writes it from the watcher
// thread in the lossless .spprof format (src/spprof/output/spprof_format.py, docs/formats.md;
// `spprof report` and `spprof convert` read it). Not in it: the samples still in the rings
// (taken since the last drain pass, at most one drain interval) and what Python does at
// stop() (dropping spprof's own samples, hiding the CLI's runner frames, --idle / --gil);
// stats carry `written_without_gil: 1`.
//
// The session must not change while it is read. Every path that changes it (all hold the
// GIL: the drain pass, register, a thread's exit, stop) holds a SessionMutation. The writer
// freezes first: from then on a new mutation parks its thread forever (the process is about
// to die by the signal), and one already in flight is waited for, briefly; if it does not
// finish, nothing is written.
#pragma once

// Before any system header: pyconfig.h defines _POSIX_C_SOURCE (the .cpp includes session.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <string>

namespace spprof {

class Session;

// GIL held, around any change to the armed session. Parks forever once a dump has begun.
class SessionMutation {
public:
    SessionMutation();
    ~SessionMutation();
    SessionMutation(const SessionMutation&) = delete;
    SessionMutation& operator=(const SessionMutation&) = delete;
};

// GIL held. From now until exit_dump_disarm(), an exit dump of `session` goes to `path`.
// `meta_members`: JSON object members the Python side knows, without braces
// ("interval_ms": 10, "mode": "cpu", "metadata": {...}).
void exit_dump_arm(const Session* session, const std::string& path, const std::string& meta_members);
// GIL held, with a SessionMutation (so never while a dump reads): forget the session.
void exit_dump_disarm();

struct ExitDumpResult {
    bool written = false;
    uint64_t samples = 0;
    std::string path;         // where it went (or was meant to)
    const char* why = "";     // when not written: a static reason
};

// The exit-signal watcher, GIL not held (someone else holds it). At most once per process.
ExitDumpResult exit_dump_write();

}  // namespace spprof
