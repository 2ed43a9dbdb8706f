// session_threads.h: the session's sampled threads: registration, the scan, retirement, records, names, CPU time.
//
// Every Python thread the session samples gets a slot in the ThreadTable (the ThreadCtx the
// signal path reads), a ring (from a pool of drained rings when one is free) and a
// ThreadRecord (what the profile says about it). Threads are found three ways: a scan of the
// interpreter's thread states at start() and on every drain pass (threads made from C),
// and the threading hook, on the new thread itself (register_current), which also records the
// thread's entry stack. A hooked thread's last CPU reading is taken as it ends
// (thread_exiting), where the expiries its CPU timer owed it become one thread-end sample on
// its last stack. When a thread ends
// (its state is gone, or reused by another thread), it is retired: timer detached, ring
// emptied through the RingSink (the drain) and pooled, ctx quarantined in the table until no
// capture can hold it. A thread that ended without a sample leaves no record.
// All of it normal context, GIL held (one caller at a time: Python calls, the drain thread).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "../capture/ringbuffer.h"
#include "../capture/sample_record.h"
#include "session_config.h"
#include "../capture/thread_table.h"
#include "sorted_tids.h"
#include "thread_names.h"  // IdentIndex

namespace spprof {

// What the profile says about one sampled thread (by record id, the serial in SampleRow). A
// thread that ends without a single sample leaves no record: its id is reused.
struct ThreadRecord {
    unsigned long ident = 0;       // threading.get_ident()
    uint64_t native_tid = 0;       // threading.get_native_id()
    std::string name;              // threading name, else the OS name
    bool name_from_threading = false;
    uint64_t name_hash = 0;        // the str's hash whose text refresh_names copied into name (0: none)
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
    // Threads found by the scan of the process's OS threads (os_thread_scan.cpp).
    bool native_only = false;      // found without a Python state: its tid is its identity
    bool signal_blocked = false;   // blocks the sampling signal: left alone, its CPU reported
    bool end_settled = false;      // its exit watch settled its timer's schedule (TimerResidual)
    bool exiting = false;          // its exit watch ran: its state is gone because it ends
    uint64_t start_ticks = 0;      // when its OS thread started (0: not read); tells a reused tid apart
    uint64_t sampled_ns = 0;       // on-CPU weight of its samples
    uint64_t cpu_at_check_ns = 0;  // CPU clock and captures at the last signal-mask check
    uint64_t captures_at_check = 0;
};

// Where a thread's samples go (the drain). GIL held, called by SessionThreads.
class RingSink {
public:
    // An ended thread's ring, no longer written by anyone: empty it into the profile now, its
    // thread's record still in place, before the ring goes to the next thread.
    virtual void drain_ring(RingBuffer* ring) = 0;
    // A new thread took `slot`: nothing known about the slot's previous thread applies to it.
    virtual void slot_taken(uint32_t slot) = 0;

protected:
    ~RingSink() = default;
};

class SessionThreads {
public:
    static constexpr uint32_t kNoRecord = 0xFFFFFFFFu;  // no record: a free slot, an unknown thread

    SessionThreads(const SessionConfig& config, SessionCounters& counters);
    SessionThreads(const SessionThreads&) = delete;
    SessionThreads& operator=(const SessionThreads&) = delete;

    // Before the first registration: where retired threads' rings are drained.
    void set_ring_sink(RingSink* sink) { sink_ = sink; }

    // GIL held. Registers thread states not seen before, retires threads whose state is gone
    // or reused. `exclude`: a state never sampled (the drain thread's). `count_found`: new
    // threads count as threads_discovered_by_scan (the drain's scans, not start()'s).
    void scan(PyThreadState* exclude, bool count_found);
    // GIL held, on the thread that owns `ts` (the threading hook). Idempotent; retires the
    // previous thread of a reused state; names the thread from threading when it is known.
    // Records the thread's entry stack (entry_code, may be null: the target's code, put under
    // the frames the walk finds; frames of skip_code at the leaf, the hook's own, left out):
    // the stack of a thread-end sample when no sample came before it.
    // name (may be null): the Thread object's, for when threading's _active does not name it
    // yet (the hook runs before that); refresh_names still follows a rename.
    // tid: the calling thread's kernel id, or 0 to ask the kernel (a system call).
    void register_current(PyThreadState* ts, PyObject* entry_code = nullptr, PyObject* skip_code = nullptr,
                          const char* name = nullptr, uint64_t tid = 0);
    // GIL held, on the thread that owns `ts`, as it ends (its state being cleared): deletes
    // its CPU timer, writes the expiries it owed as a thread-end sample (depth 0: the drain
    // gives it the thread's last stack) and takes its CPU clock's last reading. The next scan
    // retires it.
    void thread_exiting(PyThreadState* ts, uint64_t tid);
    // stop(), GIL held, captures disabled, threads still attached: every live thread's timer
    // deleted, what it owed (platform_thread_finish) written as a thread-end sample; in wall
    // mode its time off CPU since the census's last visit as well (write_wait_tail).
    void finish_all();
    // GIL held. CPU times of the live threads from their clocks.
    void refresh_cpu_all();
    // GIL held, before a window's drain: the waits the wall census is passing over get their
    // time up to now (write_wait_tail), so that a window holds its whole span of them.
    void settle_waits();
    // GIL held, on the thread calling stop(), first: its time off CPU since the census's last
    // visit goes to its last stack (write_wait_tail, as a thread that ends), not to the stack
    // the stop's census would find it on, spprof's own stop(), whose samples are dropped.
    void settle_caller();
    // GIL held, wall mode. Around a fork in the parent, the census is away: 3.13+ brings it
    // back at the forking thread's next bytecode, which comes only after a call that follows
    // the fork returns (`pid = os.fork(); os.waitpid(pid, 0)`). fork_began: on the forking
    // thread, as spprof's threads stop. settle_caller_after_fork: on the thread restarting
    // them once it has left os.fork (3.13+'s pending call; inside the hook the stack is
    // spprof's); when it is the one that forked and was off CPU for a census or more since, that
    // time goes to the stack it has now (the call that just returned), the time before the
    // fork to its last stack, rather than all of it to its last stack.
    void fork_began();
    void settle_caller_after_fork();
    // GIL held. Names of the live threads from threading._active (a rename is kept).
    void refresh_names();
    // GIL held. Frees the retired ctxs no capture can still hold.
    void collect_retired();
    // stop(), after the last drain: threads still alive are "running at stop", not ended.
    void mark_running_at_stop();
    // GIL held, after scan(): every OS thread of the process that is neither sampled through a
    // Python state nor spprof's own gets a native-only ctx (os_thread_scan.cpp); native-only
    // threads that ended are retired; a thread that blocks the sampling signal is left alone.
    // Returns false where the platform cannot list its threads. `prelisted`: the drain's pass,
    // which uses the list prelist_os_threads() took just before (when it did).
    // Every thread that blocks the sampling signal has its CPU clock read each pass; of the
    // others at most kMaskChecksPerPass, in turn (check_signal_mask).
    bool scan_os_threads(bool prelisted = false);
    // The drain thread, GIL NOT held, right before its pass: the OS thread list for that
    // pass's scan_os_threads(true). Some 5 ms with 5,000 threads (getdents64 of
    // /proc/self/task) the program no longer waits for the GIL. Touches only prelisted_*,
    // which only the drain thread uses.
    void prelist_os_threads();
    // Unblocked threads whose CPU clock check_signal_mask reads per pass: with 5,000 threads a
    // clock read each (a system call) held the GIL for some 3 ms every pass. A thread that
    // blocks the signal is then found within slot_count / kMaskChecksPerPass passes.
    static constexpr size_t kMaskChecksPerPass = 256;
    // From now on, registrations count the CPU a thread used before it was found
    // (SessionCounters::cpu_before_found_ns): end of start().
    void begin_window() { window_open_ = true; }
    // CPU time of the threads that block the sampling signal, less what their samples hold
    // (a thread may block it late in its life). GIL held.
    uint64_t blocked_cpu_ns() const;

    ThreadTable& table() { return table_; }
    const ThreadTable& table() const { return table_; }
    const std::vector<ThreadRecord>& records() const { return records_; }
    ThreadRecord& record(uint32_t id) { return records_[id]; }
    // The record of the live thread in `slot`, or kNoRecord.
    uint32_t record_of_slot(uint32_t slot) const { return slot < slot_record_.size() ? slot_record_[slot] : kNoRecord; }
    size_t live_count() const { return live_by_tstate_.size() + live_by_tid_.size(); }
    // Contexts alive and in quarantine, the pages rings in use and pooled touched, records,
    // names and the indexes.
    size_t memory_bytes() const;
    // The pages the rings in use and pooled have touched (part of memory_bytes()).
    size_t ring_touched_bytes() const;
    size_t share_touched_bytes() const;

private:
    // from_hook: the threading hook, on a thread born in the session: its CPU counts from 0.
    // arm: give it a CPU timer now (false: the caller decides, e.g. after its signal-mask check).
    // name: the thread's, when the caller knows it (the hook, from the Thread object): no
    // /proc read (a file opened on the program's thread, ~10 % of a short thread's start).
    ThreadCtx* register_thread(PyThreadState* ts, unsigned long ident, uint64_t tid, bool from_hook = false,
                               bool arm = true, const char* name = nullptr);
    // os_thread_scan.cpp: whether thread `tid` used kMaskedRanNs of CPU (a thread seen with
    // every signal blocked is taken for one that blocks the sampling signal only then); a
    // thread without a Python state; a Python thread whose state is gone while its OS thread
    // lives on (same record); the signal-mask check of a live thread.
    static constexpr uint64_t kMaskedRanNs = 1000000;
    static bool ran_since_birth(uint64_t tid);
    ThreadCtx* register_native(uint64_t tid, uint64_t start_ticks, bool blocked);
    bool continue_as_native(uint32_t slot);
    void check_signal_mask(uint32_t slot);
    void mark_signal_blocked(ThreadCtx* ctx, ThreadRecord& rec);
    uint32_t new_record();
    void retire(uint32_t slot);
    void refresh_cpu(uint32_t record);
    void record_initial_stack(ThreadCtx* ctx, PyThreadState* ts);
    void record_entry_stack(ThreadCtx* ctx, PyThreadState* ts, PyObject* entry_code, PyObject* skip_code);
    // The thread's end record: CPU-timer expiries of its last stretch, plus the time of a
    // deferred sample it did not live to carry (ThreadCtx::carried_ns_); none if neither.
    void settle_end(ThreadCtx* ctx, uint64_t expiries, uint64_t weight_ns);
    void write_thread_end(ThreadCtx* ctx, uint64_t expiries, uint64_t weight_ns);
    void write_thread_end_record(ThreadCtx* ctx, const RawSampleHeader& hdr, const RawFrame* frames, uint64_t expiries);
    // Wall mode: the thread's time off CPU since the census's last visit (since registration
    // if none), as an idle record (wall_census.h), unless the census took it first. `ending`:
    // on the thread as it ends, the census's carry included; else a window's end, for a long
    // wait only, after which the census measures from now.
    void write_wait_tail(ThreadCtx* ctx, bool ending);
    // The idle record of a span from `from` to `now`, less the CPU it `ran` meanwhile, plus
    // off-CPU time carried from before `from`.
    // With `frames` (depth `depth`), on that stack; else depth 0 (the thread's last stack, or
    // with kSampleAtWait in `flags` the stack of its latest idle record).
    void write_idle_tail(ThreadCtx* ctx, uint64_t from, uint64_t now, uint64_t ran, uint64_t carry,
                         const RawFrame* frames = nullptr, uint32_t depth = 0, uint32_t flags = 0);
    void name_from_threading(ThreadRecord& rec);
    // The ctx of the calling thread while attached (GIL held), else null.
    ThreadCtx* attached_caller(PyThreadState** ts_out);

    const SessionConfig& config_;
    SessionCounters& counters_;
    RingSink* sink_ = nullptr;
    ThreadTable table_;
    std::vector<ThreadRecord> records_;
    std::vector<uint32_t> free_records_;        // ids of records with free set
    std::vector<uint32_t> slot_record_;         // by slot: the record of its live thread
    std::vector<std::unique_ptr<RingBuffer>> ring_pool_;  // rings of ended threads, drained
    size_t rings_owned_ = 0;                     // rings allocated (in use or pooled)
    size_t name_bytes_ = 0;                      // sum of record name capacities
    IdentIndex name_index_;                      // refresh_names' scratch, reused
    uint64_t next_generation_ = 1;
    // fork_began's reading on the forking thread (serial, monotonic and CPU clocks); serial
    // kNoForkCaller when none is pending.
    static constexpr uint32_t kNoForkCaller = UINT32_MAX;
    uint32_t fork_caller_serial_ = kNoForkCaller;
    uint64_t fork_began_ns_ = 0;
    uint64_t fork_began_cpu_ns_ = 0;
    std::unordered_map<PyThreadState*, uint32_t> live_by_tstate_;  // -> slot
    std::unordered_map<uint64_t, uint32_t> live_by_tid_;  // native-only threads: tid -> slot
    std::unordered_map<uint64_t, uint32_t> python_by_tid_;  // threads with a state: tid -> slot
    SortedTids python_tids_;  // python_by_tid_'s keys, sorted (scan_os_threads); told of each change
    std::vector<OsThread> os_found_;     // OS scan scratch, reused
    std::vector<OsThread> prelisted_;    // the drain thread's, taken without the GIL
    bool prelisted_ok_ = false;          // platform_os_threads' answer for prelisted_
    bool prelisted_ready_ = false;       // prelisted_ is for the coming pass
    size_t prelisted_bytes_ = 0;         // prelisted_'s capacity as of the last pass (GIL held)
    size_t mask_cursor_ = 0;             // check_signal_mask's turn: the slot to check next
    // Threads with a state that ended (their exit watch ran, or the scan retired them) -> the
    // OS scan's pass then: the OS thread outlives its state by a moment, and must not come back
    // as a new native-only thread. Forgotten two passes later.
    std::unordered_map<uint64_t, uint64_t> ended_tids_;
    // States the last thread-list reading skipped (a thread being started: its OS thread
    // exists, its state is not bound yet). While there are any, a new tid waits one pass
    // before it becomes native-only: it may be that thread (deferred_: the ones waiting).
    size_t pending_states_ = 0;
    std::unordered_set<uint64_t> deferred_, deferred_next_;
    // New threads seen blocking the sampling signal once: pthread_create's child blocks every
    // signal for its first instructions, so one reading is not enough to leave a thread alone
    // for its whole life. Blocked on the next pass as well: it blocks the signal.
    std::unordered_set<uint64_t> masked_once_, masked_once_next_;
    uint64_t os_passes_ = 0;
    bool os_scan_supported_ = true;
    bool window_open_ = false;
    std::unordered_map<PyThreadState*, uint64_t> refused_;  // tstate -> tid: not held, counted once
    std::vector<PyThreadState*> seen_;   // scan scratch, reused
public:
    struct FoundState {  // one entry of the interpreter's thread list, as read
        PyThreadState* ts;
        unsigned long ident;
        uint64_t tid;
    };
private:
    // GIL held: the thread list into found_, in a loop that calls nothing.
    void read_thread_list(PyThreadState* exclude);
    std::vector<FoundState> found_;      // scan scratch, reused: the list as last read
    std::vector<FoundState> previous_;   // scan scratch: the reading before
    std::unordered_set<PyThreadState*> refused_now_;  // scan scratch: refused in this scan
    // Registered by this scan, start time not read yet: date_found reads them all at once.
    struct Undated {
        uint32_t record;
        uint64_t tid;
    };
    std::vector<Undated> undated_;        // scan scratch
    std::vector<uint64_t> undated_tids_;  // scan scratch
    void date_found();
};

}  // namespace spprof
