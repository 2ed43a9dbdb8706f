// profile_export.cpp: see profile_export.h.
#include "profile_export.h"

#include <algorithm>
#include <vector>

#include "session/session.h"
#include "session/stack_store.h"

namespace spprof {
namespace {

constexpr uint32_t kUnused = 0xFFFFFFFFu;  // an id the export does not keep

// Sets d[key] = value (stealing value). Returns false with an exception set on failure.
bool put(PyObject* d, const char* key, PyObject* value) {
    if (value == nullptr) return false;
    const int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc == 0;
}

// d[key] = value, taking both references; either may be null (a conversion that failed).
bool put(PyObject* d, PyObject* key, PyObject* value) {
    const bool ok = key != nullptr && value != nullptr && PyDict_SetItem(d, key, value) == 0;
    Py_XDECREF(key);
    Py_XDECREF(value);
    return ok;
}

// What goes out: session ids in their new order, and the new id of each session id.
struct Selection {
    std::vector<uint32_t> frames;        // session frame ids, in export order
    std::vector<uint32_t> stacks;        // session stack ids, in export order
    std::vector<uint32_t> new_frame;     // session frame id -> export id (kUnused: left out)
    std::vector<uint32_t> new_stack;     // session stack id -> export id; empty: unchanged
    std::vector<uint32_t> new_thread;    // thread record id -> export serial (kUnused: left out)
};

// The rows of a window (a folded wait's samples in it as one row, with `folds`), and the
// stacks, frames and threads they use (renumbered in order of use).
std::vector<SampleRow> select_window(const Session* s, const ExportWindow& w, Selection* sel,
                                     std::vector<std::pair<size_t, uint64_t>>* folds) {
    const StackStore& st = s->store();
    const std::vector<ThreadRecord>& recs = s->threads();
    std::vector<SampleRow> rows;
    st.copy_samples_between(
        w.t0_ns, w.t1_ns,
        [&](uint32_t id) { return id < recs.size() && (w.native_tid == 0 || recs[id].native_tid == w.native_tid); },
        &rows, folds);
    sel->new_stack.assign(st.stack_count(), kUnused);
    sel->new_frame.assign(s->resolver().frames().size(), kUnused);
    sel->new_thread.assign(recs.size(), kUnused);
    std::vector<bool> thread_used(recs.size(), false);
    for (SampleRow& row : rows) {
        uint32_t& stack = sel->new_stack[row.stack];
        if (stack == kUnused) {
            stack = static_cast<uint32_t>(sel->stacks.size());
            sel->stacks.push_back(row.stack);
            for (uint32_t k = st.begin(row.stack); k < st.end(row.stack); ++k) {
                uint32_t& frame = sel->new_frame[st.pool()[k]];
                if (frame == kUnused) {
                    frame = static_cast<uint32_t>(sel->frames.size());
                    sel->frames.push_back(st.pool()[k]);
                }
            }
        }
        row.stack = stack;
        thread_used[row.thread_and_flags & kSerialMask] = true;
    }
    uint32_t kept = 0;  // threads keep the session's order
    for (size_t i = 0; i < recs.size(); ++i)
        if (thread_used[i]) sel->new_thread[i] = kept++;
    for (SampleRow& row : rows) {
        const uint32_t id = row.thread_and_flags & kSerialMask;
        row.thread_and_flags = (row.thread_and_flags & ~kSerialMask) | sel->new_thread[id];
    }
    return rows;
}

// The whole session: every frame and stack as they are; record ids of threads that ended
// unsampled were freed (and maybe never reused): the thread list has no gaps, so the rows
// are renumbered.
void select_all(const Session* s, SampleRow* rows, size_t count, Selection* sel) {
    const size_t n_frames = s->resolver().frames().size();
    sel->frames.resize(n_frames);
    sel->new_frame.resize(n_frames);
    for (size_t i = 0; i < n_frames; ++i) sel->frames[i] = sel->new_frame[i] = static_cast<uint32_t>(i);
    sel->stacks.resize(s->store().stack_count());
    for (size_t i = 0; i < sel->stacks.size(); ++i) sel->stacks[i] = static_cast<uint32_t>(i);
    const std::vector<ThreadRecord>& recs = s->threads();
    sel->new_thread.assign(recs.size(), kUnused);
    uint32_t kept = 0;
    for (size_t i = 0; i < recs.size(); ++i)
        if (!recs[i].free) sel->new_thread[i] = kept++;
    if (kept != recs.size()) {
        for (size_t k = 0; k < count; ++k) {
            const uint32_t id = rows[k].thread_and_flags & kSerialMask;
            const uint32_t to = id < sel->new_thread.size() && sel->new_thread[id] != kUnused ? sel->new_thread[id] : 0;
            rows[k].thread_and_flags = (rows[k].thread_and_flags & ~kSerialMask) | to;
        }
    }
}

PyObject* frames_list(const Session* s, const Selection& sel) {
    const Resolver& res = s->resolver();
    const StringTable& str = res.strings();
    PyObject* frames = PyList_New(static_cast<Py_ssize_t>(sel.frames.size()));
    if (frames == nullptr) return nullptr;
    for (size_t i = 0; i < sel.frames.size(); ++i) {
        const FrameInfo& f = res.frames()[sel.frames[i]];
        PyObject* t = Py_BuildValue("(s#s#s#iiO)", str.at(f.name).data(), static_cast<Py_ssize_t>(str.at(f.name).size()),
                                    str.at(f.qualname).data(), static_cast<Py_ssize_t>(str.at(f.qualname).size()),
                                    str.at(f.file).data(), static_cast<Py_ssize_t>(str.at(f.file).size()),
                                    f.line, f.first_line, f.native ? Py_True : Py_False);
        if (t == nullptr) {
            Py_DECREF(frames);
            return nullptr;
        }
        PyList_SET_ITEM(frames, static_cast<Py_ssize_t>(i), t);
    }
    return frames;
}

PyObject* stacks_list(const Session* s, const Selection& sel) {
    const StackStore& st = s->store();
    PyObject* stacks = PyList_New(static_cast<Py_ssize_t>(sel.stacks.size()));
    if (stacks == nullptr) return nullptr;
    for (size_t i = 0; i < sel.stacks.size(); ++i) {
        const uint32_t b = st.begin(sel.stacks[i]), e = st.end(sel.stacks[i]);
        PyObject* t = PyTuple_New(e - b);
        if (t == nullptr) {
            Py_DECREF(stacks);
            return nullptr;
        }
        for (uint32_t k = b; k < e; ++k) PyTuple_SET_ITEM(t, k - b, PyLong_FromUnsignedLong(sel.new_frame[st.pool()[k]]));
        PyList_SET_ITEM(stacks, static_cast<Py_ssize_t>(i), t);
    }
    return stacks;
}

// {export stack id: (address of each frame, 0 for none)} for each stack with a native frame's
// address (native mode: pprof's locations), and {library: load bias} for the libraries of
// the native frames named. Both empty without native frames.
PyObject* addresses_dict(const Session* s, const Selection& sel) {
    const StackStore& st = s->store();
    PyObject* d = PyDict_New();
    if (d == nullptr) return nullptr;
    for (size_t i = 0; i < sel.stacks.size(); ++i) {
        const uint64_t* pcs = st.pcs(sel.stacks[i]);
        if (pcs == nullptr) break;  // no stack has any
        const uint32_t n = st.end(sel.stacks[i]) - st.begin(sel.stacks[i]);
        if (std::none_of(pcs, pcs + n, [](uint64_t pc) { return pc != 0; })) continue;
        PyObject* t = PyTuple_New(n);
        for (uint32_t k = 0; t != nullptr && k < n; ++k) {
            PyObject* v = PyLong_FromUnsignedLongLong(pcs[k]);
            if (v == nullptr) Py_CLEAR(t);
            else PyTuple_SET_ITEM(t, k, v);
        }
        if (!put(d, t != nullptr ? PyLong_FromSize_t(i) : nullptr, t)) {
            Py_DECREF(d);
            return nullptr;
        }
    }
    return d;
}

PyObject* libraries_dict(const Session* s) {
    const Resolver& res = s->resolver();
    PyObject* d = PyDict_New();
    if (d == nullptr) return nullptr;
    for (const auto& [lib, bias] : res.library_biases()) {
        const std::string& path = res.strings().at(lib);  // UTF-8 (utf8_text.h)
        PyObject* key = PyUnicode_FromStringAndSize(path.data(), static_cast<Py_ssize_t>(path.size()));
        if (!put(d, key, key != nullptr ? PyLong_FromUnsignedLongLong(bias) : nullptr)) {
            Py_DECREF(d);
            return nullptr;
        }
    }
    return d;
}

// {row index: samples it holds} for each row holding more than one (StackStore::folds).
PyObject* folds_dict(const std::vector<std::pair<size_t, uint64_t>>& folds) {
    PyObject* d = PyDict_New();
    if (d == nullptr) return nullptr;
    for (const auto& [row, n] : folds) {
        PyObject* k = PyLong_FromSize_t(row);
        if (!put(d, k, k != nullptr ? PyLong_FromUnsignedLongLong(n) : nullptr)) {
            Py_DECREF(d);
            return nullptr;
        }
    }
    return d;
}

PyObject* threads_list(const Session* s, const Selection& sel) {
    const std::vector<ThreadRecord>& recs = s->threads();
    PyObject* threads = PyList_New(0);
    bool ok = threads != nullptr;
    for (size_t i = 0; ok && i < recs.size(); ++i) {
        if (sel.new_thread[i] == kUnused) continue;
        const ThreadRecord& r = recs[i];
        const uint64_t cpu = r.cpu_last_ns >= r.cpu_start_ns ? r.cpu_last_ns - r.cpu_start_ns : 0;
        PyObject* t = Py_BuildValue("{s:n,s:k,s:K,s:s#,s:K,s:K,s:K,s:N,s:N}", "serial",
                                    static_cast<Py_ssize_t>(sel.new_thread[i]), "ident", r.ident, "native_id",
                                    static_cast<unsigned long long>(r.native_tid), "name", r.name.data(),
                                    static_cast<Py_ssize_t>(r.name.size()), "cpu_ns", static_cast<unsigned long long>(cpu),
                                    "registered_ns", static_cast<unsigned long long>(r.registered_ns), "ended_ns",
                                    static_cast<unsigned long long>(r.ended_ns), "native_only",
                                    PyBool_FromLong(r.native_only), "signal_blocked", PyBool_FromLong(r.signal_blocked));
        ok = t != nullptr && PyList_Append(threads, t) == 0;
        Py_XDECREF(t);
    }
    if (!ok) Py_CLEAR(threads);
    return threads;
}

}  // namespace

PyObject* export_profile(const Session* s, PyObject* stats, const ExportWindow* window) {
    Selection sel;
    PyObject* samples = nullptr;
    std::vector<std::pair<size_t, uint64_t>> folds;
    if (window != nullptr) {
        const std::vector<SampleRow> rows = select_window(s, *window, &sel, &folds);
        samples = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(rows.data()),
                                            static_cast<Py_ssize_t>(rows.size() * sizeof(SampleRow)));
    } else {
        // The rows as held: a blocked thread's wait is one row however long (folds_dict).
        const size_t count = s->store().row_count();
        samples = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(count * sizeof(SampleRow)));
        if (samples != nullptr) {
            auto* rows = reinterpret_cast<SampleRow*>(PyBytes_AS_STRING(samples));
            s->store().copy_rows(rows);
            select_all(s, rows, count, &sel);
            folds = s->store().folds();
        }
    }
    if (samples == nullptr) return nullptr;
    PyObject* folds_obj = folds_dict(folds);
    if (folds_obj == nullptr) {
        Py_DECREF(samples);
        return nullptr;
    }
    PyObject* frames = frames_list(s, sel);
    PyObject* stacks = frames != nullptr ? stacks_list(s, sel) : nullptr;
    PyObject* threads = stacks != nullptr ? threads_list(s, sel) : nullptr;
    PyObject* result = threads != nullptr ? PyDict_New() : nullptr;
    const uint64_t start = window ? window->t0_ns : s->start_ns();
    const uint64_t end = window ? window->t1_ns : s->end_ns();
    if (result == nullptr) {
        Py_XDECREF(frames);
        Py_XDECREF(stacks);
        Py_XDECREF(threads);
        Py_DECREF(samples);
        Py_DECREF(folds_obj);
        return nullptr;
    }
    // put() steals its value whether it succeeds or not (and refuses a null one).
    bool ok = put(result, "frames", frames);
    ok = put(result, "stacks", stacks) && ok;
    ok = put(result, "samples", samples) && ok;
    ok = put(result, "folds", folds_obj) && ok;
    ok = put(result, "threads", threads) && ok;
    ok = ok && put(result, "stack_addresses", addresses_dict(s, sel));
    ok = ok && put(result, "native_libraries", libraries_dict(s));
    if (ok) {
        Py_INCREF(stats);
        ok = put(result, "stats", stats) && put(result, "start_ns", PyLong_FromUnsignedLongLong(start)) &&
             put(result, "end_ns", PyLong_FromUnsignedLongLong(end)) &&
             put(result, "interval_ns", PyLong_FromUnsignedLongLong(s->config().interval_ns));
    }
    if (!ok) {
        Py_XDECREF(result);
        return nullptr;
    }
    return result;
}

}  // namespace spprof
