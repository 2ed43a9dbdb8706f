// code_facts.h: what the capture path reads from a code object, and a per-thread cache of it.
//
// For each frame the walk needs a few fields of its code object: the type (is it one?), the
// fingerprint the resolver re-checks (first line, name pointer) and, on 3.11+, the first
// traceable instruction. (The instruction offset is checked against the bytecode's length by
// the resolver, off the signal path.) Those sit on two or three cache lines that a deep stack's outer
// frames have not touched for a while: they were most of the handler's time at depth 50. A
// thread runs the same few hundred code objects over and over, so each ThreadCtx keeps a
// small direct-mapped cache of them, written and read by its own capture path only.
//
// Staleness: an entry is only wrong if its code object was freed and the address reused.
// While a session runs, code objects are freed only when CodeKeepAlive releases them at the
// end of a drain pass, and it bumps g_code_generation first; the next walk that sees a new
// generation empties the cache before its first lookup.
//
// SIGNAL-SAFE, NO-HEAP. No Python.h here (thread_ctx.h holds a cache): the reader of these
// facts, read_code_facts(), is in framewalker.h; it is the one code-object reader, also used
// by the resolver (through reads that cannot fault) to re-check a code object before use.
#pragma once

#include <atomic>
#include <cstdint>


namespace spprof {

struct CodeFacts {
    uintptr_t code = 0;           // 0: empty slot
    uint32_t fingerprint = 0;     // code_fingerprint(co_firstlineno, co_name)
    int32_t first_traceable = 0;  // 3.11+: _co_firsttraceable; 0 before
};
static_assert(sizeof(CodeFacts) == 16, "a cache slot is 16 bytes: the index is a shift");

// Bumped before any code object is really freed while a session runs (CodeKeepAlive).
inline std::atomic<uint64_t> g_code_generation{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "read by the signal handler");

class CodeFactsCache {
public:
    // A power of two: a hot loop's stack rarely holds more distinct code objects than this.
    static constexpr uint32_t kSlots = 256;

    // Once per walk: entries filled before code objects were last freed are dropped. Emptying
    // the slots here (rare: only when something was freed) keeps a lookup to one compare.
    void sync() {
        const uint64_t g = g_code_generation.load(std::memory_order_acquire);
        if (g == generation_) return;
        for (CodeFacts& s : slots_) s.code = 0;
        generation_ = g;
    }
    // The slot `code` maps to: a hit when its .code is `code`. A reference, never null, so
    // that the walk's hit test is that one compare. `code` is never 0 (an empty slot): the
    // walk skips frames without a code object.
    const CodeFacts& find(uintptr_t code) const { return slots_[slot(code)]; }
    void put(const CodeFacts& facts) { slots_[slot(facts.code)] = facts; }

private:
    // Code objects are at least 16-byte aligned and a few hundred bytes long: drop the low
    // bits that do not vary, fold in higher ones.
    static uint32_t slot(uintptr_t code) {
        return static_cast<uint32_t>((code >> 4) ^ (code >> 12)) & (kSlots - 1);
    }
    CodeFacts slots_[kSlots];
    uint64_t generation_ = 0;
};

}  // namespace spprof
