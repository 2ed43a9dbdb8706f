// session.cpp: see session.h.
#include "session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "log.h"
#include "sample_record.h"
#include "framewalker.h"
#include "signal_handler.h"

namespace spprof {

namespace {

constexpr uint32_t kNoStack = 0xFFFFFFFFu;  // last_stack_ entry of a thread with none yet
constexpr uint32_t kNoRecord = 0xFFFFFFFFu;  // slot_record_ entry of a free slot
constexpr size_t kRingPoolMax = 64;          // drained rings kept for new threads
// Drain periods a pass may be put off while no ring is over a quarter full (250 ms at 50 ms).
constexpr uint32_t kMaxIdlePeriods = 5;

uint64_t native_tid_of(PyThreadState* ts) {
#if PY_VERSION_HEX >= 0x030B0000
    return ts->native_thread_id;
#else
    return platform_tid_from_ident(ts->thread_id);
#endif
}

// A freed thread state is often reused for the next thread, and pthread_t values are reused
// too: only the kernel tid tells two threads with the same tstate and ident apart.
bool same_thread(const ThreadRecord& rec, PyThreadState* ts, uint64_t tid) {
    return rec.ident == ts->thread_id && rec.native_tid == tid;
}

// Normal context. A thread's display name when threading does not know it.
std::string os_thread_name(uint64_t tid) {
    char buf[64];
    if (platform_thread_name(tid, buf, sizeof buf) > 0) return std::string(buf);
    return "Thread-" + std::to_string(tid);
}

}  // namespace

// GIL held. threading._active maps ident -> Thread; the returned dict is a new reference.
static PyObject* threading_active() {
    PyObject* name = PyUnicode_FromString("threading");
    if (name == nullptr) {
        PyErr_Clear();
        return nullptr;
    }
    PyObject* threading = PyImport_GetModule(name);
    Py_DECREF(name);
    if (threading == nullptr) {
        PyErr_Clear();
        return nullptr;
    }
    PyObject* active = PyObject_GetAttrString(threading, "_active");
    Py_DECREF(threading);
    if (active == nullptr || !PyDict_Check(active)) {
        Py_XDECREF(active);
        PyErr_Clear();
        return nullptr;
    }
    return active;
}

// GIL held. Names a thread after its threading.Thread while that is still registered.
static void refresh_name(ThreadRecord& rec, PyObject* active) {
    PyObject* key = PyLong_FromUnsignedLong(rec.ident);
    if (key == nullptr) {
        PyErr_Clear();
        return;
    }
    PyObject* thread = PyDict_GetItemWithError(active, key);  // borrowed
    Py_DECREF(key);
    if (thread == nullptr) {
        PyErr_Clear();
        return;
    }
    PyObject* name = PyObject_GetAttrString(thread, "_name");
    if (name != nullptr && PyUnicode_Check(name)) {
        const char* utf8 = PyUnicode_AsUTF8(name);
        if (utf8 != nullptr) {
            rec.name = utf8;
            rec.name_from_threading = true;
        }
    }
    Py_XDECREF(name);
    PyErr_Clear();
}

// GIL held. refresh_name() for one record, fetching threading._active itself.
static void name_from_threading(ThreadRecord& rec) {
    if (PyObject* active = threading_active()) {
        refresh_name(rec, active);
        Py_DECREF(active);
    }
}

Session::Session(const SessionConfig& config)
    : config_(config) {
    stack_buf_.reserve(kMaxPythonFrames + 1);
}

Session::~Session() = default;

Error Session::start() {
    capture_reset_stats();
    platform_reset_stats();
    start_ns_ = platform_monotonic_ns();
    // Before the first capture: from here no code object a sample may name can be freed
    // before the drain has resolved it.
    keepalive_.activate();
    // Handler first, then the table the handler reads, then the timers that fire into it.
    if (config_.native) {
        // Unwind tables and the eval loop's address ranges, before the first signal.
        unwind_ = std::make_unique<UnwindTables>();
        Error u = unwind_->refresh();
        if (!u.ok()) {
            unwind_.reset();
            return u;
        }
        Error r = find_eval_ranges(resolver_.symbolizer(), &eval_);
        if (!r.ok()) log_warning("native mode: %s; Python frames will sit above native ones", r.what);
        log_debug("native mode: %u eval-loop ranges, %llu modules without CFI", eval_.count,
                  static_cast<unsigned long long>(unwind_->modules_without_cfi()));
        platform_set_native_unwinding(true);
    }
    const TimerKind kind = config_.wall_mode ? TimerKind::kWall : config_.timer;
    Error e = platform_timer_create(config_.interval_ns, kind);
    if (!e.ok()) {
        if (config_.native) platform_set_native_unwinding(false);
        return e;
    }
    // The guard before the first capture: from here a torn frame chain costs a sample, never
    // the process.
    e = platform_fault_guard_install(capture_fault_claim());
    if (!e.ok()) {
        platform_timer_destroy();
        if (config_.native) platform_set_native_unwinding(false);
        return e;
    }
    capture_enable(&table_, unwind_.get());
    running_ = true;
    scan_threads();
    PlatformStats ps;
    platform_get_stats(&ps);
    if (table_.live() == 0 || !platform_sampling_armed()) {
        stop();
        return Error::runtime("no thread could be sampled (per-thread timers refused and no fallback)");
    }
    timer_name_ = ps.timer;
    sampling_signal_ = platform_sampling_signal();
    budget_.effective_interval_ns = config_.interval_ns;
    if (config_.max_overhead_pct > 0) {
        budget_.signal_cost_ns = platform_calibrate_signal_ns(200);
        window_start_ns_ = platform_monotonic_ns();
        window_cpu_ns_ = platform_process_cpu_ns();
        log_debug("overhead budget %.3f %%: one signal delivery costs %llu ns", config_.max_overhead_pct,
                  static_cast<unsigned long long>(budget_.signal_cost_ns));
    }
    if (config_.wall_mode && platform_traits().session_wall_census) {
        wall_ = std::make_unique<WallSampler>(&table_, config_.interval_ns);
        e = wall_->start();
        if (!e.ok()) {
            wall_.reset();
            stop();
            return e;
        }
    }
    start_drain_thread();
    log_debug("session started: interval %llu ns, timer %s, %zu threads",
              static_cast<unsigned long long>(config_.interval_ns), ps.timer, table_.live());
    return Error::none();
}

Error Session::stop() {
    if (!running_) return Error::runtime("session is not running");
    // First of all, no more captures: what the calling thread does from here is spprof's own
    // stopping, never a sample of the program (signals still arriving find no table).
    if (!capture_disable_and_wait()) {
        // A handler may still read this session's memory: it must never be freed.
        must_leak_ = true;
        log_warning("a sample capture did not finish within 1 s of stop(); leaking the session");
    }
    if (wall_) wall_->stop();  // no more sample requests or idle records from here on
    stop_drain_thread();
    // Threads that ended since the last drain are retired now, so they are reported as
    // ended (with their names) rather than as running at stop.
    scan_threads();
    PlatformStats ps;
    platform_get_stats(&ps);
    timer_name_ = ps.timer;  // a fallback may have happened after start()
    if (platform_sampling_signal() != 0) sampling_signal_ = platform_sampling_signal();
    for (size_t i = 0; i < table_.slot_count(); ++i)
        if (ThreadCtx* ctx = table_.at(i)) platform_thread_detach(ctx);
    platform_timer_destroy();
    platform_fault_guard_remove();  // no capture runs any more (capture_disable_and_wait)
    for (size_t i = 0; i < table_.slot_count(); ++i)
        if (ThreadCtx* ctx = table_.at(i)) ctx->state_.store(ThreadState::kDetached, std::memory_order_release);
    if (config_.native) platform_set_native_unwinding(false);
    end_ns_ = platform_monotonic_ns();
    refresh_cpu_all();
    refresh_names();
    drain_all();
    if (config_.progress) show_progress(true);
    for (auto& r : records_) {
        if (r.alive) {
            r.alive = false;
            r.ended_ns = 0;  // still running at stop: "ended" means ended before stop()
        }
    }
    running_ = false;
    const CaptureStats cs = capture_stats();
    log_debug("session stopped: %llu captured, %llu dropped (ring full %llu, busy %llu, memory %llu), "
              "%zu threads, %zu stacks, %zu samples, %zu code objects",
              static_cast<unsigned long long>(cs.captured),
              static_cast<unsigned long long>(cs.dropped_full + cs.dropped_busy + counters_.dropped_memory),
              static_cast<unsigned long long>(cs.dropped_full), static_cast<unsigned long long>(cs.dropped_busy),
              static_cast<unsigned long long>(counters_.dropped_memory), static_cast<size_t>(counters_.threads_registered),
              store_.stack_count(), store_.sample_count(), resolver_.code_count());
    return Error::none();
}

void Session::abandon_after_fork() {
    // The drain thread does not exist in the child and its mutex may be held: touch neither.
    running_ = false;
    drain_started_ = false;
}

uint32_t Session::new_record() {
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

ThreadCtx* Session::register_thread(PyThreadState* ts, unsigned long ident, uint64_t tid) {
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
    if (config_.native) platform_thread_stack_bounds(ident, &ctx->stack_lo_, &ctx->stack_hi_);
    if (slot_record_.size() <= slot) slot_record_.resize(slot + 1, kNoRecord);
    if (last_stack_.size() <= slot) last_stack_.resize(slot + 1, kNoStack);
    last_stack_[slot] = kNoStack;
    slot_record_[slot] = id;
    ThreadRecord& rec = records_[id];
    rec.ident = ident;
    rec.native_tid = tid;
    rec.tstate = ts;
    rec.slot = slot;
    rec.registered_ns = platform_monotonic_ns();
    rec.cpu_read_at_ns = rec.registered_ns;
    platform_thread_cpu_ns_of(tid, ident, &rec.cpu_start_ns);
    rec.cpu_last_ns = rec.cpu_start_ns;
    ctx->last_cpu_ns_.store(rec.cpu_start_ns, std::memory_order_relaxed);
    rec.name = os_thread_name(tid);
    name_from_threading(rec);
    name_bytes_ += rec.name.capacity();
    ThreadCtx* raw = table_.add(std::move(ctx));
    live_by_tstate_[ts] = slot;
    refused_.erase(ts);
    ++counters_.threads_registered;
    if (table_.live() > counters_.threads_alive_max) counters_.threads_alive_max = table_.live();
    Error e = platform_thread_attach(raw);
    if (!e.ok()) ++counters_.attach_failures;
    rec.cpu_timer = raw->cpu_timer_armed_.load(std::memory_order_acquire);
    if (config_.wall_mode) {
        if (ts == PyThreadState_Get()) {
            raw->needs_first_sample_.store(true, std::memory_order_release);  // it is running
        } else {
            record_initial_stack(raw, ts);  // not running Python while we hold the GIL
        }
    }
    log_debug("thread registered: slot %u record %u ident %lu tid %llu%s", slot, id, ident,
              static_cast<unsigned long long>(tid), e.ok() ? "" : " (not armed)");
    return raw;
}

Error Session::register_current_thread() {
    if (!running_) return Error::none();
    PyThreadState* ts = PyThreadState_Get();
    if (ts == drain_tstate_) return Error::none();
    const uint64_t tid = platform_current_tid();
    auto it = live_by_tstate_.find(ts);
    if (it != live_by_tstate_.end() && same_thread(records_[slot_record_[it->second]], ts, tid)) {
        // The scan can find a new thread before threading has put it in _active; the hook
        // runs after that, so this is the first moment its name is certain to be there.
        ThreadRecord& rec = records_[slot_record_[it->second]];
        if (!rec.name_from_threading) {
            name_bytes_ -= rec.name.capacity();
            name_from_threading(rec);
            name_bytes_ += rec.name.capacity();
        }
        return Error::none();
    }
    // Same tstate memory (and maybe the same pthread_t), new thread: the old one has ended.
    if (it != live_by_tstate_.end()) retire(it->second);
    register_thread(ts, ts->thread_id, tid);  // a thread the table cannot hold is counted there
    return Error::none();
}

void Session::scan_threads() {
    // Called with the GIL held. New thread states are only ever linked at the head of the
    // list (fully initialised first) and a thread unlinks its own state with the GIL held,
    // so walking the list under the GIL sees a consistent chain.
    PyInterpreterState* interp = PyThreadState_Get()->interp;
    seen_.clear();
    for (PyThreadState* ts = PyInterpreterState_ThreadHead(interp); ts != nullptr;
         ts = PyThreadState_Next(ts)) {
        if (ts == drain_tstate_ || ts->thread_id == 0) continue;  // ours, or not bound yet
#if PY_VERSION_HEX < 0x030C0000
        // Before 3.12 a new thread's state is preallocated by its creator and carries the
        // creator's ids until the new thread initialises it (gilstate_counter becomes 1).
        if (ts->gilstate_counter == 0) continue;
#endif
        const uint64_t tid = native_tid_of(ts);
        if (tid == 0) continue;  // native id not written yet: next scan
        auto it = live_by_tstate_.find(ts);
        if (it != live_by_tstate_.end() && same_thread(records_[slot_record_[it->second]], ts, tid)) {
            seen_.push_back(ts);
            continue;
        }
        if (it != live_by_tstate_.end()) retire(it->second);
        seen_.push_back(ts);
        if (register_thread(ts, ts->thread_id, tid) != nullptr && running_ && drain_started_)
            ++counters_.threads_discovered_by_scan;
    }
    std::sort(seen_.begin(), seen_.end());
    std::vector<uint32_t> gone;
    for (const auto& kv : live_by_tstate_)
        if (!std::binary_search(seen_.begin(), seen_.end(), kv.first)) gone.push_back(kv.second);
    for (uint32_t slot : gone) retire(slot);
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

void Session::retire(uint32_t slot) {
    ThreadCtx* ctx = slot < table_.slot_count() ? table_.at(slot) : nullptr;
    if (ctx == nullptr || slot >= slot_record_.size() || slot_record_[slot] == kNoRecord) return;
    const uint32_t id = slot_record_[slot];
    ThreadRecord& rec = records_[id];
    if (!rec.alive) return;
    platform_thread_detach(ctx);
    // The thread deleted its own thread state before we saw it gone; from then on its
    // handler finds no tstate and never touches the ring, so draining and reusing it is safe.
    ctx->state_.store(ThreadState::kDetached, std::memory_order_release);
    // Take the ring's turn for good: the wall sampler may be writing an idle record right
    // now; once we hold busy_, nobody writes this ring again.
    while (ctx->busy_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
    if (ctx->ring_) {
        drain_ring(ctx->ring_.get());
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
    // The thread's clock cannot be read any more. Its CPU timer counted its CPU up to the last
    // expiry (less than one interval short); without one, add what its samples saw since the
    // last reading.
    if (rec.cpu_timer) {
        const uint64_t counted = rec.cpu_start_ns + ctx->timer_cpu_ns_.load(std::memory_order_relaxed);
        if (counted > rec.cpu_last_ns) rec.cpu_last_ns = counted;
    } else {
        rec.cpu_last_ns += rec.weight_since_cpu_read;
    }
    rec.weight_since_cpu_read = 0;
    refresh_cpu(id);
    rec.ended_ns = platform_monotonic_ns();
    live_by_tstate_.erase(rec.tstate);
    table_.retire(ctx, rec.ended_ns);  // freed once no capture can hold it (ThreadTable::collect)
    // Right away if the gate is empty now (one atomic load): a thread-per-request server
    // retires thousands of threads between two drain passes.
    collect_retired();
    slot_record_[slot] = kNoRecord;
    ++counters_.threads_ended;
    log_debug("thread ended: slot %u record %u ident %lu tid %llu, %llu samples", slot, id, rec.ident,
              static_cast<unsigned long long>(rec.native_tid), static_cast<unsigned long long>(rec.samples));
    if (rec.samples == 0) {
        // Nothing in the profile names it: a thread-per-request server leaves no trace per
        // request, only these two counters.
        ++counters_.threads_unsampled;
        counters_.threads_unsampled_cpu_ns += rec.cpu_last_ns > rec.cpu_start_ns ? rec.cpu_last_ns - rec.cpu_start_ns : 0;
        name_bytes_ -= rec.name.capacity();
        rec = ThreadRecord{};
        rec.alive = false;
        rec.free = true;
        free_records_.push_back(id);
    }
}

void Session::refresh_cpu(uint32_t id) {
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

void Session::refresh_cpu_all() {
    for (uint32_t id = 0; id < records_.size(); ++id)
        if (records_[id].alive) refresh_cpu(id);
}

void Session::refresh_names() {
    PyObject* active = threading_active();
    if (active == nullptr) return;
    for (auto& rec : records_) {
        if (!rec.alive) continue;
        name_bytes_ -= rec.name.capacity();
        refresh_name(rec, active);
        name_bytes_ += rec.name.capacity();
    }
    Py_DECREF(active);
}

void Session::collect_retired() {
    // Ended threads no capture can still hold: every sampler (signal handlers, the wall census,
    // the Mach sampler's cycle) holds the capture gate while it uses a ctx.
    if (table_.quarantined() == 0) return;
    const bool gate_empty = capture_quiescent();
    table_.collect(platform_monotonic_ns(), gate_empty, 0);
}

size_t Session::thread_memory_bytes() const {
    // Rings by the pages they touched: a 256 KiB ring of a thread that wrote two records costs
    // the process 4 KiB, and counting capacity made a burst of short threads look like
    // hundreds of megabytes (and drop every sample at the limit).
    size_t rings = 0;
    for (size_t i = 0; i < table_.slot_count(); ++i)
        if (const ThreadCtx* ctx = table_.at(i))
            if (ctx->ring_) rings += ctx->ring_->touched_bytes();
    for (const auto& r : ring_pool_) rings += r->touched_bytes();
    return table_.memory_bytes() + rings + records_.capacity() * sizeof(ThreadRecord) +
           name_bytes_ + (free_records_.capacity() + slot_record_.capacity() + last_stack_.capacity()) * sizeof(uint32_t) +
           ring_pool_.capacity() * sizeof(ring_pool_[0]) +
           (live_by_tstate_.size() + refused_.size()) * 4 * sizeof(void*);  // a node and a bucket each
}

void Session::drain_ring(RingBuffer* ring) {
    size_t size = 0;
    while (const void* rec = ring->peek(&size)) {
        ++counters_.records;
        const auto* hdr = static_cast<const RawSampleHeader*>(rec);
        const auto* frames = reinterpret_cast<const RawFrame*>(hdr + 1);
        // The record names its thread by slot (or by tid only, kNoThreadSerial); the profile
        // by record id, which outlives the slot.
        const uint32_t slot = hdr->thread_serial;
        uint32_t id = slot < slot_record_.size() ? slot_record_[slot] : kNoRecord;
        if (slot == kNoThreadSerial) {
            for (size_t i = records_.size(); i-- > 0;) {
                if (records_[i].alive && records_[i].native_tid == hdr->native_tid) {
                    id = static_cast<uint32_t>(i);
                    break;
                }
            }
        }
        if (id == kNoRecord) {
            ++counters_.unknown_thread;
            ring->pop();
            continue;
        }
        const uint32_t serial = records_[id].slot;  // last_stack_ is per slot
        const uint32_t flags = hdr->flags;
        if (last_stack_.size() <= serial) last_stack_.resize(serial + 1, kNoStack);
        if (over_limit_) {
            ++counters_.dropped_memory;
            ring->pop();
            continue;
        }
        uint32_t stack;
        if ((flags & (kSampleIdle | kSampleRunnable)) && hdr->depth == 0 && last_stack_[serial] != kNoStack) {
            stack = last_stack_[serial];  // blocked (or preempted) since its last stack: reuse it
        } else {
            const uint32_t depth = hdr->depth <= kMaxPythonFrames ? hdr->depth : kMaxPythonFrames;
            if (hdr->native_depth > 0) {
                build_mixed_stack(hdr, frames, depth);
            } else {
                stack_buf_.clear();
                if (flags & kSampleTruncated) stack_buf_.push_back(Resolver::kTruncatedFrame);
                for (uint32_t i = depth; i-- > 0;) stack_buf_.push_back(resolver_.resolve(frames[i]));
            }
            // A thread caught with no Python frame at all (starting, ending, or C code between
            // two callbacks): its time is real, so it is kept under a frame that says so.
            if (stack_buf_.empty()) stack_buf_.push_back(Resolver::kNoPythonFrame);
            stack = store_.intern(stack_buf_.data(), static_cast<uint32_t>(stack_buf_.size()));
            last_stack_[serial] = stack;
        }
        if (!(flags & kSampleStackOnly)) {
            store_.add_sample(SampleRow{hdr->timestamp_ns, hdr->weight_ns, stack,
                                        (id & kSerialMask) | ((flags & 0xFFu) << kSerialBits)});
            ThreadRecord& owner = records_[id];
            ++owner.samples;
            if (!config_.wall_mode && !owner.cpu_timer && hdr->timestamp_ns > owner.cpu_read_at_ns)
                owner.weight_since_cpu_read += hdr->weight_ns;
        }
        ring->pop();
    }
}

void Session::build_mixed_stack(const RawSampleHeader* hdr, const RawFrame* frames, uint32_t depth) {
    // Leaf to root over the native frames; at each eval-loop frame, the Python frames of that
    // eval call: from the next unused one up to and including the next entry frame (every
    // frame on 3.9/3.10, is_entry on 3.11, the frame under a C-stack shim on 3.12+). So a
    // C -> Python -> C -> Python chain reads in true call order. Result: stack_buf_, root first.
    const auto* pcs = reinterpret_cast<const uint64_t*>(frames + hdr->depth);
    const uint32_t native_depth = hdr->native_depth <= kMaxNativeFrames ? hdr->native_depth : kMaxNativeFrames;
    native_buf_.clear();
    uint32_t py = 0;
    size_t outermost_python = 0;  // native_buf_ size right after the last Python frame pushed
    for (uint32_t i = 0; i < native_depth; ++i) {
        const uint64_t lookup = i == 0 ? pcs[i] : pcs[i] - 1;  // a return address points past the call
        if (eval_.count > 0 && is_eval_frame(eval_, lookup)) {
            if (config_.interpreter_frames) {
                bool interp = false;
                native_buf_.push_back(resolver_.resolve_native(lookup, &interp));
            }
            while (py < depth) {
                const RawFrame& f = frames[py++];
                native_buf_.push_back(resolver_.resolve(f));
                outermost_python = native_buf_.size();
                if (f.instr & kInstrEntryFlag) break;
            }
            continue;
        }
        bool interpreter = false;
        const uint32_t id = resolver_.resolve_native(lookup, &interpreter);
        if (interpreter && !config_.interpreter_frames) continue;  // CPython's own C frames
        native_buf_.push_back(id);
    }
    // Python frames the native walk did not reach (it stopped early, or no eval ranges are
    // known) go at the root end, where they belong.
    while (py < depth) {
        native_buf_.push_back(resolver_.resolve(frames[py++]));
        outermost_python = native_buf_.size();
    }
    // Native frames rootward of the outermost Python frame are process or thread start-up
    // (_start, main, clone): folded unless interpreter frames were asked for.
    if (outermost_python > 0 && !config_.interpreter_frames) native_buf_.resize(outermost_python);
    stack_buf_.clear();
    if (hdr->flags & kSampleTruncated) stack_buf_.push_back(Resolver::kTruncatedFrame);
    for (size_t i = native_buf_.size(); i-- > 0;) stack_buf_.push_back(native_buf_[i]);
}

void Session::record_initial_stack(ThreadCtx* ctx, PyThreadState* ts) {
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

void Session::drain_all() {
    over_limit_ = memory_bytes() > config_.memory_limit_bytes;
    for (size_t i = 0; i < table_.slot_count(); ++i) {
        ThreadCtx* ctx = table_.at(i);
        if (ctx != nullptr && ctx->ring_) drain_ring(ctx->ring_.get());
    }
    collect_retired();
    keepalive_.end_of_pass();
    ++counters_.drains;
}

void Session::periodic() {
    if (!running_) return;
    const uint64_t t0 = platform_monotonic_ns();
    if (platform_keep_handler()) {
        ++counters_.handler_retaken;
        log_debug("the application installed its own handler on our sampling signal: chaining to it, ours back in front");
    }
    scan_threads();
    // CPU clocks feed the thread table only (registration and retirement read them too, and
    // the handler records CPU with each sample): every 10th pass is plenty. Names every pass:
    // once a thread has ended, threading has forgotten it, so a rename is seen only if a pass
    // falls between it and the thread's end.
    if (passes_++ % 10 == 0) refresh_cpu_all();
    refresh_names();
    drain_all();
    if (unwind_) unwind_->refresh();  // modules loaded since the last pass (cheap otherwise)
    if (config_.progress) show_progress(false);
    drain_ns_ += platform_monotonic_ns() - t0;
    if (config_.max_overhead_pct > 0) apply_budget();
}

void Session::apply_budget() {
    // Our cost over the window: time inside captures, signal deliveries at their calibrated
    // cost, and the drain's GIL time; against the process's CPU time (or the elapsed time if
    // the program mostly waited). Over budget: widen the interval in proportion (plus a
    // margin); well under: narrow it back towards the requested one. Drain thread, GIL held.
    constexpr uint64_t kWindowNs = 500'000'000;  // long enough to average, short enough to react
    const uint64_t now = platform_monotonic_ns();
    if (now - window_start_ns_ < kWindowNs) return;
    const CaptureStats cs = capture_stats();
    PlatformStats ps;
    platform_get_stats(&ps);
    const uint64_t cpu = platform_process_cpu_ns();
    const double cost = static_cast<double>(cs.capture_ns - window_capture_ns_) +
                        static_cast<double>(ps.signals - window_signals_) * static_cast<double>(budget_.signal_cost_ns) +
                        static_cast<double>(drain_ns_ - window_drain_ns_);
    const double elapsed = static_cast<double>(now - window_start_ns_);
    const double used = static_cast<double>(cpu - window_cpu_ns_);
    const double pct = 100.0 * cost / (used > elapsed ? used : elapsed);
    budget_.last_overhead_pct = pct;
    window_start_ns_ = now;
    window_capture_ns_ = cs.capture_ns;
    window_signals_ = ps.signals;
    window_drain_ns_ = drain_ns_;
    window_cpu_ns_ = cpu;

    const double budget = config_.max_overhead_pct;
    const uint64_t current = budget_.effective_interval_ns;
    uint64_t next = current;
    if (pct > budget) {
        next = static_cast<uint64_t>(static_cast<double>(current) * (pct / budget) * 1.25);
    } else if (pct < budget / 3 && current > config_.interval_ns) {
        next = current * 2 / 3;
    }
    // Never below the requested interval; never past 100 times it (or 1 s): a profile that
    // coarse says little, and the drain's own fixed cost is not reduced by widening further.
    const uint64_t widest = config_.interval_ns * 100 < 1'000'000'000ull ? config_.interval_ns * 100 : 1'000'000'000ull;
    if (next < config_.interval_ns) next = config_.interval_ns;
    if (next > widest) next = widest;
    if (next == current) return;
    Error e = platform_set_interval(next);
    if (!e.ok()) {
        log_warning("overhead budget disabled: %s", e.what);
        config_.max_overhead_pct = 0;
        return;
    }
    for (size_t i = 0; i < table_.slot_count(); ++i)
        if (ThreadCtx* ctx = table_.at(i)) platform_thread_set_interval(ctx, next);
    if (wall_) wall_->set_interval(next);
    budget_.effective_interval_ns = next;
    ++budget_.interval_changes;
    log_debug("overhead %.3f %% against a budget of %.3f %%: interval now %.2f ms", pct, budget,
              static_cast<double>(next) / 1e6);
}

void Session::show_progress(bool final) {
    // Drain thread (or stop()), GIL held: one carriage-returned line a second on stderr.
    if (final) {
        if (progress_shown_) {
            static const char kClear[] = "\r\033[K";
            ssize_t ignored = write(2, kClear, sizeof kClear - 1);
            (void)ignored;
        }
        return;
    }
    const uint64_t now = platform_monotonic_ns();
    if (now - last_progress_ns_ < 1'000'000'000ull) return;
    last_progress_ns_ = now;
    const CaptureStats cs = capture_stats();
    const unsigned long long dropped = cs.dropped_full + cs.dropped_busy + counters_.dropped_memory;
    char line[160];
    const int n = std::snprintf(line, sizeof line,
                                "\r\033[Kspprof: recording %.0fs, %zu samples, %llu dropped, %zu threads",
                                static_cast<double>(now - start_ns_) / 1e9, store_.sample_count(), dropped,
                                live_by_tstate_.size());
    if (n > 0) {
        ssize_t ignored = write(2, line, static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1);
        (void)ignored;
        progress_shown_ = true;
    }
}

void Session::start_drain_thread() {
    drain_stop_ = false;
    if (pthread_create(&drain_thread_, nullptr, &Session::drain_main, this) == 0) {
        drain_started_ = true;
    } else {
        log_warning("could not start the drain thread; samples are drained at stop() only");
    }
}

void Session::stop_drain_thread() {
    if (!drain_started_) return;
    {
        std::lock_guard<std::mutex> lock(drain_mutex_);
        drain_stop_ = true;
    }
    drain_cv_.notify_all();
    // The drain thread may be waiting for the GIL we hold.
    Py_BEGIN_ALLOW_THREADS
    pthread_join(drain_thread_, nullptr);
    Py_END_ALLOW_THREADS
    drain_started_ = false;
    drain_tstate_ = nullptr;
}

void* Session::drain_main(void* arg) {
    auto* self = static_cast<Session*>(arg);
    PyGILState_STATE gil = PyGILState_Ensure();
    self->drain_tstate_ = PyThreadState_Get();
    PyThreadState* saved = PyEval_SaveThread();
    const auto period = std::chrono::milliseconds(self->config_.drain_interval_ms);
    // Each pass takes the GIL from the running program (a hand-off, two context switches, a
    // thread scan): with the rings far from full, wait up to kMaxIdlePeriods periods between
    // passes. A capture that fills its ring past a quarter, or an application that replaced
    // our signal handler, gets a pass at the next wake-up.
    const uint32_t max_idle = kMaxIdlePeriods;
    uint32_t idle_periods = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(self->drain_mutex_);
            self->drain_cv_.wait_for(lock, period, [self] { return self->drain_stop_; });
            if (self->drain_stop_) break;
        }
        // Every wake-up, without the GIL: a SIGSEGV/SIGBUS handler the program installed since
        // the last one is put behind the fault guard again.
        platform_fault_guard_keep();
        if (++idle_periods < max_idle && !capture_take_drain_request() && !platform_handler_replaced())
            continue;
        idle_periods = 0;
        PyEval_RestoreThread(saved);
        self->periodic();
        saved = PyEval_SaveThread();
    }
    PyEval_RestoreThread(saved);
    PyGILState_Release(gil);
    return nullptr;
}

}  // namespace spprof
