// resolver.cpp: see resolver.h. Everything here runs on the drain with the GIL held.
#include "resolver.h"

#include <cstddef>
#include <cstdio>

#include "framewalker.h"
#include "platform/platform.h"
#include "utf8_text.h"

namespace spprof {

uint32_t StringTable::intern(const std::string& s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(strings_.size());
    strings_.push_back(s);
    ids_.emplace(s, id);
    bytes_ += 2 * s.size() + 96;  // both copies plus container overhead, roughly
    return id;
}

namespace {

std::string utf8_of(PyObject* s) {
    if (s == nullptr || !PyUnicode_Check(s)) return "<?>";
    Py_ssize_t n = 0;
    const char* p = PyUnicode_AsUTF8AndSize(s, &n);
    if (p != nullptr) return std::string(p, static_cast<size_t>(n));
    PyErr_Clear();
    // A file name from bytes that are not UTF-8 (a script in a Latin-1 directory): Python
    // decoded them with surrogateescape, so they come back as they were, then as text.
    PyObject* bytes = PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape");
    if (bytes == nullptr) {
        PyErr_Clear();
        return "<?>";
    }
    std::string text = utf8_text(std::string_view(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes))));
    Py_DECREF(bytes);
    return text;
}

// A freed block holds an allocator pointer (or nothing) where a live object keeps its count;
// 2^40 references is more than any live object has (3.12+ immortal objects use 2^32 - 1).
constexpr Py_ssize_t kMaxPlausibleRefcnt = static_cast<Py_ssize_t>(1) << 40;

// Reads memory that may have been freed: platform_read_no_fault fails instead of faulting.
struct SafeReader {
    bool read(uintptr_t addr, void* out, size_t n) const { return platform_read_no_fault(addr, out, n); }
};

// The capture path's code-object reader (read_code_facts) through reads that cannot fault,
// plus a reference-count check the capture path cannot afford.
bool looks_like_live_code(uintptr_t p, uint32_t fingerprint) {
    if (p < 4096 || (p & 7) != 0) return false;
    CodeFacts facts;
    if (!read_code_facts(SafeReader{}, p, &facts) || facts.fingerprint != fingerprint) return false;
    Py_ssize_t refcnt = 0;
    if (!platform_read_no_fault(p, &refcnt, sizeof refcnt)) return false;
    return refcnt >= 1 && refcnt <= kMaxPlausibleRefcnt;
}

uint32_t code_units(PyCodeObject* co) {
#if PY_VERSION_HEX >= 0x030B0000
    return static_cast<uint32_t>(Py_SIZE(co));
#else
    return co->co_code != nullptr ? static_cast<uint32_t>(PyBytes_GET_SIZE(co->co_code) / 2) : 0u;
#endif
}

}  // namespace

Resolver::Resolver() {
    const uint32_t unknown = strings_.intern("<unknown>");
    const uint32_t truncated = strings_.intern("<truncated>");
    const uint32_t empty = strings_.intern("");
    frames_.push_back(FrameInfo{unknown, unknown, empty, 0, 0, false});
    frames_.push_back(FrameInfo{truncated, truncated, empty, 0, 0, false});
    const uint32_t none = strings_.intern("<no Python frame>");
    frames_.push_back(FrameInfo{none, none, empty, 0, 0, false});
}

Resolver::~Resolver() {
    // A Resolver dropped without release() (e.g. in a forked child) leaks its references on
    // purpose: touching reference counts without the GIL would be worse.
}

void Resolver::release() {
    for (auto& kv : codes_) Py_CLEAR(kv.second.code);
    codes_.clear();
    recent_.assign(kRecentFrames, RecentFrame{});
    released_ = true;
}

Resolver::CodeEntry* Resolver::lookup_code(uintptr_t code, uint32_t fingerprint) {
    auto it = codes_.find(code);
    if (it != codes_.end()) {
        // While we hold a reference the address cannot be reused, so a different fingerprint
        // means the capture read something torn: do not trust it.
        if (it->second.code == nullptr || it->second.fingerprint != fingerprint) return nullptr;
        return &it->second;
    }
    if (released_ || !looks_like_live_code(code, fingerprint)) return nullptr;
    PyObject* obj = reinterpret_cast<PyObject*>(code);
    Py_INCREF(obj);
    auto* co = reinterpret_cast<PyCodeObject*>(obj);
    CodeEntry e;
    e.code = obj;
    e.fingerprint = fingerprint;
    e.name = strings_.intern(utf8_of(co->co_name));
#if PY_VERSION_HEX >= 0x030B0000
    e.qualname = strings_.intern(utf8_of(co->co_qualname));
#else
    e.qualname = e.name;
#endif
    e.file = strings_.intern(utf8_of(co->co_filename));
    e.first_line = co->co_firstlineno;
    e.n_units = code_units(co);
    return &codes_.emplace(code, std::move(e)).first->second;
}

uint32_t Resolver::intern_frame(const FrameKey& key, int32_t first_line) {
    auto it = frame_ids_.find(key);
    if (it != frame_ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(frames_.size());
    frames_.push_back(FrameInfo{key.name, key.qualname, key.file, key.line, first_line, key.native});
    frame_ids_.emplace(key, id);
    return id;
}

uint32_t Resolver::resolve(const RawFrame& raw) {
    if (raw.code == kSubinterpreterFrameCode) {
        const uint32_t name = strings_.intern("<subinterpreter " + std::to_string(raw.fingerprint) + ">");
        return intern_frame(FrameKey{name, strings_.intern(""), name, 0}, 0);
    }
    if (raw.code == kGcFrameCode) {
        // The cyclic GC: no file, no line, like a subinterpreter's marker.
        const uint32_t name = strings_.intern("<GC>");
        return intern_frame(FrameKey{name, strings_.intern(""), name, 0}, 0);
    }
    const uint32_t instr = raw.instr & ~kInstrEntryFlag;
    RecentFrame& recent = recent_[recent_slot(raw)];
    if (raw.code != 0 && recent.code == raw.code && recent.instr == instr && recent.fingerprint == raw.fingerprint)
        return recent.id;
    CodeEntry* e = lookup_code(static_cast<uintptr_t>(raw.code), raw.fingerprint);
    if (e == nullptr || instr >= e->n_units) {
        ++unknown_;
        return kUnknownFrame;
    }
    uint32_t id = 0;
    auto it = e->frame_by_instr.find(instr);
    if (it != e->frame_by_instr.end()) {
        id = it->second;
    } else {
        int line = PyCode_Addr2Line(reinterpret_cast<PyCodeObject*>(e->code), static_cast<int>(instr * 2));
        if (line < 0) line = e->first_line;
        id = intern_frame(FrameKey{e->qualname, e->file, e->name, line}, e->first_line);
        e->frame_by_instr.emplace(instr, id);
        ++instr_entries_;
    }
    recent = RecentFrame{raw.code, instr, raw.fingerprint, id};
    return id;
}

uint32_t Resolver::thread_frame(const std::string& thread_name) {
    const uint32_t name = strings_.intern("<thread \"" + thread_name + "\">");
    return intern_frame(FrameKey{name, strings_.intern(""), name, 0, true}, 0);
}

uint32_t Resolver::resolve_native(uint64_t pc, bool* interpreter, FileReadGate* gate) {
    auto it = natives_.find(pc);
    if (it != natives_.end()) {
        *interpreter = it->second.interpreter;
        return it->second.frame;
    }
    if (gate != nullptr) {
        ModuleTables wanted;
        if (symbolizer_.needs_file_read(pc, &wanted) && gate->defer(wanted)) {
            *interpreter = false;
            return kDeferredFrame;
        }
    }
    if (!interpreter_known_) {
        NativeSymbol eval;
        symbolizer_.symbolize(reinterpret_cast<uint64_t>(&PyEval_EvalCode), &eval);
        interpreter_library_ = eval.library;
        interpreter_known_ = true;
    }
    NativeSymbol sym;
    symbolizer_.symbolize(pc, &sym);
    std::string name = sym.function;
    if (!sym.has_symbol && is_eval_frame(eval_, pc)) {
        name = "_PyEval_EvalFrameDefault.cold";  // found from the code (unwind/split_parts.h)
    } else if (!sym.has_symbol) {
        // A static function of a stripped library: name it by library and the offset of its
        // start (by the unwind table: one frame per function, what addr2line or a symbol
        // server needs), else of the pc; absolute when the pc is in no module.
        char buf[40];
        const uint64_t at = sym.has_start ? sym.start_offset : sym.offset;
        std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(at));
        const size_t slash = sym.library.rfind('/');
        name = sym.library.empty() ? std::string(buf)
                                   : sym.library.substr(slash == std::string::npos ? 0 : slash + 1) + "+" + buf;
    }
    // OS bytes, not necessarily UTF-8: Python decodes every interned string strictly.
    const uint32_t name_id = strings_.intern(utf8_text(name));
    const uint32_t lib_id = strings_.intern(utf8_text(sym.library));
    if (!sym.library.empty()) library_biases_.emplace(lib_id, sym.load_bias);
    FrameKey key{name_id, lib_id, name_id, 0, true};
    const uint32_t id = intern_frame(key, 0);
    const bool interp = !sym.library.empty() && sym.library == interpreter_library_;
    natives_.emplace(pc, NativeEntry{id, interp});
    *interpreter = interp;
    return id;
}

size_t Resolver::memory_bytes() const {
    // O(1): the drain asks every pass.
    return kRecentFrames * sizeof(RecentFrame) + strings_.memory_bytes() + codes_.size() * 160 +
           instr_entries_ * 40 + natives_.size() * 48 + library_biases_.size() * 32 + frames_.size() * (sizeof(FrameInfo) + 48);
}

}  // namespace spprof
