// os_thread_scan.cpp: the session's threads beyond Python's thread list (see session_threads.h).
//
// Every OS thread of the process is sampled, not only those with a Python thread state:
// OpenMP, OpenBLAS, MKL, rayon and Arrow pools, threads a C library starts before or after
// start(). The drain's scan lists /proc/self/task (platform_os_threads) after Python's thread
// list; a thread that is neither sampled through a state nor spprof's own (own_threads.h) gets
// a native-only ThreadCtx (no tstate; its kernel tid, with its start time against tid reuse,
// is its identity) and the same per-thread CPU timer. Its captures walk whatever Python state
// it holds at that moment (PyGILState_Ensure from C), else record its native stack (native
// mode) under a frame naming it, <thread "OMP worker 3">. A Python thread whose state goes
// while its OS thread lives on (a C thread that called PyGILState_Release) continues as a
// native-only thread with the same record: one thread, its whole CPU time. A thread that
// blocks the sampling signal is left alone (no timer: a real-time signal pending forever also
// counts against RLIMIT_SIGPENDING) and reported. GIL held, like the rest of SessionThreads.
// session_threads.h (Python.h) before any system header, as Python requires: 3.15's
// pyconfig.h defines _XOPEN_SOURCE 800, which clashes with the 700 a system header has set.
#include "session_threads.h"

#include <algorithm>
#include <cerrno>
#include <thread>

#include "../log.h"
#include "../own_threads.h"
#include "../platform/platform.h"
#include "proc_reads.h"

namespace spprof {

void SessionThreads::prelist_os_threads() {
    prelisted_ok_ = platform_os_threads(&prelisted_);
    prelisted_ready_ = true;
}

bool SessionThreads::scan_os_threads(bool prelisted) {
    if (!os_scan_supported_) return false;
    // A list taken before the GIL was: a thread that ended since is dated 0 or found retired
    // below (ended_tids_), one that started since is the next pass's or threading's hook's.
    // prelisted_* only on the drain thread: another thread's pass (periodic()) lists itself.
    bool listed_ok;
    if (prelisted && prelisted_ready_) {
        os_found_.swap(prelisted_);
        listed_ok = prelisted_ok_;
        prelisted_ready_ = false;
        // Read here, by its only user: memory_bytes() may run on another thread (stats())
        // while the drain thread fills prelisted_ without the GIL.
        prelisted_bytes_ = prelisted_.capacity() * sizeof(OsThread);
    } else {
        listed_ok = platform_os_threads(&os_found_);
    }
    if (!listed_ok) {
        os_scan_supported_ = false;
        log_debug("threads without a Python state are not sampled on this platform");
        return false;
    }
    std::sort(os_found_.begin(), os_found_.end(), [](const OsThread& a, const OsThread& b) { return a.tid < b.tid; });
    ++os_passes_;
    for (auto e = ended_tids_.begin(); e != ended_tids_.end();) {
        if (os_passes_ - e->second > 2) {
            e = ended_tids_.erase(e);
        } else {
            ++e;
        }
    }
    const auto listed = [this](uint64_t tid) {
        auto it = std::lower_bound(os_found_.begin(), os_found_.end(), tid,
                                   [](const OsThread& t, uint64_t v) { return t.tid < v; });
        return it != os_found_.end() && it->tid == tid;
    };
    // Native-only threads that ended: gone from the list, or their tid is another thread's now
    // (their start times read in one go: on the drain thread, one hand-off to its worker).
    std::vector<uint32_t> gone;
    std::vector<uint64_t> check_tids;
    std::vector<uint32_t> check_slots;
    for (const auto& kv : live_by_tid_) {
        if (!listed(kv.first)) {
            gone.push_back(kv.second);
        } else {
            check_tids.push_back(kv.first);
            check_slots.push_back(kv.second);
        }
    }
    const std::vector<uint64_t> check_ticks = proc_thread_start_ticks_many(check_tids);
    for (size_t i = 0; i < check_slots.size(); ++i) {
        if (check_ticks[i] != records_[slot_record_[check_slots[i]]].start_ticks) gone.push_back(check_slots[i]);
    }
    for (uint32_t slot : gone) retire(slot);
    // Threads with a Python state are the thread-state scan's (scan()); the rest are new here.
    // Their tids sorted, brought up to date with the tids added and removed since the last
    // pass (sorted_tids.h): walking the hash map's nodes every pass took most of this
    // function's time with 5,000 threads, and a program that starts threads changes the set
    // between every two passes.
    python_tids_.sync([this](uint64_t tid) { return python_by_tid_.count(tid) != 0; },
                      [this](auto&& add) {
                          for (const auto& kv : python_by_tid_) add(kv.first);
                      });
    deferred_next_.clear();
    masked_once_next_.clear();
    const int signo = platform_sampling_signal();
    for (const OsThread& t : os_found_) {
        if (python_tids_.has(t.tid) || live_by_tid_.count(t.tid) != 0 ||
            ended_tids_.count(t.tid) != 0 || own_thread(t.tid))
            continue;
        if (pending_states_ > 0 && deferred_.count(t.tid) == 0) {
            deferred_next_.insert(t.tid);  // maybe a threading.Thread starting: next pass
            continue;
        }
        const uint64_t ticks = proc_thread_start_ticks(t.tid);
        if (ticks == 0) continue;  // ended meanwhile
        const bool blocked = signo > 0 && proc_thread_blocks_signal(t.tid, signo) == 1;
        if (blocked && (masked_once_.count(t.tid) == 0 || !ran_since_birth(t.tid))) {
            masked_once_next_.insert(t.tid);  // maybe a thread being born: next pass
            continue;
        }
        register_native(t.tid, ticks, blocked);
    }
    deferred_.swap(deferred_next_);
    masked_once_.swap(masked_once_next_);
    // A live thread whose CPU time moved with no capture at all may block the signal: those
    // already blocking every pass, the others kMaskChecksPerPass at a time, from where the
    // last pass stopped.
    const size_t slots = table_.slot_count();
    size_t budget = kMaskChecksPerPass;
    size_t next = mask_cursor_;
    for (size_t k = 0; k < slots; ++k) {
        const size_t slot = (mask_cursor_ + k) % slots;
        if (slot >= slot_record_.size() || slot_record_[slot] == kNoRecord) continue;
        const ThreadRecord& rec = records_[slot_record_[slot]];
        if (!rec.alive) continue;
        if (!rec.signal_blocked) {
            if (budget == 0) continue;
            --budget;
            next = slot + 1;
        }
        check_signal_mask(static_cast<uint32_t>(slot));
    }
    mask_cursor_ = slots > 0 ? next % slots : 0;
    return true;
}

bool SessionThreads::ran_since_birth(uint64_t tid) {
    // glibc's pthread_create starts a thread with every signal blocked until its start-up
    // unblocks them: one not scheduled since (a loaded machine), or met by two scans a moment
    // apart (stop()'s right after a pass), looked blocked twice and was never sampled (CI, a
    // churn of 100 us C threads, once). A thread that blocks the signal for real and runs
    // passes this at once; one that blocks it and never runs is not worth a timer.
    uint64_t cpu = 0;
    return platform_thread_cpu_ns_of(tid, 0, &cpu) && cpu >= kMaskedRanNs;
}

ThreadCtx* SessionThreads::register_native(uint64_t tid, uint64_t start_ticks, bool blocked) {
    ThreadCtx* ctx = register_thread(nullptr, 0, tid, /*from_hook=*/false, /*arm=*/!blocked);
    if (ctx == nullptr) return nullptr;
    ThreadRecord& rec = records_[slot_record_[ctx->serial_]];
    rec.start_ticks = start_ticks;
    ++counters_.threads_native_only;
    if (blocked) mark_signal_blocked(ctx, rec);
    return ctx;
}

bool SessionThreads::continue_as_native(uint32_t slot) {
    ThreadCtx* old = slot < table_.slot_count() ? table_.at(slot) : nullptr;
    if (!os_scan_supported_ || old == nullptr || slot >= slot_record_.size() || slot_record_[slot] == kNoRecord)
        return false;
    const uint32_t id = slot_record_[slot];
    ThreadRecord& rec = records_[id];
    // A thread whose exit watch ran is ending; one the scan never dated cannot be told from
    // a later thread with its tid.
    if (!rec.alive || rec.exiting || rec.start_ticks == 0 || own_thread(rec.native_tid)) return false;
    if (proc_thread_start_ticks(rec.native_tid) != rec.start_ticks) return false;
    const uint32_t fresh = table_.take_slot();
    if (fresh == ThreadTable::kNoSlot) return false;  // retired instead: the table is full
    // The old ctx goes as in retire(): timer deleted, ring's turn taken for good, ring drained
    // under this record; the ring itself moves on to the new ctx.
    old->census_let_go();
    platform_thread_detach(old);
    old->state_.store(ThreadState::kDetached, std::memory_order_release);
    while (old->busy_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
    if (old->ring_ && sink_ != nullptr) sink_->drain_ring(old->ring_.get());
    std::unique_ptr<RingBuffer> ring = std::move(old->ring_);
    if (!ring) {
        ring.reset(new RingBuffer(config_.ring_bytes));
        ++rings_owned_;
    }
    const uint64_t timer_cpu = old->timer_cpu_ns_.load(std::memory_order_relaxed);
    live_by_tstate_.erase(rec.tstate);
    python_by_tid_.erase(rec.native_tid);
    python_tids_.touched(rec.native_tid);
    table_.retire(old);
    slot_record_[slot] = kNoRecord;
    // Its pthread_t is still its own: the same thread, alive.
    auto ctx = std::make_unique<ThreadCtx>(fresh, next_generation_++, nullptr, rec.native_tid, rec.ident,
                                           std::move(ring));
    if (config_.native) platform_thread_stack_bounds(rec.ident, &ctx->stack_lo_, &ctx->stack_hi_);
    ctx->timer_cpu_ns_.store(timer_cpu, std::memory_order_relaxed);  // the CPU its timers counted goes on
    ctx->last_cpu_ns_.store(rec.cpu_last_ns, std::memory_order_relaxed);
    if (slot_record_.size() <= fresh) slot_record_.resize(fresh + 1, kNoRecord);
    if (sink_ != nullptr) sink_->slot_taken(fresh);
    slot_record_[fresh] = id;
    rec.slot = fresh;
    rec.tstate = nullptr;
    rec.native_only = true;
    ThreadCtx* raw = table_.add(std::move(ctx));
    live_by_tid_[rec.native_tid] = fresh;
    ++counters_.threads_rejoined;
    const int signo = platform_sampling_signal();
    if (signo > 0 && proc_thread_blocks_signal(rec.native_tid, signo) == 1) {
        mark_signal_blocked(raw, rec);
    } else {
        const Error e = platform_thread_attach(raw);
        if (!e.ok()) ++(e.err == ESRCH ? counters_.ended_before_armed : counters_.attach_failures);
    }
    collect_retired();
    log_debug("thread %llu left Python and goes on: record %u, slot %u -> %u",
              static_cast<unsigned long long>(rec.native_tid), id, slot, fresh);
    return true;
}

void SessionThreads::check_signal_mask(uint32_t slot) {
    ThreadCtx* ctx = slot < table_.slot_count() ? table_.at(slot) : nullptr;
    if (ctx == nullptr || slot >= slot_record_.size() || slot_record_[slot] == kNoRecord) return;
    const uint32_t id = slot_record_[slot];
    ThreadRecord& rec = records_[id];
    if (rec.signal_blocked) {
        // No timer counts its CPU and its clock cannot be read once it ended: read it every
        // pass (the balance reports it; at most one pass of its CPU is lost at its end).
        refresh_cpu(id);
        return;
    }
    if (!ctx->cpu_timer_armed_.load(std::memory_order_acquire)) return;
    uint64_t cpu = 0;
    if (!platform_thread_cpu_ns_of(rec.native_tid, rec.ident, &cpu) || cpu < rec.cpu_at_check_ns) return;
    // Three intervals of CPU time bring at least one expiry of its timer (a tick or more each):
    // none captured, none dropped means the signal does not get through. Only then is its
    // mask read (a /proc file): cheap for the threads that take their signals.
    if (cpu - rec.cpu_at_check_ns < 3 * config_.interval_ns) return;
    const uint64_t captures = ctx->captured_.load(std::memory_order_relaxed) + ctx->dropped_.load(std::memory_order_relaxed);
    const bool silent = captures == rec.captures_at_check;
    rec.cpu_at_check_ns = cpu;
    rec.captures_at_check = captures;
    if (!silent) return;
    const int signo = platform_sampling_signal();
    if (signo > 0 && proc_thread_blocks_signal(rec.native_tid, signo) == 1) mark_signal_blocked(ctx, rec);
}

void SessionThreads::mark_signal_blocked(ThreadCtx* ctx, ThreadRecord& rec) {
    // Marked before its timer goes: a census visit in between took it for a thread whose
    // timer was refused and queued it a signal it never takes (ThreadCtx::census_let_go).
    ctx->census_let_go();
    ctx->signal_blocked_.store(true, std::memory_order_release);
    platform_thread_detach(ctx);  // its pending signal goes with the timer
    rec.signal_blocked = true;
    ++counters_.threads_signal_blocked;
    log_debug("thread %llu (%s) blocks the sampling signal: not sampled, its CPU time reported",
              static_cast<unsigned long long>(rec.native_tid), rec.name.c_str());
}

uint64_t SessionThreads::blocked_cpu_ns() const {
    uint64_t total = 0;
    for (const ThreadRecord& rec : records_) {
        if (!rec.signal_blocked) continue;
        const uint64_t cpu = rec.cpu_last_ns > rec.cpu_start_ns ? rec.cpu_last_ns - rec.cpu_start_ns : 0;
        if (cpu > rec.sampled_ns) total += cpu - rec.sampled_ns;
    }
    return total;
}

}  // namespace spprof
