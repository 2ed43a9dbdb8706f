// symbol_reads.cpp: see symbol_reads.h.
#include "symbol_reads.h"

#include "../own_threads.h"
#include "../platform/platform.h"

namespace spprof {

bool SymbolReads::defer(const ModuleTables& t) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto asked = asked_.emplace(key_of(t), false);
    if (!asked.second) return !asked.first->second;  // waits until installed, then never again
    ModuleTables q;
    q.path = t.path;
    q.want_symbols = t.want_symbols;
    q.want_starts = t.want_starts;
    queued_.push_back(std::move(q));
    return true;
}

bool SymbolReads::read_queued() {
    std::vector<ModuleTables> work;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        work.swap(queued_);
    }
    if (work.empty()) return false;
    const uint64_t t0 = platform_monotonic_ns();
    // On a thread in a descriptor table of its own: opening a module's file takes none of the
    // program's numbers (the drain thread itself shares them: the control socket, stderr).
    own_thread_run_apart(
        [](void* p) {
            for (ModuleTables& t : *static_cast<std::vector<ModuleTables>*>(p)) read_module_tables(&t);
        },
        &work);
    const uint64_t took = platform_monotonic_ns() - t0;
    std::lock_guard<std::mutex> lock(mutex_);
    files_read_ += work.size();
    read_ns_ += took;
    for (ModuleTables& t : work) ready_.push_back(std::move(t));
    return true;
}

void SymbolReads::install(Symbolizer& s) {
    std::vector<ModuleTables> ready;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ready.swap(ready_);
    }
    for (ModuleTables& t : ready) {
        const std::pair<std::string, int> key = key_of(t);
        s.install(std::move(t));
        std::lock_guard<std::mutex> lock(mutex_);
        asked_[key] = true;
    }
}

uint64_t SymbolReads::files_read() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return files_read_;
}

uint64_t SymbolReads::read_ns() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return read_ns_;
}

}  // namespace spprof
