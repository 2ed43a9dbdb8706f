// session_threads.cpp: registration, the scan, retirement and accounting of sampled threads (see session_threads.h).
#include "session_threads.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <thread>

#include "../framewalker.h"
#include "../log.h"
#include "../own_threads.h"
#include "../platform/platform.h"
#include "../capture/pyframes/thread_state.h"
#include "../capture/record_writer.h"
#include "../capture/sample_record.h"
#include "../signal_handler.h"
#include "proc_reads.h"
#include "stack_store.h"
#include "thread_names.h"
#include "../wall/wall_census.h"  // census_period_ns

namespace spprof {

namespace {

constexpr size_t kRingPoolMax = 64;  // drained rings kept for new threads

// A freed thread state is often reused for the next thread, and pthread_t values are reused
// too: only the kernel tid tells two threads with the same tstate and ident apart.
bool same_thread(const ThreadRecord& rec, PyThreadState* ts, uint64_t tid) {
    return rec.ident == ts->thread_id && rec.native_tid == tid;
}

// Where a span's time off CPU goes: where the census's last visit found the thread blocked,
// if it did (the wait's end: the thread ran after it), else on its last stack.
uint32_t span_flags_at_wait(const ThreadCtx* ctx) {
    return ctx->census_at_wait_.load(std::memory_order_relaxed) ? kSampleAtWait : 0u;
}

}  // namespace

SessionThreads::SessionThreads(const SessionConfig& config, SessionCounters& counters)
    : config_(config), counters_(counters) {}

void SessionThreads::name_from_threading(ThreadRecord& rec) {
    ThreadingNames names;
    if (names.name_of(rec.ident, &rec.name)) rec.name_from_threading = true;
    rec.name_hash = 0;  // not known to be the str the next refresh finds
}

uint32_t SessionThreads::new_record() {
    if (!free_records_.empty()) {
        const uint32_t id = free_records_.back();
        free_records_.pop_back();
        records_[id] = ThreadRecord{};
        return id;
    }
    if (records_.size() > kSerialMask) return kNoRecord;  // the sample row's field is full
    records_.emplace_back();
    return static_cast<uint32_t>(records_.size() - 1);
}

ThreadCtx* SessionThreads::register_thread(PyThreadState* ts, unsigned long ident, uint64_t tid, bool from_hook,
                                           bool arm, const char* name) {
    // A thread the table cannot hold (kMaxThreads alive at once, or 16M sampled threads in
    // one session) is counted once and left unsampled; the scan tries it again each pass.
    const uint32_t slot = table_.take_slot();
    const uint32_t id = slot == ThreadTable::kNoSlot ? kNoRecord : new_record();
    if (id == kNoRecord) {
        if (slot != ThreadTable::kNoSlot) table_.give_back(slot);
        auto r = refused_.emplace(ts, tid);
        if (r.second || r.first->second != tid) {
            r.first->second = tid;
            ++counters_.threads_refused;
            log_debug("thread %llu not sampled: %zu threads alive, the most one session holds at once",
                      static_cast<unsigned long long>(tid), table_.live());
        }
        return nullptr;
    }
    std::unique_ptr<RingBuffer> ring;
    if (!ring_pool_.empty()) {
        ring = std::move(ring_pool_.back());
        ring_pool_.pop_back();
    } else {
        ring.reset(new RingBuffer(config_.ring_bytes));
        ++rings_owned_;
    }
    auto ctx = std::make_unique<ThreadCtx>(slot, next_generation_++, reinterpret_cast<struct _ts*>(ts), tid,
                                           ident, std::move(ring));
    if (config_.native) {
        // A thread without a Python state has no pthread_t we could use: its bounds come from
        // its stack pointer while it waits (else provisional ones, signal_handler.cpp).
        if (ts != nullptr) {
            platform_thread_stack_bounds(ident, &ctx->stack_lo_, &ctx->stack_hi_);
        } else {
            proc_thread_stack_bounds_by_tid(tid, &ctx->stack_lo_, &ctx->stack_hi_);
        }
    }
    if (slot_record_.size() <= slot) slot_record_.resize(slot + 1, kNoRecord);
    if (sink_ != nullptr) sink_->slot_taken(slot);
    slot_record_[slot] = id;
    ThreadRecord& rec = records_[id];
    rec.ident = ident;
    rec.native_tid = tid;
    rec.tstate = ts;
    rec.native_only = ts == nullptr;
    rec.slot = slot;
    rec.registered_ns = platform_monotonic_ns();
    rec.cpu_read_at_ns = rec.registered_ns;
    uint64_t cpu_now = 0;
    platform_thread_cpu_ns_of(tid, ident, &cpu_now);
    // A thread the hook registers started after start(): all of its CPU is the session's,
    // its start-up included (its timer owes the expiries of that stretch at its end).
    rec.cpu_start_ns = from_hook ? 0 : cpu_now;
    rec.cpu_last_ns = cpu_now;
    rec.cpu_at_check_ns = cpu_now;
    // A thread found after start() may have run before (a C thread the scan found 250 ms late);
    // a hooked thread's start-up is the session's (cpu_start_ns 0).
    if (window_open_) counters_.cpu_before_found_ns += rec.cpu_start_ns;
    ctx->last_cpu_ns_.store(cpu_now, std::memory_order_relaxed);
    ctx->timer_origin_cpu_ns_ = rec.cpu_start_ns;
    if (config_.wall_mode && ts != nullptr && platform_traits().session_wall_census) {
        // Its span off CPU starts now: the census's first look measures from here, and a
        // thread that ends before it is visited writes it itself. Before the table publishes
        // the ctx: the census must never see a span it did not hand out change under it.
        ctx->census_cpu_ns_.store(cpu_now, std::memory_order_relaxed);
        ctx->census_tail_from_ns_.store(rec.registered_ns, std::memory_order_release);
    }
    if (name != nullptr) {
        // The Thread object's own name (the start hook: threading has not put the thread in
        // _active yet, so looking there would find nothing).
        rec.name = name;
        rec.name_hash = 0;
        rec.name_from_threading = true;
    } else {
        name_from_threading(rec);
        if (!rec.name_from_threading) rec.name = os_thread_name(tid);
    }
    name_bytes_ += rec.name.capacity();
    ThreadCtx* raw = table_.add(std::move(ctx));
    if (ts != nullptr) {
        live_by_tstate_[ts] = slot;
        python_by_tid_[tid] = slot;
        python_tids_.touched(tid);
        refused_.erase(ts);
    } else {
        live_by_tid_[tid] = slot;
    }
    ++counters_.threads_registered;
    if (table_.live() > counters_.threads_alive_max) counters_.threads_alive_max = table_.live();
    Error e = arm ? platform_thread_attach(raw) : Error::none();
    if (!e.ok()) ++(e.err == ESRCH ? counters_.ended_before_armed : counters_.attach_failures);
    rec.cpu_timer = raw->cpu_timer_armed_.load(std::memory_order_acquire);
    if (config_.wall_mode && ts != nullptr) {
        if (ts == PyThreadState_Get()) {
            raw->needs_first_sample_.store(true, std::memory_order_release);  // it is running
        } else {
            record_initial_stack(raw, ts);  // not running Python while we hold the GIL
        }
    }
    raw->timer_settled_.store(true, std::memory_order_release);  // the census may visit it now
    log_debug("thread registered: slot %u record %u ident %lu tid %llu%s", slot, id, ident,
              static_cast<unsigned long long>(tid), e.ok() ? "" : " (not armed)");
    return raw;
}

void SessionThreads::register_current(PyThreadState* ts, PyObject* entry_code, PyObject* skip_code,
                                      const char* name, uint64_t tid) {
    if (tid == 0) tid = platform_current_tid();
    auto native = live_by_tid_.find(tid);
    if (native != live_by_tid_.end()) {
        // The OS scan found it first (before its state was bound): it stays that thread, by
        // tid, and its captures walk its state; threading knows its name now.
        ThreadRecord& rec = records_[slot_record_[native->second]];
        rec.ident = ts->thread_id;
        name_bytes_ -= rec.name.capacity();
        name_from_threading(rec);
        if (!rec.name_from_threading && name != nullptr) {
            rec.name = name;
            rec.name_hash = 0;
        }
        name_bytes_ += rec.name.capacity();
        return;
    }
    auto it = live_by_tstate_.find(ts);
    if (it != live_by_tstate_.end() && same_thread(records_[slot_record_[it->second]], ts, tid)) {
        // The scan can find a new thread before threading has put it in _active; the hook
        // runs after that, so this is the first moment its name is certain to be there.
        ThreadRecord& rec = records_[slot_record_[it->second]];
        if (!rec.name_from_threading) {
            name_bytes_ -= rec.name.capacity();
            name_from_threading(rec);
            if (!rec.name_from_threading && name != nullptr) {
                rec.name = name;  // the Thread object's: threading's own name for it
                rec.name_from_threading = true;
            }
            name_bytes_ += rec.name.capacity();
        }
        if (ThreadCtx* ctx = table_.at(it->second)) record_entry_stack(ctx, ts, entry_code, skip_code);
        return;
    }
    // Same tstate memory (and maybe the same pthread_t), new thread: the old one has ended.
    if (it != live_by_tstate_.end()) retire(it->second);
    // A thread the table cannot hold is counted there.
    if (ThreadCtx* ctx = register_thread(ts, ts->thread_id, tid, true, true, name))
        record_entry_stack(ctx, ts, entry_code, skip_code);
}

void SessionThreads::thread_exiting(PyThreadState* ts, uint64_t tid) {
    auto native = live_by_tid_.find(tid);
    if (native != live_by_tid_.end()) {
        const uint32_t id = slot_record_[native->second];
        if (id != kNoRecord) refresh_cpu(id);
        return;
    }
    auto it = live_by_tstate_.find(ts);
    if (it == live_by_tstate_.end()) return;
    const uint32_t id = slot_record_[it->second];
    if (id == kNoRecord || !same_thread(records_[id], ts, tid)) return;
    if (ThreadCtx* ctx = table_.at(it->second)) {
        ctx->census_let_go();  // before its timer goes: it writes its last stretch itself
        const TimerResidual owed = platform_thread_finish(ctx);
        write_wait_tail(ctx, true);  // first: the wait ended before the thread's last CPU
        settle_end(ctx, owed.expiries, owed.weight_ns);
        records_[id].end_settled = owed.settled;
        // Its CPU is all accounted now: the wall census must not take the ending thread for
        // one without a timer and signal it for the time since its last census.
        ctx->state_.store(ThreadState::kDetached, std::memory_order_release);
    }
    records_[id].exiting = true;  // its state goes because it ends: retired, not continued
    refresh_cpu(id);
}

// How long a thread that ends waits for a census visit to hand its span back: a visit takes
// microseconds; a walk under emulation or a sanitizer, milliseconds.
constexpr std::chrono::milliseconds kTailWait{100};

void SessionThreads::write_wait_tail(ThreadCtx* ctx, bool ending) {
    uint64_t from = ctx->census_tail_from_ns_.exchange(0, std::memory_order_acq_rel);
    if (from == kCensusTailHeld && ending) {
        // A census visit holds it and hands it back as the visit ends (its time, stored over
        // the 0 left here): a thread that ends waits for that, boundedly, so that its last
        // stretch is not left out. A window's end leaves the span to the census.
        const auto deadline = std::chrono::steady_clock::now() + kTailWait;
        while (from == kCensusTailHeld && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
            if (ctx->census_tail_from_ns_.load(std::memory_order_acquire) != 0)
                from = ctx->census_tail_from_ns_.exchange(0, std::memory_order_acq_rel);
        }
        if (from == kCensusTailHeld) capture_count_sampled(false);  // not handed back in time: dropped
    }
    if (from == 0 || from == kCensusTailHeld) return;  // not in wall mode, or someone else has it
    // A window's end writes only long waits (the census visits the others within a period);
    // a thread that blocks the sampling signal has no time off its timer to write.
    if ((!ending && !ctx->census_long_wait_.load(std::memory_order_relaxed)) ||
        ctx->signal_blocked_.load(std::memory_order_acquire)) {
        ctx->census_tail_from_ns_.store(from, std::memory_order_release);
        return;
    }
    const uint64_t now = platform_monotonic_ns();
    uint64_t cpu = 0;
    const bool read = platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &cpu);
    const uint64_t cpu_then = ctx->census_cpu_ns_.load(std::memory_order_relaxed);
    // An ending thread's carry goes with its span; a long wait carries nothing (the census
    // keeps its own copy, so a window's end leaves it alone).
    const uint64_t carry = ending ? ctx->census_carry_ns_.exchange(0, std::memory_order_relaxed) : 0;
    // Its time off CPU since the census's last visit.
    if (read)
        write_idle_tail(ctx, from, now, cpu > cpu_then ? cpu - cpu_then : 0, carry, nullptr, 0,
                        span_flags_at_wait(ctx));
    if (ending) return;
    // Handed back after the record (one writer of the thread's foreign records at a time):
    // the census's next visit, or the thread as it ends, takes the span from here on.
    ctx->census_cpu_ns_.store(read ? cpu : cpu_then, std::memory_order_relaxed);
    ctx->census_tail_from_ns_.store(read ? now : from, std::memory_order_release);
}

void SessionThreads::write_idle_tail(ThreadCtx* ctx, uint64_t from, uint64_t now, uint64_t ran, uint64_t carry,
                                     const RawFrame* frames, uint32_t depth, uint32_t flags) {
    // What its CPU timer sampled (it ran `ran` since `from`) is not idle.
    const uint64_t span = now > from ? now - from : 0;
    const uint64_t off_cpu = span > ran ? span - ran : 0;
    const uint64_t idle = off_cpu + carry;
    if (idle == 0) return;
    // Depth 0, idle: the drain gives it the thread's last stack, where it waited (kSampleAtWait:
    // the stack of its latest idle record), and folds it into the wait's row. It ended when the
    // wait did; the thread ran after that.
    RawSampleHeader hdr{};
    hdr.timestamp_ns = from + off_cpu;
    hdr.weight_ns = idle;
    hdr.native_tid = ctx->native_tid_;
    hdr.thread_serial = ctx->serial_;
    hdr.flags = kSampleIdle | flags;
    hdr.depth = static_cast<uint16_t>(depth);
    const uint64_t period = census_period_ns(config_.interval_ns);
    const uint64_t censuses = (idle + period / 2) / period;
    hdr.censuses = censuses > 1 ? static_cast<uint32_t>(censuses) : 0;
    if (write_foreign_record(ctx, hdr, frames)) {
        capture_count_idle();
    } else {
        capture_count_sampled(false);  // its ring full, or a capture of its own under way: dropped
    }
}

void SessionThreads::settle_waits() {
    for (size_t i = 0; i < table_.slot_count(); ++i) {
        ThreadCtx* ctx = table_.at(i);
        if (ctx != nullptr && ctx->state_.load(std::memory_order_acquire) == ThreadState::kAttached &&
            ctx->census_long_wait_.load(std::memory_order_relaxed) &&
            ctx->census_tail_from_ns_.load(std::memory_order_relaxed) != 0)
            write_wait_tail(ctx, false);
    }
}

void SessionThreads::settle_caller() {
    if (ThreadCtx* ctx = attached_caller(nullptr)) write_wait_tail(ctx, true);
}

ThreadCtx* SessionThreads::attached_caller(PyThreadState** ts_out) {
    PyThreadState* ts = tstate_current_or_null();
    auto it = ts != nullptr ? live_by_tstate_.find(ts) : live_by_tstate_.end();
    if (it == live_by_tstate_.end()) return nullptr;
    ThreadCtx* ctx = table_.at(it->second);
    if (ctx == nullptr || ctx->state_.load(std::memory_order_acquire) != ThreadState::kAttached) return nullptr;
    if (ts_out != nullptr) *ts_out = ts;
    return ctx;
}

void SessionThreads::fork_began() {
    fork_caller_serial_ = kNoForkCaller;
    ThreadCtx* ctx = attached_caller(nullptr);
    if (ctx == nullptr || !platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &fork_began_cpu_ns_)) return;
    fork_began_ns_ = platform_monotonic_ns();
    fork_caller_serial_ = ctx->serial_;
}

void SessionThreads::settle_caller_after_fork() {
    const uint32_t forker = fork_caller_serial_;
    fork_caller_serial_ = kNoForkCaller;
    PyThreadState* ts = nullptr;
    ThreadCtx* ctx = attached_caller(&ts);
    if (ctx == nullptr || ctx->serial_ != forker || ctx->signal_blocked_.load(std::memory_order_acquire)) return;
    // The census is stopped (joined): nobody else holds the span.
    const uint64_t from = ctx->census_tail_from_ns_.load(std::memory_order_acquire);
    if (from == 0 || from == kCensusTailHeld || from > fork_began_ns_) return;  // not in wall mode
    const uint64_t now = platform_monotonic_ns();
    uint64_t cpu = 0;
    if (!platform_thread_cpu_ns_of(ctx->native_tid_, ctx->ident_, &cpu)) return;
    const uint64_t ran = cpu > fork_began_cpu_ns_ ? cpu - fork_began_cpu_ns_ : 0;
    // Back within a census of the fork (the usual case: the fork's milliseconds): the
    // census's next visit takes the span as it would have.
    if (now - fork_began_ns_ < ran + census_period_ns(config_.interval_ns)) return;
    // Before the fork: as a window's end writes a wait (where the census last found it
    // blocked, or its last stack). Since: on the stack it has now (on the thread itself, GIL
    // held: its chain is whole), idle: the call it just returned from blocked (what else keeps
    // a thread off CPU that long with the GIL its own). The carry stays the census's, which
    // keeps its own copy.
    const uint64_t cpu_then = ctx->census_cpu_ns_.load(std::memory_order_relaxed);
    write_idle_tail(ctx, from, fork_began_ns_, fork_began_cpu_ns_ > cpu_then ? fork_began_cpu_ns_ - cpu_then : 0,
                    0, nullptr, 0, span_flags_at_wait(ctx));
    RawFrame frames[kMaxPythonFrames];
    const WalkResult w = walk_python_stack(DirectReader{}, reinterpret_cast<uintptr_t>(ts), frames,
                                           kMaxPythonFrames);
    write_idle_tail(ctx, fork_began_ns_, now, ran, 0, frames, w.depth, w.truncated ? kSampleTruncated : 0u);
    // The census's next visit measures from here (census_adopt).
    ctx->census_cpu_ns_.store(cpu, std::memory_order_relaxed);
    ctx->census_tail_from_ns_.store(now, std::memory_order_release);
}

void SessionThreads::finish_all() {
    // A thread alive at stop() owes what a thread that ends owes: the expiries of its last
    // stretch no tick examined (a main thread that runs in short bursts between waits can owe
    // several), and those that fired after captures were disabled. In wall mode, its time off
    // CPU since the census's last visit too (stop()'s last census visits only the long waits
    // it passed over; the census is joined, so nobody holds a span now).
    for (uint32_t slot = 0; slot < table_.slot_count(); ++slot) {
        ThreadCtx* ctx = table_.at(slot);
        if (ctx == nullptr || slot >= slot_record_.size() || slot_record_[slot] == kNoRecord) continue;
        const TimerResidual owed = platform_thread_finish(ctx);
        if (ctx->state_.load(std::memory_order_acquire) == ThreadState::kAttached) write_wait_tail(ctx, true);
        settle_end(ctx, owed.expiries, owed.weight_ns);
    }
}

void SessionThreads::settle_end(ThreadCtx* ctx, uint64_t expiries, uint64_t weight_ns) {
    const uint64_t carried = ctx->carried_ns_.exchange(0, std::memory_order_relaxed);
    if (expiries > 0 || carried > 0) write_thread_end(ctx, expiries, weight_ns + carried);
}

void SessionThreads::write_thread_end(ThreadCtx* ctx, uint64_t expiries, uint64_t weight_ns) {
    // Depth 0: the drain gives it the thread's last stack (its last sample's, else the entry
    // stack the hook recorded). The timer is deleted, so no handler competes for the ring.
    RawSampleHeader hdr{};
    hdr.timestamp_ns = platform_monotonic_ns();
    hdr.weight_ns = weight_ns;
    hdr.native_tid = ctx->native_tid_;
    hdr.thread_serial = ctx->serial_;
    hdr.flags = kSampleThreadEnd | kSampleOnCpu;
    hdr.depth = 0;
    write_thread_end_record(ctx, hdr, nullptr, expiries);
}

void SessionThreads::write_thread_end_record(ThreadCtx* ctx, const RawSampleHeader& hdr, const RawFrame* frames,
                                             uint64_t expiries) {
    if (!write_foreign_record(ctx, hdr, frames)) {
        capture_count_sampled(false);  // a full ring: counted as dropped, like a capture
        return;
    }
    ++counters_.thread_end_samples;
    counters_.thread_end_expiries += expiries;
    counters_.thread_end_ns += hdr.weight_ns;
}

static bool same_list(const std::vector<SessionThreads::FoundState>& a,
                      const std::vector<SessionThreads::FoundState>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].ts != b[i].ts || a[i].ident != b[i].ident || a[i].tid != b[i].tid) return false;
    return true;
}

void SessionThreads::read_thread_list(PyThreadState* exclude) {
    // Calls nothing that can let the GIL go, so the chain it follows stays linked.
    PyInterpreterState* interp = PyThreadState_Get()->interp;
    found_.clear();
    pending_states_ = 0;
    for (PyThreadState* ts = PyInterpreterState_ThreadHead(interp); ts != nullptr;
         ts = PyThreadState_Next(ts)) {
        if (ts == exclude) continue;  // ours
        if (!tstate_bound(ts)) {  // not its thread's yet
            ++pending_states_;
            continue;
        }
        const uint64_t tid = tstate_native_tid(ts);
        if (tid == 0) {  // native id not written yet: next scan
            ++pending_states_;
            continue;
        }
        found_.push_back(FoundState{ts, ts->thread_id, tid});
    }
}

void SessionThreads::scan(PyThreadState* exclude, bool count_found) {
    // Called with the GIL held. New thread states are only ever linked at the head of the
    // list (fully initialised first) and a thread unlinks its own state with the GIL held,
    // so the list read under the GIL is consistent, but only until the GIL is let go.
    // Retiring a thread drains its ring (the resolver allocates; a collection can run Python
    // code) and registering one asks threading for its name (a property): either can let the
    // GIL go, and meanwhile a thread may end and free its state. So the list is read again
    // after every such call, and only states from the latest reading are used (seen once on
    // 3.15 with threads creating subinterpreters: the walk followed a freed state's link into
    // a type object and spun with the GIL held).
    refused_now_.clear();
    read_thread_list(exclude);
    size_t i = 0;
    size_t known = 0;  // states of the latest reading that are live threads' (counted once)
    for (uint32_t acted = 0; i < found_.size() && acted <= 2 * ThreadTable::kMaxThreads;) {
        const FoundState f = found_[i++];  // a copy: found_ is read again below
        auto it = live_by_tstate_.find(f.ts);
        if (it != live_by_tstate_.end()) {
            const ThreadRecord& rec = records_[slot_record_[it->second]];
            if (rec.ident == f.ident && rec.native_tid == f.tid) {
                ++known;
                continue;
            }
        }
        // Sampled by its tid already (found without a state): its captures walk this state.
        if (live_by_tid_.count(f.tid) != 0) continue;
        // One of spprof's own Python threads (the pprof endpoint's, _ext._own_thread_enter).
        if (own_thread(f.tid)) continue;
        // A new state on a thread we sample through another (a C thread's PyGILState_Ensure
        // after a Release): the same OS thread, which goes on by its tid from now on.
        auto same_tid = python_by_tid_.find(f.tid);
        const bool other_state =
            same_tid != python_by_tid_.end() && (it == live_by_tstate_.end() || it->second != same_tid->second);
        // It may be one this scan registered: continue_as_native needs its date.
        if (other_state) date_found();
        if (other_state && continue_as_native(same_tid->second)) {
            ++acted;
            previous_.swap(found_);
            read_thread_list(exclude);
            if (!same_list(previous_, found_)) i = 0;
            continue;
        }
        if (refused_now_.count(f.ts) != 0) continue;  // the table is full: next scan
        ++acted;
        // Same tstate memory, new thread: the old one has ended.
        if (it != live_by_tstate_.end()) retire(it->second);
        if (ThreadCtx* found = register_thread(f.ts, f.ident, f.tid)) {
            if (count_found) ++counters_.threads_discovered_by_scan;
            // A thread made from C (PyGILState_Ensure) may drop its state and go on: its
            // start time tells it from a later thread with the same tid (continue_as_native).
            // Read for all of them at once (date_found): one hand-off to the reads' worker.
            undated_.push_back(Undated{slot_record_[found->serial_], f.tid});
        } else {
            refused_now_.insert(f.ts);
        }
        // Those calls may have let the GIL go: read the list again, and if it changed, start
        // over from its head (known threads are skipped cheaply).
        previous_.swap(found_);
        read_thread_list(exclude);
        if (!same_list(previous_, found_)) {
            i = 0;
            known = 0;
        }
    }
    date_found();
    // Every live state found again (the usual pass: threads end through their exit watch
    // between passes only now and then): nothing is gone, and the walk of every live thread
    // below (some 0.5 ms with 5,000 threads, with the GIL) is not needed.
    if (i == found_.size() && known == live_by_tstate_.size() && refused_.empty()) return;
    seen_.clear();
    for (const FoundState& f : found_) seen_.push_back(f.ts);  // the latest reading
    std::sort(seen_.begin(), seen_.end());
    std::vector<uint32_t> gone;
    for (const auto& kv : live_by_tstate_)
        if (!std::binary_search(seen_.begin(), seen_.end(), kv.first)) gone.push_back(kv.second);
    for (uint32_t slot : gone)
        if (!continue_as_native(slot)) retire(slot);
    if (!refused_.empty()) {  // forget refused threads that ended: a new one counts again
        for (auto r = refused_.begin(); r != refused_.end();) {
            if (!std::binary_search(seen_.begin(), seen_.end(), r->first)) {
                r = refused_.erase(r);
            } else {
                ++r;
            }
        }
    }
}

void SessionThreads::date_found() {
    if (undated_.empty()) return;
    undated_tids_.clear();
    for (const Undated& u : undated_) undated_tids_.push_back(u.tid);
    const std::vector<uint64_t> ticks = proc_thread_start_ticks_many(undated_tids_);
    for (size_t k = 0; k < undated_.size(); ++k) {
        ThreadRecord& rec = records_[undated_[k].record];
        if (rec.native_tid == undated_[k].tid && rec.start_ticks == 0) rec.start_ticks = ticks[k];
    }
    undated_.clear();
}

void SessionThreads::retire(uint32_t slot) {
    ThreadCtx* ctx = slot < table_.slot_count() ? table_.at(slot) : nullptr;
    if (ctx == nullptr || slot >= slot_record_.size() || slot_record_[slot] == kNoRecord) return;
    const uint32_t id = slot_record_[slot];
    ThreadRecord& rec = records_[id];
    if (!rec.alive) return;
    ctx->census_let_go();
    platform_thread_detach(ctx);
    settle_end(ctx, 0, 0);  // a deferred sample's time the thread did not live to carry
    // The thread deleted its own thread state before we saw it gone; from then on its
    // handler finds no tstate and never touches the ring, so draining and reusing it is safe.
    ctx->state_.store(ThreadState::kDetached, std::memory_order_release);
    // Take the ring's turn for good: the wall sampler may be writing an idle record right
    // now; once we hold busy_, nobody writes this ring again.
    while (ctx->busy_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
    if (ctx->ring_) {
        if (sink_ != nullptr) sink_->drain_ring(ctx->ring_.get());
        // Empty now: the next thread's ring. The pool keeps a few; a burst of threads does not
        // keep its rings for the rest of the session.
        if (ring_pool_.size() < kRingPoolMax) {
            ring_pool_.push_back(std::move(ctx->ring_));
        } else {
            ctx->ring_.reset();
            --rings_owned_;
        }
    }
    rec.alive = false;
    // The thread's clock cannot be read any more. A hooked thread's last reading was taken as
    // it ended (thread_exiting): exact. Its CPU timer counted its CPU up to the last expiry
    // noticed (an interval short, more if scheduler ticks missed it); without one, add what
    // its samples saw since the last reading. Each is a lower bound: the larger one stands.
    if (rec.cpu_timer) {
        const uint64_t counted = rec.cpu_start_ns + ctx->timer_cpu_ns_.load(std::memory_order_relaxed);
        if (counted > rec.cpu_last_ns) rec.cpu_last_ns = counted;
    } else {
        rec.cpu_last_ns += rec.weight_since_cpu_read;
    }
    rec.weight_since_cpu_read = 0;
    refresh_cpu(id);
    rec.ended_ns = platform_monotonic_ns();
    counters_.ended_final_cpu_ns += rec.cpu_last_ns;
    if (rec.native_only) {
        live_by_tid_.erase(rec.native_tid);
    } else {
        live_by_tstate_.erase(rec.tstate);
        if (os_scan_supported_) ended_tids_[rec.native_tid] = os_passes_;
        auto p = python_by_tid_.find(rec.native_tid);
        if (p != python_by_tid_.end() && p->second == slot) {
            python_by_tid_.erase(p);
            python_tids_.touched(rec.native_tid);
        }
    }
    table_.retire(ctx);  // freed once no capture can hold it (ThreadTable::collect)
    // Right away if the gate is empty now (one atomic load): a thread-per-request server
    // retires thousands of threads between two drain passes.
    collect_retired();
    slot_record_[slot] = kNoRecord;
    ++counters_.threads_ended;
    log_debug("thread ended: slot %u record %u ident %lu tid %llu, %llu samples", slot, id, rec.ident,
              static_cast<unsigned long long>(rec.native_tid), static_cast<unsigned long long>(rec.samples));
    if (rec.samples == 0 && !rec.signal_blocked) {
        // Nothing in the profile names it: a thread-per-request server leaves no trace per
        // request, only these two counters.
        ++counters_.threads_unsampled;
        const uint64_t cpu = rec.cpu_last_ns > rec.cpu_start_ns ? rec.cpu_last_ns - rec.cpu_start_ns : 0;
        counters_.threads_unsampled_cpu_ns += cpu;
        if (!rec.end_settled) counters_.threads_unsampled_unsettled_cpu_ns += cpu;
        name_bytes_ -= rec.name.capacity();
        rec = ThreadRecord{};
        rec.alive = false;
        rec.free = true;
        free_records_.push_back(id);
    }
}

void SessionThreads::refresh_cpu(uint32_t id) {
    ThreadRecord& rec = records_[id];
    uint64_t now = 0;
    const uint64_t read_at = platform_monotonic_ns();
    if (rec.alive && platform_thread_cpu_ns_of(rec.native_tid, rec.ident, &now) && now >= rec.cpu_last_ns) {
        rec.cpu_last_ns = now;
        rec.cpu_read_at_ns = read_at;
        rec.weight_since_cpu_read = 0;
    }
    // Readings taken by others while the thread lived: the Mach sampler's at each sample, the
    // wall census's every period.
    const ThreadCtx* ctx = rec.slot < table_.slot_count() ? table_.at(rec.slot) : nullptr;
    if (ctx != nullptr && slot_record_[rec.slot] == id) {
        const uint64_t at_sample = ctx->last_cpu_ns_.load(std::memory_order_relaxed);
        const uint64_t at_census = ctx->census_cpu_ns_.load(std::memory_order_relaxed);
        const uint64_t seen = at_sample > at_census ? at_sample : at_census;
        if (seen > rec.cpu_last_ns) rec.cpu_last_ns = seen;
    }
}

void SessionThreads::refresh_cpu_all() {
    for (uint32_t id = 0; id < records_.size(); ++id)
        if (records_[id].alive) refresh_cpu(id);
}

void SessionThreads::refresh_names() {
    ThreadingNames names;
    if (!names.available()) return;
    size_t alive = 0;
    for (const auto& rec : records_) alive += rec.alive ? 1 : 0;
    name_index_.clear_for(alive);
    for (uint32_t id = 0; id < records_.size(); ++id)
        if (records_[id].alive) name_index_.add(records_[id].ident, id);
    names.for_each_name([&](unsigned long ident, PyObject* name) {
        // A str keeps its hash once computed: an unchanged name is told by it without reading
        // either string (a cache miss per thread made most of this walk's time). Taken before
        // any record is touched: a str subclass's __hash__ is Python code, which may start a
        // thread (records_ grows) or let the GIL go.
        const Py_hash_t hash = PyObject_Hash(name);
        if (hash == -1) {
            PyErr_Clear();
            return;
        }
        name_index_.find(ident, [&](uint32_t id) {
            if (id >= records_.size()) return;
            ThreadRecord& rec = records_[id];
            if (!rec.alive || rec.ident != ident) return;  // its id went to another thread meanwhile
            rec.name_from_threading = true;
            if (rec.name_hash == static_cast<uint64_t>(hash) && hash != 0) return;
            Py_ssize_t size = 0;
            const char* utf8 = PyUnicode_AsUTF8AndSize(name, &size);
            if (utf8 == nullptr) {
                PyErr_Clear();
                return;
            }
            name_bytes_ -= rec.name.capacity();
            rec.name.assign(utf8, static_cast<size_t>(size));
            rec.name_hash = static_cast<uint64_t>(hash);
            name_bytes_ += rec.name.capacity();
        });
    });
}

void SessionThreads::collect_retired() {
    // Ended threads no capture can still hold: every sampler (signal handlers, the wall census,
    // the Mach sampler's cycle) holds the capture gate while it uses a ctx.
    if (table_.quarantined() == 0) return;
    const bool gate_empty = capture_quiescent();
    table_.collect(gate_empty);
}

void SessionThreads::mark_running_at_stop() {
    for (auto& r : records_) {
        if (r.alive) {
            r.alive = false;
            r.ended_ns = 0;  // still running at stop: "ended" means ended before stop()
        }
    }
}

size_t SessionThreads::memory_bytes() const {
    // Rings by the pages they touched: a 256 KiB ring of a thread that wrote two records costs
    // the process 4 KiB, and counting capacity made a burst of short threads look like
    // hundreds of megabytes (and drop every sample at the limit).
    return table_.memory_bytes() + ring_touched_bytes() + share_touched_bytes() +
           records_.capacity() * sizeof(ThreadRecord) + name_bytes_ +
           (free_records_.capacity() + slot_record_.capacity()) * sizeof(uint32_t) +
           ring_pool_.capacity() * sizeof(ring_pool_[0]) +
           (live_by_tstate_.size() + live_by_tid_.size() + python_by_tid_.size() + refused_.size()) * 4 * sizeof(void*) +  // a node and a bucket each
           os_found_.capacity() * sizeof(OsThread) + prelisted_bytes_ + name_index_.memory_bytes() + python_tids_.memory_bytes() + (ended_tids_.size() + deferred_.size() + deferred_next_.size() + masked_once_.size() + masked_once_next_.size()) * 4 * sizeof(void*);
}

size_t SessionThreads::share_touched_bytes() const {
    // The frames each live ctx keeps for root sharing, as deep as its records went.
    size_t bytes = 0;
    for (size_t i = 0; i < table_.slot_count(); ++i)
        if (const ThreadCtx* ctx = table_.at(i))
            bytes += ctx->share_deepest_.load(std::memory_order_relaxed) * sizeof(RawFrame);
    return bytes;
}

size_t SessionThreads::ring_touched_bytes() const {
    size_t rings = 0;
    for (size_t i = 0; i < table_.slot_count(); ++i)
        if (const ThreadCtx* ctx = table_.at(i))
            if (ctx->ring_) rings += ctx->ring_->touched_bytes();
    for (const auto& r : ring_pool_) rings += r->touched_bytes();
    return rings;
}

void SessionThreads::record_initial_stack(ThreadCtx* ctx, PyThreadState* ts) {
    // GIL held: a thread that is not us cannot change its Python frames now, so its chain is
    // stable for the walk. Idle records reuse this stack until the thread runs again.
    RawFrame frames[kMaxPythonFrames];
    const WalkResult w = walk_python_stack(DirectReader{}, reinterpret_cast<uintptr_t>(ts), frames,
                                           kMaxPythonFrames);
    RawSampleHeader hdr{};
    hdr.timestamp_ns = platform_monotonic_ns();
    hdr.native_tid = ctx->native_tid_;
    hdr.thread_serial = ctx->serial_;
    hdr.flags = kSampleStackOnly | (w.truncated ? kSampleTruncated : 0u);
    hdr.depth = static_cast<uint16_t>(w.depth);
    write_foreign_record(ctx, hdr, frames);
}

void SessionThreads::record_entry_stack(ThreadCtx* ctx, PyThreadState* ts, PyObject* entry_code,
                                        PyObject* skip_code) {
    // GIL held, on the thread itself, called from the hook: its chain is whole. Leaf first,
    // one slot kept in front for the target's code: the frames below the hook's own.
    RawFrame frames[kMaxPythonFrames];
    const WalkResult w = walk_python_stack(DirectReader{}, reinterpret_cast<uintptr_t>(ts), frames + 1,
                                           kMaxPythonFrames - 1);
    uint32_t skip = 0;
    while (skip < w.depth && skip_code != nullptr && frames[1 + skip].code == reinterpret_cast<uintptr_t>(skip_code))
        ++skip;
    const uint32_t depth = w.depth - skip;
    RawFrame* const below = frames + 1 + skip;
    RawSampleHeader hdr{};
    hdr.timestamp_ns = platform_monotonic_ns();
    hdr.native_tid = ctx->native_tid_;
    hdr.thread_serial = ctx->serial_;
    hdr.depth = static_cast<uint16_t>(depth);
    // The expiries of the thread's start-up (before its timer was armed: threading's
    // bootstrap), on the stack it has now, without the target it has not entered yet.
    const uint64_t owed = ctx->timer_owed_at_arm_ns_;
    ctx->timer_owed_at_arm_ns_ = 0;
    if (owed > 0) {
        hdr.weight_ns = owed;
        hdr.flags = kSampleThreadEnd | kSampleOnCpu | (w.truncated ? kSampleTruncated : 0u);
        const uint64_t interval = config_.interval_ns;
        write_thread_end_record(ctx, hdr, below, interval > 0 ? (owed + interval / 2) / interval : 0);
    }
    // The entry stack: the target's code (at its first instruction: this stack says where the
    // thread started, not a line it ran) on top.
    CodeFacts facts;
    uint32_t top = 0;
    if (entry_code != nullptr && PyCode_Check(entry_code) &&
        read_code_facts(DirectReader{}, reinterpret_cast<uintptr_t>(entry_code), &facts)) {
        below[-1] = RawFrame{facts.code, static_cast<uint32_t>(facts.first_traceable), facts.fingerprint};
        top = 1;
    }
    hdr.weight_ns = 0;
    hdr.flags = kSampleStackOnly | (w.truncated ? kSampleTruncated : 0u);
    hdr.depth = static_cast<uint16_t>(depth + top);
    write_foreign_record(ctx, hdr, below - top);
}

}  // namespace spprof
