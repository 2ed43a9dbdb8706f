// resolver.h: turns raw frames (code pointer, instruction offset, fingerprint) into interned
// frames (function, qualified name, file, line).
//
// Threads: the drain only, GIL held. A code object a sample names cannot have been freed yet
// (CodeKeepAlive holds dying ones until the drain has passed), but a pointer from a torn read
// may be anything: a code pointer seen for the first time is still validated before it is
// touched as an object. A read that cannot fault (platform_read_no_fault) must show a code-object
// type, a plausible reference count and the fingerprint taken at capture. Only then is a
// reference taken, for the rest of the session. A frame that cannot be proven valid becomes
// the counted <unknown> frame, never a wrong name.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/sample_record.h"
#include "unwind/eval_ranges.h"
#include "unwind/symbolizer.h"

namespace spprof {

class StringTable {
public:
    uint32_t intern(const std::string& s);
    const std::string& at(uint32_t id) const { return strings_[id]; }
    size_t size() const { return strings_.size(); }
    size_t memory_bytes() const { return bytes_; }

private:
    std::vector<std::string> strings_;
    std::unordered_map<std::string, uint32_t> ids_;
    size_t bytes_ = 0;
};

struct FrameInfo {
    uint32_t name;      // co_name
    uint32_t qualname;  // co_qualname (3.11+), else co_name
    uint32_t file;      // co_filename
    int32_t line;       // the line executing
    int32_t first_line; // co_firstlineno
    bool native;
};

// Asked by resolve_native before it reads a module's file (Symbolizer::needs_file_read): true
// when the file is read elsewhere and the frame must wait for it.
class FileReadGate {
public:
    virtual bool defer(const ModuleTables& wanted) = 0;

protected:
    ~FileReadGate() = default;
};

class Resolver {
public:
    // Synthetic frames every session has, at fixed ids.
    static constexpr uint32_t kUnknownFrame = 0;    // a code object that could not be proven live
    static constexpr uint32_t kTruncatedFrame = 1;  // stands for the lost root side of a deep or torn stack
    static constexpr uint32_t kNoPythonFrame = 2;   // a sample of a thread with no Python frame

    Resolver();
    ~Resolver();  // must not run before release(): it holds references
    Resolver(const Resolver&) = delete;
    Resolver& operator=(const Resolver&) = delete;

    // GIL held. Returns a frame id.
    uint32_t resolve(const RawFrame& raw);
    // GIL held. The frame of native address `pc` (already pc - 1 for a return address),
    // interned per (function, library). *interpreter: the frame is in the interpreter itself
    // (the python executable or libpython), which the drain folds away by default. With a
    // `gate` that defers the module file its name needs: kDeferredFrame, nothing resolved.
    uint32_t resolve_native(uint64_t pc, bool* interpreter, FileReadGate* gate = nullptr);
    static constexpr uint32_t kDeferredFrame = 0xFFFFFFFFu;
    // GIL held. The frame <thread "name">, marked native: the one frame of a sample taken on a
    // thread without a Python frame (a kThreadNameFrameCode RawFrame, sample_record.h).
    uint32_t thread_frame(const std::string& thread_name);
    // GIL held. Drops every reference taken; resolve() must not be called afterwards.
    void release();

    const std::vector<FrameInfo>& frames() const { return frames_; }
    const StringTable& strings() const { return strings_; }
    // Native mode: each library a native frame named (its string id, the frame's file), with
    // where its file addresses start in memory; a sampled address minus it is the address in
    // the file, what pprof's mappings and addr2line want.
    const std::unordered_map<uint32_t, uint64_t>& library_biases() const { return library_biases_; }
    uint64_t unknown_count() const { return unknown_; }
    size_t code_count() const { return codes_.size(); }
    Symbolizer& symbolizer() { return symbolizer_; }
    uint64_t symbolizer_inline_reads() const { return symbolizer_.inline_reads(); }
    // Native mode, before the first resolve_native: the eval loop's parts. A pc in one that no
    // symbol names (a split part of a stripped image) is named after the eval loop's .cold part.
    void set_eval_ranges(const EvalRanges& ranges) { eval_ = ranges; }
    size_t memory_bytes() const;

private:
    struct CodeEntry {
        PyObject* code = nullptr;  // strong reference, or nullptr for a rejected pointer
        uint32_t fingerprint = 0;
        uint32_t name = 0, qualname = 0, file = 0;
        int32_t first_line = 0;
        uint32_t n_units = 0;
        std::unordered_map<uint32_t, uint32_t> frame_by_instr;
    };
    struct FrameKey {
        uint32_t qualname, file, name;
        int32_t line;
        bool native = false;
        bool operator==(const FrameKey& o) const {
            return qualname == o.qualname && file == o.file && name == o.name && line == o.line &&
                   native == o.native;
        }
    };
    struct NativeEntry {
        uint32_t frame;
        bool interpreter;
    };
    struct FrameKeyHash {
        size_t operator()(const FrameKey& k) const {
            uint64_t h = k.qualname * 0x9E3779B97F4A7C15ull;
            h ^= (k.file + 0x632BE59BD9B4E019ull) + (h << 6) + (h >> 2);
            h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.line)) << 32 | k.name) + (h << 6) + (h >> 2);
            return static_cast<size_t>(h);
        }
    };

    CodeEntry* lookup_code(uintptr_t code, uint32_t fingerprint);
    uint32_t intern_frame(const FrameKey& key, int32_t first_line);

    // The frames resolved lately, by (code, instr, fingerprint), in a direct-mapped table: a
    // deep stack's 200 frames come again in every sample, and each cost two hash-map lookups
    // (its code, then its instruction) that miss the cache. An entry is only ever a frame that
    // resolved to a code object this resolver holds a reference on, so its address is not
    // reused while the entry exists (release() empties the table).
    struct RecentFrame {
        uint64_t code = 0;  // 0: empty (no code object lives at 0)
        uint32_t instr = 0;
        uint32_t fingerprint = 0;
        uint32_t id = 0;
    };
    static constexpr size_t kRecentFrames = 4096;
    static size_t recent_slot(const RawFrame& raw) {
        const uint64_t instr = raw.instr & ~kInstrEntryFlag;
        const uint64_t h = (raw.code ^ (instr << 40)) * 0x9E3779B97F4A7C15ull;
        return static_cast<size_t>(h >> 52) & (kRecentFrames - 1);
    }
    std::vector<RecentFrame> recent_ = std::vector<RecentFrame>(kRecentFrames);

    std::unordered_map<uintptr_t, CodeEntry> codes_;
    std::unordered_map<uint64_t, NativeEntry> natives_;  // by pc
    std::unordered_map<uint32_t, uint64_t> library_biases_;
    Symbolizer symbolizer_;
    std::string interpreter_library_;  // module holding the eval loop; resolved lazily
    bool interpreter_known_ = false;
    EvalRanges eval_;
    std::unordered_map<FrameKey, uint32_t, FrameKeyHash> frame_ids_;
    std::vector<FrameInfo> frames_;
    StringTable strings_;
    uint64_t unknown_ = 0;
    size_t instr_entries_ = 0;  // sum of frame_by_instr sizes, kept for memory_bytes()
    bool released_ = false;
};

}  // namespace spprof
