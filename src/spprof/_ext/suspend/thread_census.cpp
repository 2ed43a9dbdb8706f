// suspend/thread_census.cpp: ThreadCensus (see thread_census.h).
#include "thread_census.h"

#include <cstdint>
#include <cstring>
#include <new>

namespace spprof {

size_t ThreadCensus::slot(uint64_t thread_id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].thread_id == thread_id) return i;
    }
    try {
        entries_.emplace_back();
    } catch (const std::bad_alloc&) {
        return SIZE_MAX;
    }
    entries_.back().thread_id = thread_id;
    return entries_.size() - 1;
}

void ThreadCensus::set_name(size_t slot, const char* name) {
    if (name == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (slot >= entries_.size()) return;
    char* dst = entries_[slot].name;
    std::strncpy(dst, name, kThreadNameBytes - 1);
    dst[kThreadNameBytes - 1] = '\0';
}

void ThreadCensus::observe_cpu(size_t slot, uint64_t cpu_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    if (slot >= entries_.size()) return;
    CensusEntry& e = entries_[slot];
    if (!e.cpu_known) {
        e.cpu_first_ns = cpu_ns;
        e.cpu_known = true;
    }
    e.cpu_last_ns = cpu_ns;
}

void ThreadCensus::add_sample(size_t slot) {
    std::lock_guard<std::mutex> lock(mu_);
    if (slot < entries_.size()) ++entries_[slot].samples;
}

size_t ThreadCensus::copy(CensusEntry* out, size_t cap) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < entries_.size() && i < cap; ++i) out[i] = entries_[i];
    return entries_.size();
}

size_t ThreadCensus::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
}

void ThreadCensus::clear() {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.clear();
}

}  // namespace spprof
