// symbol_reads.h: module files the drain's names wait for, read on the drain thread without the GIL.
//
// A native pc's name may need its module's symbol table, read from the file once per module
// (unwind/symbolizer.h). Read under the GIL, that stops the program for as long as the file
// takes (libtorch_cpu.so: 60 ms from the page cache, twice that from disk). So the drain
// thread's pass, meeting a record whose names need a file, leaves the record in its ring and
// queues the file here (defer); once the pass has let the GIL go, the drain thread reads every
// queued file (read_queued) and asks for a pass at once; that pass installs the tables into
// the symbolizer (install) before it reads a ring. A file is queued at most once per kind
// and session: while it is queued or read, every record that needs it waits; asked again once
// installed (the module was loaded again since), the caller reads it itself, so no record
// waits twice for the same file.
//
// Threads: defer and install with the GIL (the drain), read_queued on the drain thread without
// it, which reads the files on a short-lived thread of spprof's in a descriptor table of its own
// (own_thread_run_apart: no open takes a number of the program's); a mutex (normal context
// only) hands the lists over, never held during a read.
#pragma once

// Python.h (through resolver.h) before any system header: 3.15's pyconfig.h defines
// _XOPEN_SOURCE, which clashes with the one a system header has already set.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <mutex>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../resolver.h"
#include "../unwind/symbolizer.h"

namespace spprof {

class SymbolReads final : public FileReadGate {
public:
    // GIL held. Queues what `t` wants of its file: true when the caller's record may wait for
    // it (queued now or before, not yet installed), false when its tables were installed
    // before (the caller reads the file itself, as without this).
    bool defer(const ModuleTables& t) override;
    // Drain thread, no GIL. Reads every queued file; true when one was read (a pass should
    // come at once to install it).
    bool read_queued();
    // GIL held. Every table read_queued has read, into `s`.
    void install(Symbolizer& s);
    // Files read here, and the time their reads took (the drain thread's, not the program's).
    uint64_t files_read() const;
    uint64_t read_ns() const;

private:
    mutable std::mutex mutex_;
    std::vector<ModuleTables> queued_;  // wanted, not yet read
    std::vector<ModuleTables> ready_;   // read, not yet installed
    // (path, 1: symbols, 2: starts) ever queued -> installed yet
    std::map<std::pair<std::string, int>, bool> asked_;
    static std::pair<std::string, int> key_of(const ModuleTables& t) {
        return {t.path, (t.want_symbols ? 1 : 0) | (t.want_starts ? 2 : 0)};
    }
    uint64_t files_read_ = 0;
    uint64_t read_ns_ = 0;
};

}  // namespace spprof
