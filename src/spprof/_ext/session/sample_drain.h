// sample_drain.h: the drain's decoding: every ring's records -> interned stacks and sample rows in the store.
//
// Each record names its thread by slot (or by kernel tid only); the profile names it by
// record id, which outlives the slot. A record gets its stack from the StackBuilder, except
// an idle or runnable record without frames (wall mode: the thread blocked, or waited for a
// CPU, since its last stack), which reuses the thread's last stack; when an idle record (that
// one, or a walk's with the same stack) continues the thread's latest row (idle, that stack,
// its time right after the row's), it is folded into that row (StackStore::fold_into) instead
// of taking one: a blocked or polling thread costs one row per wait, not one per census. A
// record that shares its root side with its thread's previous one (capture/root_share.h) is
// put back whole first (whole_record), whatever happens to it next. Over the memory limit, records are counted and
// dropped, except folds: they take no memory and are kept. Drain thread or stop(), GIL held (the resolver). Also the
// thread registry's RingSink: an ended thread's ring is emptied before it is reused.
//
// The drain thread's passes in native mode may leave records behind: a record whose names
// need a module's file read first (symbol_reads.h) ends its ring's part of the pass, still
// in the ring, so the file is read without the GIL; the next pass, right after, goes on
// from it. Such a pass has not read every ring: the code keeper's pass does not end with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "code_keepalive.h"
#include "../resolver.h"
#include "../capture/ringbuffer.h"
#include "../capture/root_share.h"
#include "session_config.h"
#include "session_threads.h"
#include "stack_builder.h"
#include "stack_store.h"
#include "symbol_reads.h"

namespace spprof {

class SampleDrain final : public RingSink {
public:
    SampleDrain(const SessionConfig& config, SessionThreads& threads, Resolver& resolver, StackStore& store,
                CodeKeepAlive& keepalive, SessionCounters& counters);
    SampleDrain(const SampleDrain&) = delete;
    SampleDrain& operator=(const SampleDrain&) = delete;

    // Native mode: eval-loop ranges for the interleaving (set at start).
    StackBuilder& builder() { return builder_; }
    const StackBuilder& builder() const { return builder_; }

    // GIL held. One pass: every live thread's ring, then the retired ctxs no
    // capture can hold are freed and the code keeper's pass ends. `over_limit`: the session
    // is over its memory limit; records read until the next pass are dropped. `reads` (the
    // drain thread's passes, native mode): a record whose names need a module's file read
    // stays in its ring and the file is queued there. Returns false when a record stayed.
    bool drain_all(bool over_limit, SymbolReads* reads = nullptr);
    // RingSink. GIL held. Every record, whatever its names need.
    void drain_ring(RingBuffer* ring) override { (void)drain_one(ring, nullptr); }
    void slot_taken(uint32_t slot) override;

    // The per-slot last stacks (part of the session's thread memory).
    size_t memory_bytes() const {
        return (last_stack_.capacity() + wait_stack_.capacity() + cpu_stack_.capacity()) * sizeof(uint32_t) +
               last_flags_.capacity() +
               cpu_flags_.capacity() + (last_ts_.capacity() + cpu_ts_.capacity()) * sizeof(uint64_t) +
               last_row_.capacity() * sizeof(size_t) + last_built_.capacity() * sizeof(uint32_t) +
               share_base_.capacity() * sizeof(std::vector<RawFrame>) + share_bytes_ +
               whole_frames_.capacity() * sizeof(RawFrame) + last_built_pcs_.capacity() * sizeof(uint64_t);
    }

private:
    // The resolver as the StackBuilder's FrameNamer.
    class ResolverNamer final : public FrameNamer {
    public:
        explicit ResolverNamer(Resolver& resolver) : resolver_(resolver) {}
        uint32_t python_frame(const RawFrame& raw) override {
            if (raw.code == kThreadNameFrameCode) return resolver_.thread_frame(thread_name_ ? *thread_name_ : std::string());
            return resolver_.resolve(raw);
        }
        // The thread whose record is being built (its name for a kThreadNameFrameCode frame).
        void set_thread_name(const std::string* name) { thread_name_ = name; }
        uint32_t native_frame(uint64_t pc, bool* interpreter) override {
            const uint32_t id = resolver_.resolve_native(pc, interpreter, gate_);
            if (id != Resolver::kDeferredFrame) return id;
            deferred_ = true;  // the stack is built on, then dropped: its record waits
            return Resolver::kUnknownFrame;
        }
        // For one record: with a gate (the drain thread's pass), module files are read by
        // its owner, not here. Returns whether a frame was deferred (the record must wait).
        bool build(StackBuilder& builder, const RawSampleHeader& hdr, const RawFrame* frames, FileReadGate* gate,
                   const std::vector<uint32_t>** out) {
            gate_ = gate;
            deferred_ = false;
            *out = &builder.build(hdr, frames, *this);
            gate_ = nullptr;
            return deferred_;
        }

    private:
        Resolver& resolver_;
        const std::string* thread_name_ = nullptr;
        FileReadGate* gate_ = nullptr;
        bool deferred_ = false;
    };

    // The ring's records in order; false when one stayed in the ring for a file (`reads`).
    bool drain_one(RingBuffer* ring, SymbolReads* reads);

    const SessionConfig& config_;
    SessionThreads& threads_;
    StackStore& store_;
    CodeKeepAlive& keepalive_;
    SessionCounters& counters_;
    ResolverNamer namer_;
    StackBuilder builder_;
    std::vector<uint32_t> last_stack_;  // per slot: the stack idle records reuse
    // Per slot: the stack of the thread's latest idle record (where the census last found it
    // blocked): a wait's end (kSampleAtWait) goes there, not to where it ran after the wait.
    std::vector<uint32_t> wait_stack_;
    std::vector<uint8_t> last_flags_;   // per slot: truncated / GIL flags of the record that set it
    std::vector<uint64_t> last_ts_;     // per slot: the time of the thread's latest row
    // Per slot: the last stack the thread was seen running on (an on-CPU record, or the entry
    // stack recorded at registration), with its flags and time. A thread-end sample is CPU
    // time: it goes there, never to a stack the census saw the thread blocked on.
    std::vector<uint32_t> cpu_stack_;
    std::vector<uint8_t> cpu_flags_;
    std::vector<uint64_t> cpu_ts_;
    // Per slot: the store row of the thread's latest sample (kNoRow: none since the slot was
    // taken). A blocked thread's next idle sample folds into it when it continues it
    // (fold_target).
    static constexpr size_t kNoRow = ~static_cast<size_t>(0);
    std::vector<size_t> last_row_;
    size_t fold_target(uint32_t serial, uint32_t id, uint32_t flags, uint32_t stack, const RawSampleHeader& hdr) const;
    // Adds an idle record to `row`: its weight and samples, no new row.
    void fold(size_t row, uint32_t serial, uint32_t id, const RawSampleHeader& hdr, uint32_t count);
    // The stack a depth-0 record of the thread in `serial` reuses: its last, or for a wait's
    // end its latest idle record's (its last when it has none).
    uint32_t stack_of_idle(uint32_t serial, uint32_t flags) const;
    // The record `hdr` (frames after it) with the root-side frames it shares with its
    // thread's previous one put back (root_share.h): `hdr` itself when it has no frames, else
    // whole_hdr_, with *frames pointed at whole_frames_ (valid until the next call).
    const RawSampleHeader* whole_record(const RawSampleHeader* hdr, const RawFrame** frames);
    std::vector<std::vector<RawFrame>> share_base_;  // per slot: the thread's last frames, root first
    size_t share_bytes_ = 0;                         // their capacity, in bytes
    RawSampleHeader whole_hdr_{};
    std::vector<RawFrame> whole_frames_;
    // The stack id of `ids` (a built stack) at `pcs` (StackBuilder::pcs()), interned unless
    // it repeats the last one built.
    uint32_t intern_stack(const std::vector<uint32_t>& ids, const std::vector<uint64_t>& pcs);
    std::vector<uint32_t> last_built_;
    std::vector<uint64_t> last_built_pcs_;
    uint32_t last_built_stack_ = 0xFFFFFFFFu;
    bool over_limit_ = false;
};

}  // namespace spprof
