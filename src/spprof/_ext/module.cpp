// module.cpp: the Python bindings of spprof._ext, and nothing else.
//
// Module state owns the one Session. Every entry point runs with the GIL held, turns an
// internal Error into a Python exception (the only place that happens) and returns plain
// Python data; the typed API (Profile, Sample, Frame) is built in Python from it.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <csignal>
#include <ctime>
#include <cstddef>
#include <cstring>
#include <chrono>
#include <memory>
#include <thread>

#include "session/code_keepalive.h"
#include "session/control_wake.h"
#include "session/drain_timer.h"
#include "session/python_tick.h"
#include "session/exit_dump.h"
#include "error.h"
#include "exit_calls.h"
#include "exit_signals.h"
#include "framewalker.h"
#include "log.h"
#include "held_fd.h"
#include "own_threads.h"
#include "platform/platform.h"
#include "profile_export.h"
#include "capture/pyframes/gil_state.h"
#include "capture/pyframes/thread_state.h"
#include "capture/sample_record.h"
#include "session/session.h"
#include "signal_handler.h"
#include "session/stack_store.h"
#include "session/thread_exit_watch.h"
#include "thread_start_hook.h"
#include "greenlet_trace.h"
#include "unwind/unwinder.h"

namespace spprof {
namespace {

struct ModuleState {
    Session* session;                 // the running session, or nullptr
    PyObject* last_stats;             // stats() of the last stopped session
    ExitSignalWatcher* exit_watcher;  // the CLI's, while it runs a program, or nullptr
    PyObject* after_fork_restart;     // called once spprof's threads are back after a fork, or nullptr
};

// How stats() names the signal samples arrive on: "SIGRTMIN+30", "SIGPROF", or "none".
PyObject* signal_name(int signo) {
    if (signo == 0) return PyUnicode_FromString("none");
#if defined(SIGRTMIN)
    if (signo >= SIGRTMIN && signo <= SIGRTMAX) return PyUnicode_FromFormat("SIGRTMIN+%d", signo - SIGRTMIN);
#endif
    if (signo == SIGPROF) return PyUnicode_FromString("SIGPROF");
    return PyUnicode_FromFormat("signal %d", signo);
}

ModuleState* state_of(PyObject* module) { return static_cast<ModuleState*>(PyModule_GetState(module)); }

PyObject* raise(const Error& e) {
    switch (e.kind) {
        case ErrorKind::kValue: PyErr_SetString(PyExc_ValueError, e.what); break;
        case ErrorKind::kOS: {
            PyObject* args = Py_BuildValue("(is)", e.err, e.what);
            if (args != nullptr) {
                PyErr_SetObject(PyExc_OSError, args);
                Py_DECREF(args);
            }
            break;
        }
        case ErrorKind::kMemory: PyErr_SetString(PyExc_MemoryError, e.what); break;
        case ErrorKind::kNotImplemented: PyErr_SetString(PyExc_NotImplementedError, e.what); break;
        default: PyErr_SetString(PyExc_RuntimeError, e.what ? e.what : "spprof internal error"); break;
    }
    return nullptr;
}

// Sets d[key] = value (stealing value). Returns false with an exception set on failure.
bool put(PyObject* d, const char* key, PyObject* value) {
    if (value == nullptr) return false;
    const int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc == 0;
}

PyObject* build_stats(const Session* s) {
    PyObject* d = PyDict_New();
    if (d == nullptr) return nullptr;
    const CaptureStats cs = capture_stats();
    PlatformStats ps;
    platform_get_stats(&ps);
    const uint64_t dropped_memory = s ? s->counters().dropped_memory : 0;
    bool ok = put(d, "timer", PyUnicode_FromString(s && !s->running() ? s->timer_name() : ps.timer)) &&
              put(d, "samples_captured", PyLong_FromUnsignedLongLong(cs.captured)) &&
              put(d, "samples_dropped", PyLong_FromUnsignedLongLong(cs.dropped_full + cs.dropped_busy + dropped_memory)) &&
              put(d, "dropped_ring_full", PyLong_FromUnsignedLongLong(cs.dropped_full)) &&
              put(d, "dropped_busy", PyLong_FromUnsignedLongLong(cs.dropped_busy)) &&
              put(d, "dropped_memory_limit", PyLong_FromUnsignedLongLong(dropped_memory)) &&
              put(d, "walk_errors", PyLong_FromUnsignedLongLong(cs.walk_errors)) &&
              put(d, "walk_faults", PyLong_FromUnsignedLongLong(cs.walk_faults)) &&
              put(d, "samples_deferred", PyLong_FromUnsignedLongLong(cs.deferred)) &&
              put(d, "native_faults", PyLong_FromUnsignedLongLong(cs.native_faults)) &&
              put(d, "samples_in_subinterpreters", PyLong_FromUnsignedLongLong(cs.subinterpreter)) &&
              put(d, "samples_unguarded", PyLong_FromUnsignedLongLong(cs.unguarded)) &&
              put(d, "fault_guard_retaken", PyLong_FromUnsignedLongLong(platform_fault_guard_retaken())) &&
              put(d, "truncated_stacks", PyLong_FromUnsignedLongLong(cs.truncated)) &&
              put(d, "signals", PyLong_FromUnsignedLongLong(ps.signals)) &&
              put(d, "timers_active", PyLong_FromUnsignedLongLong(ps.timers_active)) &&
              put(d, "timer_failures", PyLong_FromUnsignedLongLong(ps.timer_failures)) &&
              put(d, "signals_on_unsampled_threads", PyLong_FromUnsignedLongLong(cs.no_thread)) &&
              put(d, "frame_layout", PyUnicode_FromString(PyLayout::kName));
    // Where the capture marks GC time (PlatformTraits::gc_frames); absent elsewhere.
    if (ok && platform_traits().gc_frames) ok = put(d, "samples_in_gc", PyLong_FromUnsignedLongLong(cs.gc));
    // Counters only this platform's sampling model has (platform.h, PlatformStats::extra).
    for (size_t i = 0; ok && i < ps.extra_count; ++i)
        ok = put(d, ps.extra[i].name, PyLong_FromUnsignedLongLong(ps.extra[i].value));
    if (ok && s != nullptr) {
        const SessionCounters& c = s->counters();
        ok = put(d, "threads_seen", PyLong_FromUnsignedLongLong(c.threads_registered)) &&
             put(d, "threads_ended", PyLong_FromUnsignedLongLong(c.threads_ended)) &&
             put(d, "sampling_signal", signal_name(s->sampling_signal())) &&
             put(d, "threads_unsampled", PyLong_FromUnsignedLongLong(c.threads_unsampled)) &&
             put(d, "threads_unsampled_cpu_ns", PyLong_FromUnsignedLongLong(c.threads_unsampled_cpu_ns)) &&
             put(d, "threads_refused", PyLong_FromUnsignedLongLong(c.threads_refused)) &&
             put(d, "threads_alive_max", PyLong_FromUnsignedLongLong(c.threads_alive_max)) &&
             put(d, "threads_alive_limit", PyLong_FromUnsignedLong(ThreadTable::kMaxThreads)) &&
             put(d, "thread_memory_bytes", PyLong_FromSize_t(s->thread_memory_bytes())) &&
             put(d, "handler_retaken", PyLong_FromUnsignedLongLong(c.handler_retaken + signal_call_retakes())) &&
             put(d, "thread_end_samples", PyLong_FromUnsignedLongLong(c.thread_end_samples)) &&
             put(d, "thread_end_expiries", PyLong_FromUnsignedLongLong(c.thread_end_expiries)) &&
             put(d, "thread_end_ns", PyLong_FromUnsignedLongLong(c.thread_end_ns)) &&
             put(d, "threads_found_by_scan", PyLong_FromUnsignedLongLong(c.threads_discovered_by_scan)) &&
             put(d, "timer_attach_failures", PyLong_FromUnsignedLongLong(c.attach_failures)) &&
             put(d, "threads_ended_before_armed", PyLong_FromUnsignedLongLong(c.ended_before_armed)) &&
             put(d, "drains", PyLong_FromUnsignedLongLong(c.drains)) &&
             put(d, "records_drained", PyLong_FromUnsignedLongLong(c.records)) &&
             put(d, "ring_rewinds", PyLong_FromUnsignedLongLong(c.ring_rewinds)) &&
             put(d, "ring_touched_bytes", PyLong_FromSize_t(s->ring_touched_bytes())) &&
             put(d, "idle_samples_folded", PyLong_FromUnsignedLongLong(c.idle_samples_folded)) &&
             put(d, "idle_folded_over_limit", PyLong_FromUnsignedLongLong(c.idle_folded_over_limit)) &&
             put(d, "sample_rows", PyLong_FromSize_t(s->store().row_count())) &&
             put(d, "records_unknown_thread", PyLong_FromUnsignedLongLong(c.unknown_thread)) &&
             put(d, "records_root_shared", PyLong_FromUnsignedLongLong(c.records_root_shared)) &&
             put(d, "records_without_base", PyLong_FromUnsignedLongLong(c.records_without_base)) &&
             put(d, "unknown_frames", PyLong_FromUnsignedLongLong(s->resolver().unknown_count())) &&
             put(d, "distinct_stacks", PyLong_FromSize_t(s->store().stack_count())) &&
             put(d, "distinct_frames", PyLong_FromSize_t(s->resolver().frames().size())) &&
             put(d, "code_objects", PyLong_FromSize_t(s->resolver().code_count())) &&
             put(d, "code_objects_kept", PyLong_FromUnsignedLongLong(s->keepalive().kept_total())) &&
             put(d, "samples_stored", PyLong_FromSize_t(s->store().sample_count())) &&
             put(d, "memory_bytes", PyLong_FromSize_t(s->memory_bytes())) &&
             put(d, "python_memory_bytes", PyLong_FromSize_t(s->python_bytes())) &&
             put(d, "memory_limit_bytes", PyLong_FromSize_t(s->config().memory_limit_bytes)) &&
             put(d, "mode", PyUnicode_FromString(s->config().wall_mode ? "wall" : "cpu")) &&
             put(d, "capture_ns", PyLong_FromUnsignedLongLong(cs.capture_ns)) &&
             put(d, "drain_ns", PyLong_FromUnsignedLongLong(s->drain_ns())) &&
             put(d, "drain_cpu_ns", PyLong_FromUnsignedLongLong(s->drain_cpu_ns())) &&
             put(d, "effective_interval_ms",
                 PyFloat_FromDouble(static_cast<double>(s->budget().effective_interval_ns) / 1e6));
        if (ok && s->config().max_overhead_pct > 0) {
            ok = put(d, "max_overhead_pct", PyFloat_FromDouble(s->config().max_overhead_pct)) &&
                 put(d, "overhead_pct", PyFloat_FromDouble(s->budget().last_overhead_pct)) &&
                 put(d, "interval_changes", PyLong_FromUnsignedLongLong(s->budget().interval_changes)) &&
                 put(d, "signal_cost_ns", PyLong_FromUnsignedLongLong(s->budget().signal_cost_ns));
        }
    }
    if (ok && s != nullptr) {
        // Every OS thread and the CPU balance (session/cpu_balance.h, docs/usage.md).
        const SessionCounters& c = s->counters();
        const CpuBalance b = s->cpu_balance();
        ok = put(d, "os_threads_scan", PyUnicode_FromString(s->os_threads_scanned() ? platform_os_threads_source() : "unsupported")) &&
             put(d, "threads_native_only", PyLong_FromUnsignedLongLong(c.threads_native_only)) &&
             put(d, "threads_signal_blocked", PyLong_FromUnsignedLongLong(c.threads_signal_blocked)) &&
             put(d, "threads_rejoined", PyLong_FromUnsignedLongLong(c.threads_rejoined)) &&
             put(d, "samples_native_threads", PyLong_FromUnsignedLongLong(cs.native_thread)) &&
             put(d, "cpu_process_ns", PyLong_FromUnsignedLongLong(b.process_ns)) &&
             put(d, "cpu_profile_ns", PyLong_FromUnsignedLongLong(b.profile_ns)) &&
             put(d, "cpu_spprof_threads_ns", PyLong_FromUnsignedLongLong(b.own_threads_ns)) &&
             put(d, "cpu_signal_blocked_ns", PyLong_FromUnsignedLongLong(b.blocked_threads_ns)) &&
             put(d, "cpu_before_found_ns", PyLong_FromUnsignedLongLong(b.before_found_ns)) &&
             put(d, "cpu_unsampled_threads_ns", PyLong_FromUnsignedLongLong(b.unsampled_ended_ns)) &&
             put(d, "cpu_ended_between_scans_ns", PyLong_FromUnsignedLongLong(b.ended_unseen_ns)) &&
             put(d, "cpu_unaccounted_ns", PyLong_FromLongLong(b.unaccounted_ns)) &&
             put(d, "cpu_sig_given_up_ns", PyLong_FromUnsignedLongLong(b.given_up_ns));
    }
    if (ok && s != nullptr && s->unwind_tables() != nullptr) {
        ok = put(d, "native_unwinds", PyLong_FromUnsignedLongLong(cs.native_unwinds)) &&
             put(d, "native_fp_steps", PyLong_FromUnsignedLongLong(cs.native_fp_steps)) &&
             put(d, "native_leaf_steps", PyLong_FromUnsignedLongLong(cs.native_leaf_steps)) &&
             put(d, "native_cached_steps", PyLong_FromUnsignedLongLong(cs.native_cached_steps)) &&
             put(d, "eval_ranges", PyLong_FromUnsignedLong(s->eval_range_count())) &&
             put(d, "modules_without_cfi", PyLong_FromUnsignedLongLong(s->unwind_tables()->modules_without_cfi())) &&
             put(d, "rust_names_over_limit", PyLong_FromUnsignedLongLong(s->rust_names_over_limit())) &&
             put(d, "symbol_files_read_off_gil", PyLong_FromUnsignedLongLong(s->symbol_reads().files_read())) &&
             put(d, "symbol_file_read_ns", PyLong_FromUnsignedLongLong(s->symbol_reads().read_ns())) &&
             put(d, "symbol_files_read_under_gil",
                 PyLong_FromUnsignedLongLong(s->resolver().symbolizer_inline_reads())) &&
             put(d, "drains_waiting_for_files", PyLong_FromUnsignedLongLong(s->counters().drains_waiting_for_files));
        PyObject* stops = ok ? PyDict_New() : nullptr;
        ok = stops != nullptr;
        for (int i = 0; ok && i < 10; ++i)
            if (cs.native_stops[i] != 0)
                ok = put(stops, unwind_stop_name(static_cast<UnwindStop>(i)),
                         PyLong_FromUnsignedLongLong(cs.native_stops[i]));
        ok = ok && put(d, "native_stop_reasons", stops);
    }
    if (ok) {
        // Descriptors spprof holds (held_fd.h) and those it found to be the program's.
        ok = put(d, "fds_held", PyLong_FromUnsignedLongLong(held_fds_open())) &&
             put(d, "fds_lost", PyLong_FromUnsignedLongLong(held_fds_lost())) &&
             put(d, "fds_proc_over_budget", PyLong_FromUnsignedLongLong(platform_proc_files_over_budget()));
        // spprof's threads that open files in a descriptor table of their own (platform.h).
        uint64_t own = 0, refused = 0;
        platform_own_fd_table_counts(&own, &refused);
        ok = ok && put(d, "fd_tables_own", PyLong_FromUnsignedLongLong(own)) &&
             put(d, "fd_tables_refused", PyLong_FromUnsignedLongLong(refused));
    }
    if (ok && s != nullptr && s->wall_sampler() != nullptr) {
        const WallSampler* w = s->wall_sampler();
        ok = put(d, "wall_ticks", PyLong_FromUnsignedLongLong(w->ticks())) &&
             put(d, "wall_missed_ticks", PyLong_FromUnsignedLongLong(w->missed_ticks())) &&
             put(d, "wall_longest_census_gap_ns", PyLong_FromUnsignedLongLong(w->longest_gap_ns())) &&
             put(d, "wall_quiet_skips", PyLong_FromUnsignedLongLong(w->quiet_skips())) &&
             put(d, "wall_signals_sent", PyLong_FromUnsignedLongLong(w->signals_sent())) &&
             put(d, "wall_idle_records", PyLong_FromUnsignedLongLong(w->idle_records())) &&
             put(d, "wall_idle_dropped", PyLong_FromUnsignedLongLong(w->idle_dropped())) &&
             put(d, "wall_state_probes", PyLong_FromUnsignedLongLong(w->state_probes())) &&
             put(d, "wall_walks", PyLong_FromUnsignedLongLong(w->walks())) &&
             put(d, "wall_walks_lost", PyLong_FromUnsignedLongLong(w->walks_lost())) &&
             put(d, "wall_passed_over", PyLong_FromUnsignedLongLong(w->passed_over()));
    }
    if (!ok) {
        Py_DECREF(d);
        return nullptr;
    }
    return d;
}

// os.fork calls between their before hook and their after_in_parent hook (main interpreter,
// GIL held). Several threads may fork at once: a before hook that releases the GIL (a join)
// lets another thread's fork begin, and that fork may end first. spprof's threads come back
// only when the last of them has ended.
int g_forks_in_flight = 0;

PyObject* py_start(PyObject* module, PyObject* args, PyObject* kwargs) {
    static const char* kwlist[] = {"interval_ns", "timer", "memory_limit_bytes", "ring_bytes",
                                   "drain_interval_ms", "mode", "progress", "native",
                                   "interpreter_frames", "max_overhead_pct", nullptr};
    unsigned long long interval_ns = 0, memory_limit = 0, ring_bytes = 256u << 10;
    const char* timer = "auto";
    const char* mode = "cpu";
    unsigned int drain_ms = 50;
    int progress = 0, native = 0, interpreter_frames = 0;
    double max_overhead_pct = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "K|sKKIspppd", const_cast<char**>(kwlist), &interval_ns,
                                     &timer, &memory_limit, &ring_bytes, &drain_ms, &mode, &progress,
                                     &native, &interpreter_frames, &max_overhead_pct))
        return nullptr;
    if (!(max_overhead_pct >= 0 && max_overhead_pct <= 100))
        return raise(Error::value("max_overhead_pct must be between 0 and 100"));
    ModuleState* st = state_of(module);
    if (st->session != nullptr) return raise(Error::runtime("profiler is already running"));
    if (interval_ns < 1'000'000ull || interval_ns > 1'000'000'000ull)
        return raise(Error::value("interval must be between 1 ms and 1000 ms"));
    SessionConfig cfg;
    cfg.interval_ns = interval_ns;
    if (std::strcmp(timer, "auto") == 0) cfg.timer = TimerKind::kAuto;
    else if (std::strcmp(timer, "thread") == 0) cfg.timer = TimerKind::kPerThread;
    else if (std::strcmp(timer, "itimer") == 0) cfg.timer = TimerKind::kProcess;
    else return raise(Error::value("timer must be 'auto', 'thread' or 'itimer'"));
    if (std::strcmp(mode, "wall") == 0) cfg.wall_mode = true;
    else if (std::strcmp(mode, "cpu") != 0) return raise(Error::value("mode must be 'cpu' or 'wall'"));
    if (memory_limit != 0) cfg.memory_limit_bytes = static_cast<size_t>(memory_limit);
    cfg.ring_bytes = static_cast<size_t>(ring_bytes);
    cfg.drain_interval_ms = drain_ms == 0 ? 1 : drain_ms;
    cfg.progress = progress != 0;
    cfg.native = native != 0;
    cfg.interpreter_frames = interpreter_frames != 0;
    cfg.max_overhead_pct = max_overhead_pct;
    auto session = std::make_unique<Session>(cfg);
    Error e = session->start(/*threads_after_fork=*/g_forks_in_flight > 0);
    if (!e.ok()) {
        if (session->running()) session->stop();
        session->release_references();
        return raise(e);
    }
    st->session = session.release();
    Py_RETURN_NONE;
}

// Fork before-hooks inside the session or the exit-signal watcher (py_stop_threads_for_fork).
// One may wait there, GIL released, for a join that stop() or another fork is making
// (gil_join.h); what it waits in must outlive it. GIL held for every change.
int g_fork_hooks_inside = 0;
// The session py_stop is stopping, unpublished already: a fork meanwhile must still wait for
// the drain thread's join that stop() makes (the drain thread may be making its thread state).
Session* g_session_stopping = nullptr;

// GIL held. Returns once no fork hook is inside the session or the watcher (they were
// unpublished first, so none enters again): they need the GIL to leave.
void wait_for_fork_hooks_to_leave() {
    while (g_fork_hooks_inside > 0) {
        Py_BEGIN_ALLOW_THREADS
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        Py_END_ALLOW_THREADS
    }
}

// _settle_caller(): the first thing spprof's stop path does (session.h, settle_caller).
PyObject* py_settle_caller(PyObject* module, PyObject*) {
    ModuleState* st = state_of(module);
    if (st->session != nullptr) st->session->settle_caller();
    Py_RETURN_NONE;
}

PyObject* py_stop(PyObject* module, PyObject*) {
    ModuleState* st = state_of(module);
    if (st->session == nullptr) return raise(Error::runtime("profiler is not running"));
    const SessionMutation changing;  // an exit dump may be reading the session
    exit_dump_disarm();
    std::unique_ptr<Session> session(st->session);
    st->session = nullptr;
    g_session_stopping = session.get();
    Error e = session->stop();
    g_session_stopping = nullptr;
    // A fork hook that found the session before it was unpublished may still be waiting for
    // the drain thread's join this stop made: freeing the session under it was a
    // use-after-free (ASan, test_fork's stop-while-forking program, 3.11).
    wait_for_fork_hooks_to_leave();
    PyObject* stats = build_stats(session.get());
    if (stats != nullptr) {
        Py_XSETREF(st->last_stats, stats);
        Py_INCREF(stats);
    }
    PyObject* result = (e.ok() && stats != nullptr) ? export_profile(session.get(), stats, nullptr) : nullptr;
    Py_XDECREF(stats);
    session->release_references();
    if (session->must_leak()) session.release();  // a capture may still be reading it
    if (!e.ok()) return raise(e);
    return result;
}

PyObject* py_is_active(PyObject* module, PyObject*) {
    return PyBool_FromLong(state_of(module)->session != nullptr);
}

PyObject* py_stats(PyObject* module, PyObject*) {
    ModuleState* st = state_of(module);
    if (st->session != nullptr) return build_stats(st->session);
    if (st->last_stats != nullptr) return PyDict_Copy(st->last_stats);
    return build_stats(nullptr);
}

// A watched thread's state is being cleared (thread_exit_watch.h).
void on_thread_exit(PyObject* module, PyThreadState* ts, uint64_t tid) {
    ModuleState* st = state_of(module);
    if (st != nullptr && st->session != nullptr) {
        const SessionMutation changing;
        st->session->thread_exiting(ts, tid);
    }
}

// Registers the calling thread with the running session, if any. `entry`, `skip`: code objects
// or null; `name`: a str or null (anything else is ignored).
// `tid`: the calling thread's kernel id when the caller knows it, else 0 (asked once here).
Error register_calling_thread(PyObject* module, PyObject* entry, PyObject* skip, PyObject* name, uint64_t tid) {
    if (entry != nullptr && !PyCode_Check(entry)) entry = nullptr;
    if (skip != nullptr && !PyCode_Check(skip)) skip = nullptr;
    const char* name_utf8 = nullptr;
    if (name != nullptr && PyUnicode_Check(name)) {
        name_utf8 = PyUnicode_AsUTF8(name);
        if (name_utf8 == nullptr) PyErr_Clear();
    }
    ModuleState* st = state_of(module);
    if (st->session == nullptr) return Error::none();
    const SessionMutation changing;
    if (tid == 0) tid = platform_current_tid();
    Error e = st->session->register_current_thread(entry, skip, name_utf8, tid);
    if (!e.ok()) return e;
    // Main interpreter only: the watch's type belongs to it.
    if (PyThreadState_Get()->interp == PyInterpreterState_Main()) thread_exit_watch_install(module, &on_thread_exit, tid);
    return Error::none();
}

PyObject* py_register_current_thread(PyObject* module, PyObject* args) {
    // Optional: the thread's entry code (its target's) and the hook's own code (left out of
    // the entry stack). Anything that is not a code object is ignored.
    // And its name, when threading has not put the thread in _active yet (a str, else ignored).
    PyObject* entry = nullptr;
    PyObject* skip = nullptr;
    PyObject* name = nullptr;
    if (!PyArg_ParseTuple(args, "|OOO:register_current_thread", &entry, &skip, &name)) return nullptr;
    Error e = register_calling_thread(module, entry, skip, name, 0);
    if (!e.ok()) return raise(e);
    Py_RETURN_NONE;
}

// A new reference to obj.<attr>, or null with no exception left set.
PyObject* attr_or_null(PyObject* obj, PyObject* attr) {
    PyObject* v = PyObject_GetAttr(obj, attr);
    if (v == nullptr) PyErr_Clear();
    return v;
}

// functools.partial itself (C), not a subclass: its `func` is a plain attribute.
bool is_partial(PyObject* obj) { return std::strcmp(Py_TYPE(obj)->tp_name, "functools.partial") == 0; }

// The registrar thread_start_hook calls with each new threading.Thread, on the thread, before
// threading's own _bootstrap_inner (so before its target, and before threading set its ident
// or put it in _active: nothing here may make a _DummyThread). `self` is the tuple (module,
// threading.Thread.run, the class of spprof's own threads, the interned names of the
// attributes it reads, and a callable to call on the new thread or None: --greenlets sets its
// trace function there). In C rather than Python: no frame of ours on the new thread's stack
// (so no hook code to leave out of its entry stack) and no interpreted getattr chain per
// thread start (issue 24's +15 us per start). Never raises: the program's thread must run.
PyObject* registrar_call(PyObject* self, PyObject* thread) {
    PyObject* module = PyTuple_GET_ITEM(self, 0);
    PyObject* thread_run = PyTuple_GET_ITEM(self, 1);
    PyObject* own_type = PyTuple_GET_ITEM(self, 2);
    PyObject* s_run = PyTuple_GET_ITEM(self, 3);
    PyObject* s_target = PyTuple_GET_ITEM(self, 4);
    PyObject* s_code = PyTuple_GET_ITEM(self, 5);
    PyObject* s_name = PyTuple_GET_ITEM(self, 6);
    // One of spprof's own (the pprof endpoint's): never sampled, it joins spprof's threads.
    if (PyObject_TypeCheck(thread, reinterpret_cast<PyTypeObject*>(own_type))) {
        own_thread_enter();
        Py_RETURN_NONE;
    }
    // The entry: the code the thread's first Python frame above threading's will run. Its
    // target's (a functools.partial's function's); run()'s own when run() is overridden;
    // Thread.run's when the target has no code (a builtin such as time.sleep: run's frame is
    // the one its samples find). Without it, a short thread's last stretch (its thread-end
    // and tail records) went to threading's _bootstrap: half the time of short Thread
    // subclasses and builtin targets (wall mode).
    PyObject* entry = nullptr;
    PyObject* run = attr_or_null(reinterpret_cast<PyObject*>(Py_TYPE(thread)), s_run);
    if (run == thread_run) {
        PyObject* target = attr_or_null(thread, s_target);
        // partial(partial(f, a), b): no frame of its own, f's is the one that runs.
        for (int unwrap = 0; unwrap < 4 && target != nullptr && is_partial(target); ++unwrap) {
            PyObject* func = PyObject_GetAttrString(target, "func");
            if (func == nullptr) PyErr_Clear();
            Py_DECREF(target);
            target = func;
        }
        if (target != nullptr && target != Py_None) entry = attr_or_null(target, s_code);
        Py_XDECREF(target);
    }
    if (entry == nullptr && run != nullptr) entry = attr_or_null(run, s_code);
    Py_XDECREF(run);
    // Thread.name is a property returning _name: read that, without a Python call.
    PyObject* name = attr_or_null(thread, s_name);
    // Its kernel id from its own state, bound by this thread a moment ago (3.11+: written
    // there; before: read from its pthread): two gettid system calls fewer per thread start.
    Error e = register_calling_thread(module, entry, nullptr, name, tstate_native_tid(PyThreadState_Get()));
    if (!e.ok()) {
        log_debug("could not register a new thread: %s", e.what);
        PyErr_Clear();
    }
    Py_XDECREF(entry);
    Py_XDECREF(name);
    PyObject* on_start = PyTuple_GET_ITEM(self, 7);
    if (on_start != Py_None) {
        PyObject* r = PyObject_CallNoArgs(on_start);
        if (r == nullptr) {
            log_debug("a new thread's start call raised");
            PyErr_Clear();
        }
        Py_XDECREF(r);
    }
    Py_RETURN_NONE;
}

PyMethodDef kRegistrarDef = {"register_thread", registrar_call, METH_O,
                             "spprof: registers the calling (new) threading.Thread with the running session"};

PyObject* py_thread_registrar(PyObject* module, PyObject* args) {
    PyObject* thread_run = nullptr;
    PyObject* own_type = nullptr;
    PyObject* on_start = Py_None;
    if (!PyArg_ParseTuple(args, "OO!|O:thread_registrar", &thread_run, &PyType_Type, &own_type, &on_start))
        return nullptr;
    if (on_start != Py_None && !PyCallable_Check(on_start)) {
        PyErr_SetString(PyExc_TypeError, "thread_registrar: on_start must be callable or None");
        return nullptr;
    }
    PyObject* self = Py_BuildValue("(OOONNNNO)", module, thread_run, own_type, PyUnicode_InternFromString("run"),
                                   PyUnicode_InternFromString("_target"), PyUnicode_InternFromString("__code__"),
                                   PyUnicode_InternFromString("_name"), on_start);
    if (self == nullptr) return nullptr;
    PyObject* fn = PyCFunction_NewEx(&kRegistrarDef, self, nullptr);
    Py_DECREF(self);
    return fn;
}

PyObject* py_thread_start_hook(PyObject*, PyObject* args) {
    PyObject* original = nullptr;
    PyObject* register_thread = nullptr;
    if (!PyArg_ParseTuple(args, "OO:thread_start_hook", &original, &register_thread)) return nullptr;
    if (!PyCallable_Check(original) || !PyCallable_Check(register_thread)) {
        PyErr_SetString(PyExc_TypeError, "thread_start_hook(original, register_thread): both must be callable");
        return nullptr;
    }
    return thread_start_hook_new(original, register_thread);
}

PyObject* py_thread_start_hook_original(PyObject*, PyObject* obj) {
    PyObject* original = thread_start_hook_original(obj);
    if (original == nullptr) Py_RETURN_NONE;
    Py_INCREF(original);
    return original;
}

PyObject* py_drain(PyObject* module, PyObject*) {
    ModuleState* st = state_of(module);
    if (st->session != nullptr) st->session->periodic();
    Py_RETURN_NONE;
}

// A window on the running session (profile_export.h): its rings drained first, so samples
// taken before t1 and still in a thread's ring are in it.
PyObject* py_window_export(PyObject* module, PyObject* args) {
    unsigned long long t0 = 0, t1 = 0, native_tid = 0;
    if (!PyArg_ParseTuple(args, "KKK:window_export", &t0, &t1, &native_tid)) return nullptr;
    ModuleState* st = state_of(module);
    if (st->session == nullptr) return raise(Error::runtime("profiler is not running"));
    if (t1 < t0) return raise(Error::value("window_export: the window ends before it starts"));
    st->session->settle_waits();
    st->session->drain_rings();
    PyObject* stats = PyDict_New();
    if (stats == nullptr) return nullptr;
    const ExportWindow window{t0, t1, native_tid};
    PyObject* result = export_profile(st->session, stats, &window);
    Py_DECREF(stats);
    return result;
}

PyObject* py_monotonic_ns(PyObject*, PyObject*) { return PyLong_FromUnsignedLongLong(platform_monotonic_ns()); }

// The bytes the session's Python side holds (the censuses' rows): counted in memory_bytes and
// its limit. Returns the room left under the limit (0 at or over it; 2**62 with no session).
PyObject* py_python_memory(PyObject* module, PyObject* arg) {
    const size_t n = PyLong_AsSize_t(arg);
    if (n == static_cast<size_t>(-1) && PyErr_Occurred()) return nullptr;
    Session* s = state_of(module)->session;
    if (s == nullptr) return PyLong_FromUnsignedLongLong(1ull << 62);
    s->set_python_bytes(n);
    const size_t used = s->memory_bytes();
    const size_t limit = s->config().memory_limit_bytes;
    return PyLong_FromSize_t(used < limit ? limit - used : 0);
}

PyObject* py_python_tick_queued_ns(PyObject*, PyObject*) {
    return PyLong_FromUnsignedLongLong(python_tick_queued_ns());
}

PyObject* py_greenlet_trace(PyObject*, PyObject* state) { return greenlet_trace_new(state); }

PyObject* py_greenlet_trace_state(PyObject*, PyObject* obj) {
    PyObject* state = greenlet_trace_state(obj);
    if (state == nullptr) Py_RETURN_NONE;
    Py_INCREF(state);
    return state;
}

// The calling thread's ident as sys._current_frames() keys it: gevent's monkey-patching turns
// _thread.get_ident into the current greenlet's id.
PyObject* py_thread_ident(PyObject*, PyObject*) { return PyLong_FromUnsignedLong(PyThread_get_thread_ident()); }

PyObject* py_own_thread_signals(PyObject*, PyObject*) {
    const std::vector<int> sigs = platform_blocked_signals();
    PyObject* out = PyList_New(0);
    for (size_t i = 0; out != nullptr && i < sigs.size(); ++i) {
        PyObject* n = PyLong_FromLong(sigs[i]);
        if (n == nullptr || PyList_Append(out, n) < 0) Py_CLEAR(out);
        Py_XDECREF(n);
    }
    return out;
}

#if PY_VERSION_HEX >= 0x030D0000
// The frame that called os.fork, and its instruction then (3.13+: see restart_threads_pending).
PyFrameObject* g_fork_caller = nullptr;
int g_fork_caller_lasti = -1;

void remember_fork_caller() {
    Py_CLEAR(g_fork_caller);
    PyFrameObject* hook = PyEval_GetFrame();  // borrowed: the before hook's own frame
    g_fork_caller = hook != nullptr ? PyFrame_GetBack(hook) : nullptr;  // hooks run inside os.fork
    g_fork_caller_lasti = g_fork_caller != nullptr ? PyFrame_GetLasti(g_fork_caller) : -1;
}

// True once the frame that called os.fork has moved past that call (or no frame called it).
bool fork_returned() {
    return g_fork_caller == nullptr || PyFrame_GetLasti(g_fork_caller) != g_fork_caller_lasti;
}

// A restart_threads_pending call is in this process's queue (at most one).
bool g_restart_queued = false;
#endif

// _control_listen(fd, handler): the control channel's socket and handler (control_wake.h);
// fd -1 / handler None: listen no more.
PyObject* py_control_listen(PyObject*, PyObject* args) {
    int fd = -1;
    PyObject* handler = nullptr;
    if (!PyArg_ParseTuple(args, "iO:_control_listen", &fd, &handler)) return nullptr;
    if (handler != Py_None && !PyCallable_Check(handler)) {
        PyErr_SetString(PyExc_TypeError, "_control_listen: handler must be callable or None");
        return nullptr;
    }
    control_wake_set(fd, handler == Py_None ? nullptr : handler);
    Py_RETURN_NONE;
}

// The arguments of _python_tick and _drain_timer: (handler or None, seconds), seconds within
// [0, 3600), or (0, 3600) unless zero_ok. False with the exception set.
bool parse_timed_handler(PyObject* args, const char* name, const char* what, bool zero_ok, PyObject** handler,
                         uint64_t* ns) {
    PyObject* given = nullptr;
    if (!PyArg_UnpackTuple(args, name, 2, 2, handler, &given)) return false;
    const double seconds = PyFloat_AsDouble(given);
    if (seconds == -1.0 && PyErr_Occurred()) return false;
    if (*handler != Py_None && !PyCallable_Check(*handler)) {
        PyErr_Format(PyExc_TypeError, "%s: handler must be callable or None", name);
        return false;
    }
    if (!((zero_ok ? seconds >= 0 : seconds > 0) && seconds < 3600)) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be in %s0, 3600)", name, what, zero_ok ? "[" : "(");
        return false;
    }
    if (*handler == Py_None) *handler = nullptr;
    *ns = static_cast<uint64_t>(seconds * 1e9);
    return true;
}

// _python_tick(handler, period_s): handler() is called every period_s seconds with the GIL
// (python_tick.h; a number it returns is the period from then on); handler None: no more calls.
PyObject* py_python_tick(PyObject*, PyObject* args) {
    PyObject* handler = nullptr;
    uint64_t period_ns = 0;
    if (!parse_timed_handler(args, "_python_tick", "period_s", false, &handler, &period_ns)) return nullptr;
    python_tick_set(handler, period_ns);
    Py_RETURN_NONE;
}

// _drain_timer(handler, first_s): the drain thread calls handler() (GIL held) first_s seconds
// from now, then as often as its answers ask (drain_timer.h); handler None: no more calls.
PyObject* py_drain_timer(PyObject*, PyObject* args) {
    PyObject* handler = nullptr;
    uint64_t first_ns = 0;
    if (!parse_timed_handler(args, "_drain_timer", "first_s", true, &handler, &first_ns)) return nullptr;
    python_drain_timer().set(handler, first_ns);
    Py_RETURN_NONE;
}

// _call_apart(fn) -> fn(), called on a short thread of spprof's with a descriptor table of its
// own (own_thread_run_apart), the caller's GIL let go meanwhile: the files fn opens take none
// of the program's numbers. fn must close what it opens (the numbers mean nothing here).
struct ApartCall {
    PyObject* fn;
    PyObject* result;  // new reference, or nullptr with `raised` set
    PyObject* raised;  // the exception fn raised (3.12+: the object; before: type, value, tb)
    PyObject* raised_value;
    PyObject* raised_tb;
};

void apart_call_run(void* arg) {
    auto* call = static_cast<ApartCall*>(arg);
    const PyGILState_STATE gil = PyGILState_Ensure();
    call->result = PyObject_CallNoArgs(call->fn);
    if (call->result == nullptr) {
#if PY_VERSION_HEX >= 0x030C0000
        call->raised = PyErr_GetRaisedException();
#else
        PyErr_Fetch(&call->raised, &call->raised_value, &call->raised_tb);
#endif
    }
    PyGILState_Release(gil);
}

PyObject* py_call_apart(PyObject*, PyObject* fn) {
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_call_apart: fn must be callable");
        return nullptr;
    }
    ApartCall call{fn, nullptr, nullptr, nullptr, nullptr};
    Py_BEGIN_ALLOW_THREADS
    own_thread_run_apart(apart_call_run, &call);
    Py_END_ALLOW_THREADS
    if (call.result != nullptr) return call.result;
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(call.raised);
#else
    PyErr_Restore(call.raised, call.raised_value, call.raised_tb);
#endif
    return nullptr;
}

// _thread_cpu_ns(native_id, ident) -> the thread's CPU time, None when it cannot be read
// (spprof dump: on-CPU or idle, from two readings).
PyObject* py_thread_cpu_ns(PyObject*, PyObject* args) {
    unsigned long long tid = 0;
    unsigned long ident = 0;
    if (!PyArg_ParseTuple(args, "Kk:_thread_cpu_ns", &tid, &ident)) return nullptr;
    uint64_t ns = 0;
    if (!platform_thread_cpu_ns_of(tid, ident, &ns)) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(ns);
}

PyObject* py_after_fork_child(PyObject* module, PyObject*) {
    ModuleState* st = state_of(module);
    platform_after_fork_child();
    CodeKeepAlive::forget_after_fork();
    exit_dump_disarm();
    control_wake_forget_after_fork();
    python_drain_timer().forget_after_fork();
    python_tick_forget_after_fork();
    own_threads_after_fork_child();  // the parent's threads of ours were not copied
    g_forks_in_flight = 0;           // the forks other threads had begun are the parent's
    g_fork_hooks_inside = 0;         // and so are the hooks they were in
    g_session_stopping = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
    Py_CLEAR(g_fork_caller);
    g_restart_queued = false;
#endif
    if (st->session != nullptr) {
        // Leaked on purpose: its drain thread is gone and its locks may be held.
        st->session->abandon_after_fork();
        st->session = nullptr;
    }
    Py_RETURN_NONE;
}

// deferred: from the pending call, once the forking frame has moved past os.fork (the
// caller's stack is the program's), not from inside the after_in_parent hook.
void restart_threads_now(PyObject* module, bool deferred = false) {
    ModuleState* st = state_of(module);
    if (st->session != nullptr) {
        const SessionMutation changing;
        st->session->restart_threads_after_fork(deferred);
    }
    if (st->exit_watcher != nullptr) st->exit_watcher->restart_thread_after_fork();
    // Python's threads of spprof's (the --http endpoint) start at the same moment. Never an
    // exception out of here: a failure is the caller's to report, not the program's.
    PyObject* then = st->after_fork_restart;
    st->after_fork_restart = nullptr;
    if (then != nullptr) {
        PyObject* r = PyObject_CallNoArgs(then);
        if (r == nullptr) {
            log_debug("after-fork restart callback raised");
            PyErr_Clear();
        }
        Py_XDECREF(r);
        Py_DECREF(then);
    }
}

#if PY_VERSION_HEX >= 0x030D0000
// A pending call (main thread, GIL held). It also runs in Python code of the after_in_parent
// hooks registered after ours, still inside os.fork and before its thread count: then it asks
// to run again (a pass of pending calls is bounded; the next comes at the next eval-breaker
// check), until the frame that called os.fork has moved on.
int restart_threads_pending(void* arg) {
    PyObject* module = static_cast<PyObject*>(arg);
    // Dropped when another fork began (its after_in_parent queues the restart again), or in a
    // child that inherited the queue from a parent forking in another thread.
    if (!g_restart_queued || g_forks_in_flight > 0) {
        g_restart_queued = false;
        Py_DECREF(module);
        return 0;
    }
    if (!fork_returned() && Py_AddPendingCall(&restart_threads_pending, module) == 0) return 0;
    g_restart_queued = false;
    Py_CLEAR(g_fork_caller);
    restart_threads_now(module, true);
    Py_DECREF(module);
    return 0;
}
#endif

PyObject* py_stop_threads_for_fork(PyObject* module, PyObject*) {
    ++g_forks_in_flight;
#if PY_VERSION_HEX >= 0x030D0000
    remember_fork_caller();
#endif
    ModuleState* st = state_of(module);
    ++g_fork_hooks_inside;
    Session* session = st->session != nullptr ? st->session : g_session_stopping;
    if (session != nullptr) {
        const SessionMutation changing;
        session->stop_threads_for_fork();
    }
    if (st->exit_watcher != nullptr) st->exit_watcher->stop_thread_for_fork();
    --g_fork_hooks_inside;
    Py_RETURN_NONE;
}

PyObject* py_restart_threads_after_fork(PyObject* module, PyObject* args) {
    PyObject* then = nullptr;
    if (!PyArg_ParseTuple(args, "|O:restart_threads_after_fork", &then)) return nullptr;
    ModuleState* st = state_of(module);
    Py_CLEAR(st->after_fork_restart);
    if (then != nullptr && then != Py_None) {
        Py_INCREF(then);
        st->after_fork_restart = then;
    }
    // A before hook ran for every after_in_parent hook, unless spprof was imported in between.
    if (g_forks_in_flight > 0) --g_forks_in_flight;
    if (g_forks_in_flight > 0) Py_RETURN_NONE;  // the last fork to end restarts the threads
#if PY_VERSION_HEX >= 0x030D0000
    // 3.13+ counts the process's threads for its fork warning after the after_in_parent hooks
    // have run: start ours once os.fork has returned, from a pending call (the main thread's,
    // at its next bytecode). If the queue is full, now (the warning then shows, the profile
    // is whole).
    if (g_restart_queued) Py_RETURN_NONE;
    // A program with a thread of its own alive is warned anyway (CPython counts the OS's
    // threads): ours come back now, so that a blocking call right after the fork (waitpid)
    // does not leave the other threads without a drain and the control channel unanswered.
    if (st->session != nullptr && st->session->has_other_threads()) {
        restart_threads_now(module);
        Py_RETURN_NONE;
    }
    Py_INCREF(module);
    if (Py_AddPendingCall(&restart_threads_pending, module) == 0) {
        g_restart_queued = true;
        Py_RETURN_NONE;
    }
    Py_DECREF(module);
#endif
    restart_threads_now(module);
    Py_RETURN_NONE;
}

PyObject* py_watch_exit_signals(PyObject* module, PyObject* callback) {
    ModuleState* st = state_of(module);
    if (!PyCallable_Check(callback)) {
        PyErr_SetString(PyExc_TypeError, "_watch_exit_signals() needs a callable");
        return nullptr;
    }
    if (st->exit_watcher != nullptr) return raise(Error::runtime("exit signals are already watched"));
    Error e;
    st->exit_watcher = ExitSignalWatcher::start(callback, &e);
    if (st->exit_watcher == nullptr) return raise(e);
    Py_RETURN_NONE;
}

PyObject* py_unwatch_exit_signals(PyObject* module, PyObject*) {
    ModuleState* st = state_of(module);
    if (st->exit_watcher != nullptr) {
        ExitSignalWatcher* w = st->exit_watcher;
        st->exit_watcher = nullptr;
        w->stop();
        wait_for_fork_hooks_to_leave();  // as in py_stop
        delete w;
    }
    Py_RETURN_NONE;
}

PyObject* py_arm_exit_dump(PyObject* module, PyObject* args) {
    const char* path = nullptr;
    const char* meta = nullptr;
    if (!PyArg_ParseTuple(args, "ss:_arm_exit_dump", &path, &meta)) return nullptr;
    ModuleState* st = state_of(module);
    if (st->session == nullptr) return raise(Error::runtime("profiler is not running"));
    const SessionMutation changing;
    exit_dump_arm(st->session, path, meta);
    Py_RETURN_NONE;
}

PyObject* py_hook_exit_calls(PyObject*, PyObject* hook) {
    if (!PyCallable_Check(hook)) {
        PyErr_SetString(PyExc_TypeError, "_hook_exit_calls() needs a callable");
        return nullptr;
    }
    const Error e = exit_calls_hook(hook);
    if (!e.ok()) return raise(e);
    Py_RETURN_NONE;
}

// A METH_NOARGS method that calls fn() and returns None.
template <void (*fn)()>
PyObject* py_call(PyObject*, PyObject*) {
    fn();
    Py_RETURN_NONE;
}

PyObject* py_set_debug(PyObject*, PyObject* arg) {
    const int on = PyObject_IsTrue(arg);
    if (on < 0) return nullptr;
    log_set_debug(on != 0);
    Py_RETURN_NONE;
}

// The GIL as the Mach sampler reads it from its own thread (capture/pyframes/gil_state.h), so
// that Linux tests prove the mirrored offsets on every version: whether the caller holds it
// now, then, with the GIL let go for `wait_s`, whether it still reads as the caller's and the
// ident of the thread that holds it (0: nobody).
PyObject* py_gil_reading(PyObject*, PyObject* arg) {
    const double wait_s = PyFloat_AsDouble(arg);
    if (wait_s < 0 || PyErr_Occurred()) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "wait_s must be >= 0");
        return nullptr;
    }
    PyInterpreterState* interp = PyInterpreterState_Main();
    const unsigned char* gil = gil_state_of(interp);
    PyThreadState* me = PyThreadState_Get();
    const bool held_now = gil_held_by(gil, reinterpret_cast<uintptr_t>(me));
    bool mine_released = false;
    uintptr_t holder = 0;
    Py_BEGIN_ALLOW_THREADS
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(wait_s);
    ts.tv_nsec = static_cast<long>((wait_s - static_cast<double>(ts.tv_sec)) * 1e9);
    nanosleep(&ts, nullptr);
    mine_released = gil_held_by(gil, reinterpret_cast<uintptr_t>(me));
    holder = gil_holder(gil);
    Py_END_ALLOW_THREADS
    unsigned long ident = 0;
    for (PyThreadState* t = PyInterpreterState_ThreadHead(interp); t != nullptr; t = PyThreadState_Next(t)) {
        if (reinterpret_cast<uintptr_t>(t) == holder) ident = t->thread_id;
    }
    return Py_BuildValue("(OOk)", held_now ? Py_True : Py_False, mine_released ? Py_True : Py_False, ident);
}

// The packed row layout stop() exports as "samples": SAMPLE_ROW_FORMAT is the struct format
// spprof/_rows.py must equal (tests/test_rows.py checks), held to SampleRow by these asserts.
constexpr char kSampleRowFormat[] = "<QQII";  // timestamp_ns, weight_ns, stack, thread_and_flags
static_assert(sizeof(SampleRow) == 24 && alignof(SampleRow) == 8, "SampleRow is exported as packed bytes");
static_assert(offsetof(SampleRow, timestamp_ns) == 0 && sizeof(SampleRow::timestamp_ns) == 8, "Q at 0");
static_assert(offsetof(SampleRow, weight_ns) == 8 && sizeof(SampleRow::weight_ns) == 8, "Q at 8");
static_assert(offsetof(SampleRow, stack) == 16 && sizeof(SampleRow::stack) == 4, "I at 16");
static_assert(offsetof(SampleRow, thread_and_flags) == 20 && sizeof(SampleRow::thread_and_flags) == 4, "I at 20");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "rows are copied as host bytes and read as '<'");
static_assert(kSerialBits + 8 == 32, "flags fill the high 8 bits of thread_and_flags");

// Adds SAMPLE_ROW_FORMAT, SAMPLE_SERIAL_BITS and SAMPLE_FLAGS ({name: bit}) to the module.
bool add_row_layout(PyObject* m) {
    if (PyModule_AddStringConstant(m, "SAMPLE_ROW_FORMAT", kSampleRowFormat) < 0) return false;
    if (PyModule_AddIntConstant(m, "SAMPLE_SERIAL_BITS", kSerialBits) < 0) return false;
    PyObject* flags = PyDict_New();
    bool ok = flags != nullptr && put(flags, "truncated", PyLong_FromUnsignedLong(kSampleTruncated)) &&
              put(flags, "on_cpu", PyLong_FromUnsignedLong(kSampleOnCpu)) &&
              put(flags, "has_gil", PyLong_FromUnsignedLong(kSampleHasGil)) &&
              put(flags, "idle", PyLong_FromUnsignedLong(kSampleIdle)) &&
              put(flags, "gil_known", PyLong_FromUnsignedLong(kSampleGilKnown)) &&
              put(flags, "stack_only", PyLong_FromUnsignedLong(kSampleStackOnly)) &&
              put(flags, "runnable", PyLong_FromUnsignedLong(kSampleRunnable)) &&
              put(flags, "thread_end", PyLong_FromUnsignedLong(kSampleThreadEnd));
    if (ok && PyModule_AddObject(m, "SAMPLE_FLAGS", flags) == 0) return true;  // steals on success
    Py_XDECREF(flags);
    return false;
}

PyMethodDef kMethods[] = {
    {"start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_start)), METH_VARARGS | METH_KEYWORDS,
     "start(interval_ns, timer='auto', memory_limit_bytes=0, ring_bytes=262144, drain_interval_ms=50)"},
    {"stop", py_stop, METH_NOARGS, "stop() -> dict: the raw profile"},
    {"_settle_caller", py_settle_caller, METH_NOARGS,
     "_settle_caller(): wall mode: the caller's time off CPU since the last census, on its last stack"},
    {"is_active", py_is_active, METH_NOARGS, "is_active() -> bool"},
    {"stats", py_stats, METH_NOARGS, "stats() -> dict"},
    {"register_current_thread", py_register_current_thread, METH_VARARGS,
     "register the calling thread with the running session (optional: its entry code, the hook's code, its name)"},
    {"thread_registrar", py_thread_registrar, METH_VARARGS,
     "thread_registrar(thread_run, own_type, on_start=None) -> a callable for thread_start_hook that registers "
     "each new threading.Thread (thread_run: threading.Thread.run; own_type: the class of spprof's own threads; "
     "on_start: called with no arguments on the new thread)"},
    {"thread_start_hook", py_thread_start_hook, METH_VARARGS,
     "thread_start_hook(original, register_thread): a method for Thread._bootstrap_inner that calls "
     "register_thread(thread), then original(thread)"},
    {"thread_start_hook_original", py_thread_start_hook_original, METH_O,
     "thread_start_hook_original(obj): the original a thread_start_hook wraps, or None when obj is not one"},
    {"drain", py_drain, METH_NOARGS, "drain the sample rings now"},
    {"window_export", py_window_export, METH_VARARGS,
     "window_export(t0_ns, t1_ns, native_tid) -> dict: the raw profile of the running session's "
     "samples in [t0_ns, t1_ns] (monotonic_ns()), of the thread native_tid (0: every thread)"},
    {"monotonic_ns", py_monotonic_ns, METH_NOARGS, "monotonic_ns() -> int: the clock sample times are read on"},
    {"python_memory", py_python_memory, METH_O,
     "python_memory(nbytes) -> int: the censuses' bytes, counted in the memory limit; the room left"},
    {"_python_tick_queued_ns", py_python_tick_queued_ns, METH_NOARGS,
     "_python_tick_queued_ns() -> int: when the periodic call being made was queued (monotonic_ns)"},
    {"greenlet_trace", py_greenlet_trace, METH_O,
     "greenlet_trace((ident, previous, known, last_switch, note, [active])) -> the trace function of --greenlets "
     "for greenlet.settrace (greenlet_trace.h)"},
    {"greenlet_trace_state", py_greenlet_trace_state, METH_O,
     "greenlet_trace_state(obj) -> the state tuple of a greenlet_trace callable, or None for anything else"},
    {"own_thread_signals", py_own_thread_signals, METH_NOARGS,
     "own_thread_signals() -> [int]: the signals spprof's threads block (all but those a fault raises)"},
    {"thread_ident", py_thread_ident, METH_NOARGS,
     "thread_ident() -> int: the calling thread's ident, as sys._current_frames() has it (never a greenlet's)"},
    {"after_fork_child", py_after_fork_child, METH_NOARGS, "forget the session in a forked child"},
    {"_thread_cpu_ns", py_thread_cpu_ns, METH_VARARGS,
     "_thread_cpu_ns(native_id, ident) -> the thread's CPU time in ns, None when not readable"},
    {"_drain_timer", py_drain_timer, METH_VARARGS,
     "_drain_timer(handler, first_s): the drain thread calls handler() (GIL held) in first_s "
     "seconds, then again in the seconds each call returns (None: no more); handler None: none"},
    {"_call_apart", py_call_apart, METH_O,
     "_call_apart(fn) -> fn() on a short thread of spprof's with a descriptor table of its own "
     "(the files it opens take none of the program's numbers), the GIL let go meanwhile"},
    {"_python_tick", py_python_tick, METH_VARARGS,
     "_python_tick(handler, period_s): handler() is called every period_s seconds with the GIL, "
     "by the main thread or the drain thread; a number it returns is the next period"},
    {"_control_listen", py_control_listen, METH_VARARGS,
     "_control_listen(fd, handler): the drain thread calls handler() (GIL held) when a client "
     "waits on fd or the seconds it returned have passed; fd -1, handler None: no more"},
    {"stop_threads_for_fork", py_stop_threads_for_fork, METH_NOARGS,
     "before os.fork, in the parent: stop spprof's helper threads (the drain, the wall census, the exit-signal watcher)"},
    {"restart_threads_after_fork", py_restart_threads_after_fork, METH_VARARGS,
     "restart_threads_after_fork(then=None): after os.fork, in the parent: start the threads "
     "stop_threads_for_fork stopped again, then call then() (3.13+: once os.fork has returned)"},
    {"set_debug", py_set_debug, METH_O, "turn the native debug log on or off"},
    // spprof's own Python threads (the pprof endpoint's): never sampled, their CPU named as
    // spprof's in the balance (own_threads.h). On the thread itself: enter before the session
    // could take it for the program's (threading's start hook, before its target), leave last.
    {"_own_thread_enter", py_call<own_thread_enter>, METH_NOARGS,
     "the calling thread is spprof's own from now on: never sampled, its CPU spprof's"},
    {"_own_thread_leave", py_call<own_thread_leave>, METH_NOARGS,
     "the calling thread, one of spprof's, ends: its CPU time is counted once more"},
    {"_gil_reading", py_gil_reading, METH_O,
     "_gil_reading(wait_s) -> (held by the caller, still read as the caller's with the GIL let go "
     "for wait_s, the ident of the thread holding it then or 0): the Mach sampler's GIL reader"},
    {"_watch_exit_signals", py_watch_exit_signals, METH_O,
     "_watch_exit_signals(callback): on SIGTERM/SIGHUP/SIGQUIT left at SIG_DFL, call "
     "callback(signum) from a thread of spprof's with the GIL, then die by the signal (the CLI)"},
    {"_unwatch_exit_signals", py_unwatch_exit_signals, METH_NOARGS,
     "stop watching; SIG_DFL goes back where spprof's handler still is"},
    {"_arm_exit_dump", py_arm_exit_dump, METH_VARARGS,
     "_arm_exit_dump(path, meta_members): where the exit-signal watcher writes the .spprof "
     "file when the GIL cannot be had (session/exit_dump.h)"},
    {"_hook_exit_calls", py_hook_exit_calls, METH_O,
     "_hook_exit_calls(hook): os._exit, os.execv and os.execve call hook(event, name, args, "
     "kwargs) first (exit_calls.h)"},
    {"_unhook_exit_calls", py_call<exit_calls_unhook>, METH_NOARGS, "put os._exit, os.execv, os.execve back"},
    {nullptr, nullptr, 0, nullptr}};

int module_traverse(PyObject* module, visitproc visit, void* arg) {
    ModuleState* st = state_of(module);
    if (st != nullptr) {
        Py_VISIT(st->last_stats);
        Py_VISIT(st->after_fork_restart);
    }
    return 0;
}

int module_clear(PyObject* module) {
    ModuleState* st = state_of(module);
    if (st != nullptr) {
        Py_CLEAR(st->last_stats);
        Py_CLEAR(st->after_fork_restart);
    }
    return 0;
}

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "spprof._ext", "spprof native core: sampling, capture and resolution.",
    sizeof(ModuleState), kMethods, nullptr, module_traverse, module_clear, nullptr};

}  // namespace
}  // namespace spprof

PyMODINIT_FUNC PyInit__ext(void) {  // PyMODINIT_FUNC carries extern "C"
    spprof::Error e = spprof::platform_init();
    if (!e.ok()) return spprof::raise(e);
    PyObject* m = PyModule_Create(&spprof::kModule);
    if (m == nullptr) return nullptr;
    auto* st = spprof::state_of(m);
    st->session = nullptr;
    st->last_stats = nullptr;
    st->exit_watcher = nullptr;
    st->after_fork_restart = nullptr;
    if (!spprof::add_row_layout(m)) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
