// session.h: one profiling session: the sampled threads, the drain, and what they produce.
//
// Lifecycle (all GIL held, from Python): start() installs the timer, registers every Python
// thread that exists and starts the drain thread; stop() stops the drain, disarms every timer,
// waits for captures in flight, drains the rings one last time and keeps the result for
// export; the Session is then deleted. There is at most one Session per process, owned by
// module state; the signal path reaches it only through the ThreadTable handed to
// capture_enable().
//
// The drain thread wakes every drain_interval_ms and, when a ring is over a quarter full or
// at least every 5th wake-up (every one on macOS), takes the GIL and runs periodic():
// discovers threads created from C (a scan of the interpreter's thread states), retires
// threads that ended, refreshes thread names and CPU times, and drains every ring through
// the resolver into the stack store. Memory therefore stays bounded by distinct stacks, not
// by samples waiting in rings.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "code_keepalive.h"
#include "error.h"
#include "platform/platform.h"
#include "resolver.h"
#include "stack_store.h"
#include "thread_table.h"
#include "unwind/eval_ranges.h"
#include "unwind/unwind_tables.h"
#include "wall_sampler.h"

namespace spprof {

struct SessionConfig {
    uint64_t interval_ns = 10'000'000;
    TimerKind timer = TimerKind::kAuto;
    size_t memory_limit_bytes = 256u << 20;
    size_t ring_bytes = 256u << 10;
    uint32_t drain_interval_ms = 50;
    bool wall_mode = false;  // sample every thread at the interval, running or blocked
    bool progress = false;   // a live status line on stderr (the CLI sets it on a terminal)
    bool native = false;     // unwind native frames too and interleave them with Python's
    bool interpreter_frames = false;  // native mode: keep the interpreter's own C frames
    double max_overhead_pct = 0;      // > 0: widen the interval to keep our cost under this
};

// The overhead budget's view of the last window (stats()).
struct BudgetState {
    uint64_t signal_cost_ns = 0;       // calibrated cost of one signal delivery
    uint64_t effective_interval_ns = 0;
    uint64_t interval_changes = 0;
    double last_overhead_pct = 0;      // measured over the last window
};

// What the profile says about one sampled thread (by record id, the serial in SampleRow). A
// thread that ends without a single sample leaves no record: its id is reused.
struct ThreadRecord {
    unsigned long ident = 0;       // threading.get_ident()
    uint64_t native_tid = 0;       // threading.get_native_id()
    std::string name;              // threading name, else the OS name
    bool name_from_threading = false;
    uint64_t cpu_start_ns = 0;     // thread CPU clock when registered
    uint64_t cpu_last_ns = 0;      // last reading while alive
    uint64_t cpu_read_at_ns = 0;   // monotonic time of that reading
    bool cpu_timer = false;        // a per-thread CPU timer counted its CPU (ThreadCtx::timer_cpu_ns_)
    // Without a CPU timer (itimer fallback): CPU time of the samples taken after that reading
    // (a sample taken before it but drained after is already in the reading).
    uint64_t weight_since_cpu_read = 0;
    uint64_t registered_ns = 0;
    uint64_t ended_ns = 0;         // 0 while alive
    PyThreadState* tstate = nullptr;
    uint32_t slot = 0;             // its ThreadTable slot while alive
    uint64_t samples = 0;          // samples stored for it
    bool alive = true;
    bool free = false;             // ended without samples: id free for the next thread
};

struct SessionCounters {
    uint64_t drains = 0;
    uint64_t records = 0;           // records read from rings
    uint64_t dropped_memory = 0;    // records refused by the memory limit
    uint64_t unknown_thread = 0;    // records naming no thread we know
    uint64_t threads_discovered_by_scan = 0;
    uint64_t threads_ended = 0;
    uint64_t threads_registered = 0;     // every thread the session sampled, ever
    uint64_t threads_unsampled = 0;      // ended without a sample: not in the profile
    uint64_t threads_unsampled_cpu_ns = 0;
    uint64_t threads_refused = 0;        // more alive at once than the table holds
    uint64_t threads_alive_max = 0;
    uint64_t attach_failures = 0;
    uint64_t handler_retaken = 0;   // times the application replaced our SIGPROF handler
};

class Session {
public:
    explicit Session(const SessionConfig& config);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // GIL held. Starts sampling every existing Python thread.
    Error start();
    // GIL held (released internally while joining the drain thread). After it returns no
    // timer, handler or thread of ours remains and every captured record is in the store.
    Error stop();
    // GIL held, on the thread to register (the threading hook). Idempotent.
    Error register_current_thread();
    // GIL held: what the drain thread does every interval; also callable on demand.
    void periodic();
    // In a forked child: forget everything without touching locks or Python objects.
    void abandon_after_fork();

    const SessionConfig& config() const { return config_; }
    const std::vector<ThreadRecord>& threads() const { return records_; }
    const StackStore& store() const { return store_; }
    const Resolver& resolver() const { return resolver_; }
    // GIL held, after stop(): drop the references the resolver holds.
    void release_references() {
        keepalive_.deactivate();
        resolver_.release();
    }
    const CodeKeepAlive& keepalive() const { return keepalive_; }
    const SessionCounters& counters() const { return counters_; }
    uint64_t start_ns() const { return start_ns_; }
    uint64_t end_ns() const { return end_ns_; }
    // Everything the session holds: stacks, samples, resolved frames, and per-thread memory
    // (contexts, rings, thread records).
    size_t memory_bytes() const { return store_.memory_bytes() + resolver_.memory_bytes() + thread_memory_bytes(); }
    size_t thread_memory_bytes() const;
    bool running() const { return running_; }
    // stop() could not prove every capture finished: the owner must not delete the session.
    bool must_leak() const { return must_leak_; }
    const char* timer_name() const { return timer_name_; }  // the timer this session used
    int sampling_signal() const { return sampling_signal_; }  // the signal samples came on (0: none)
    const WallSampler* wall_sampler() const { return wall_.get(); }
    const UnwindTables* unwind_tables() const { return unwind_.get(); }
    const BudgetState& budget() const { return budget_; }
    uint64_t drain_ns() const { return drain_ns_; }
    uint32_t eval_range_count() const { return eval_.count; }

private:
    ThreadCtx* register_thread(PyThreadState* ts, unsigned long ident, uint64_t tid);
    uint32_t new_record();
    void scan_threads();
    void retire(uint32_t slot);
    void collect_retired();
    void refresh_cpu_all();
    void refresh_names();
    void refresh_cpu(uint32_t record);
    void drain_ring(RingBuffer* ring);
    void record_initial_stack(ThreadCtx* ctx, PyThreadState* ts);
    void build_mixed_stack(const RawSampleHeader* hdr, const RawFrame* frames, uint32_t depth);
    void show_progress(bool final);
    void apply_budget();
    void drain_all();
    void start_drain_thread();
    void stop_drain_thread();
    static void* drain_main(void* arg);

    SessionConfig config_;
    ThreadTable table_;
    std::vector<ThreadRecord> records_;
    std::vector<uint32_t> free_records_;        // ids of records with free set
    std::vector<uint32_t> slot_record_;         // by slot: the record of its live thread
    std::vector<std::unique_ptr<RingBuffer>> ring_pool_;  // rings of ended threads, drained
    size_t rings_owned_ = 0;                     // rings allocated (in use or pooled)
    size_t name_bytes_ = 0;                      // sum of record name capacities
    uint64_t next_generation_ = 1;
    std::unordered_map<PyThreadState*, uint32_t> live_by_tstate_;  // -> slot
    std::unordered_map<PyThreadState*, uint64_t> refused_;  // tstate -> tid: not held, counted once
    Resolver resolver_;
    CodeKeepAlive keepalive_;  // after resolver_: destroyed first, while the resolver still holds its refs
    StackStore store_;
    SessionCounters counters_;
    std::vector<uint32_t> stack_buf_;
    std::vector<uint32_t> last_stack_;  // per slot: the stack idle records reuse
    std::unique_ptr<WallSampler> wall_;
    // Native mode. Destroyed with the session, after stop() has restored the handler.
    std::unique_ptr<UnwindTables> unwind_;
    EvalRanges eval_;
    std::vector<uint32_t> native_buf_;  // leaf-first frame ids while interleaving
    std::vector<PyThreadState*> seen_;   // scan_threads scratch, reused
    uint64_t passes_ = 0;
    uint64_t start_ns_ = 0, end_ns_ = 0;
    bool running_ = false;
    bool over_limit_ = false;
    bool must_leak_ = false;
    const char* timer_name_ = "none";
    int sampling_signal_ = 0;
    uint64_t last_progress_ns_ = 0;
    // Overhead budget: cost and CPU baselines at the start of the current window.
    BudgetState budget_;
    uint64_t drain_ns_ = 0;  // time the drain spent holding the GIL
    uint64_t window_start_ns_ = 0, window_capture_ns_ = 0, window_signals_ = 0,
             window_drain_ns_ = 0, window_cpu_ns_ = 0;
    bool progress_shown_ = false;

    // Drain thread.
    pthread_t drain_thread_{};
    bool drain_started_ = false;
    PyThreadState* drain_tstate_ = nullptr;  // excluded from sampling
    std::mutex drain_mutex_;
    std::condition_variable drain_cv_;
    bool drain_stop_ = false;
};

}  // namespace spprof
