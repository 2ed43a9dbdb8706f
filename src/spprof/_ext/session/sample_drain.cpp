// sample_drain.cpp: rings -> stacks and sample rows (see sample_drain.h).
// Python.h before any system header, as Python requires: 3.15's pyconfig.h defines
// _XOPEN_SOURCE 800, which clashes with the 700 a system header has already set.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sample_drain.h"

#include <algorithm>

#include "../capture/record_writer.h"
#include "../capture/sample_record.h"

namespace spprof {

namespace {

constexpr uint32_t kNoStack = 0xFFFFFFFFu;  // last_stack_ entry of a thread with none yet
// An idle record continues a row when its span starts this close to the row's end: the census
// stamps a record with its time and weighs it with the time since the thread's last census
// reading, a few microseconds apart; a gap (a record lost to a busy or full ring) is not folded.
constexpr uint64_t kFoldGapNs = 1000000;

}  // namespace

SampleDrain::SampleDrain(const SessionConfig& config, SessionThreads& threads, Resolver& resolver,
                         StackStore& store, CodeKeepAlive& keepalive, SessionCounters& counters)
    : config_(config),
      threads_(threads),
      store_(store),
      keepalive_(keepalive),
      counters_(counters),
      namer_(resolver),
      builder_(StackBuilderConfig{Resolver::kTruncatedFrame, Resolver::kNoPythonFrame, config.interpreter_frames,
                                  Resolver::kUnknownFrame}) {}

void SampleDrain::slot_taken(uint32_t slot) {
    if (last_stack_.size() <= slot) last_stack_.resize(slot + 1, kNoStack);
    last_stack_[slot] = kNoStack;
    if (wait_stack_.size() <= slot) wait_stack_.resize(slot + 1, kNoStack);
    wait_stack_[slot] = kNoStack;
    if (last_flags_.size() <= slot) last_flags_.resize(slot + 1, 0);
    last_flags_[slot] = 0;
    if (last_ts_.size() <= slot) last_ts_.resize(slot + 1, 0);
    last_ts_[slot] = 0;
    if (cpu_stack_.size() <= slot) {
        cpu_stack_.resize(slot + 1, kNoStack);
        cpu_flags_.resize(slot + 1, 0);
        cpu_ts_.resize(slot + 1, 0);
    }
    cpu_stack_[slot] = kNoStack;
    if (last_row_.size() <= slot) last_row_.resize(slot + 1, kNoRow);
    last_row_[slot] = kNoRow;
    if (share_base_.size() <= slot) share_base_.resize(slot + 1);
    share_bytes_ -= share_base_[slot].capacity() * sizeof(RawFrame);
    std::vector<RawFrame>().swap(share_base_[slot]);  // the new thread's first record is whole
}

const RawSampleHeader* SampleDrain::whole_record(const RawSampleHeader* hdr, const RawFrame** frames) {
    // Every record with frames passes here, in ring order, whatever happens to it next (folded,
    // dropped over the limit, naming no known thread): the base must follow the writer's.
    if (hdr->depth == 0 && hdr->shared_root == 0) return hdr;
    const uint32_t slot = hdr->thread_serial;
    if (share_base_.size() <= slot) share_base_.resize(slot + 1);
    std::vector<RawFrame>& base = share_base_[slot];
    const size_t had = base.capacity();
    if (!root_share_decode(*hdr, *frames, &base, &whole_hdr_, &whole_frames_)) ++counters_.records_without_base;
    share_bytes_ += (base.capacity() - had) * sizeof(RawFrame);
    if (hdr->shared_root != 0) ++counters_.records_root_shared;
    *frames = whole_frames_.data();
    return &whole_hdr_;
}

size_t SampleDrain::fold_target(uint32_t serial, uint32_t id, uint32_t flags, uint32_t stack,
                                const RawSampleHeader& hdr) const {
    // Only a plain idle record (a wait's end too), into the thread's latest row when that row
    // is idle on the same stack and ends where this record's time begins. `stack` is the
    // record's: the one a census record reuses, or a walk's, interned.
    if ((flags & ~kSampleAtWait) != kSampleIdle || serial >= last_row_.size() || last_row_[serial] == kNoRow)
        return kNoRow;
    const size_t r = last_row_[serial];
    const SampleRow& row = store_.sample(r);
    if (row.stack != stack || (row.thread_and_flags & kSerialMask) != (id & kSerialMask) ||
        (row.thread_and_flags >> kSerialBits) != kSampleIdle)
        return kNoRow;
    if (hdr.timestamp_ns < row.timestamp_ns || hdr.weight_ns > hdr.timestamp_ns) return kNoRow;
    const uint64_t begins = hdr.timestamp_ns - hdr.weight_ns;
    const uint64_t gap = begins > row.timestamp_ns ? begins - row.timestamp_ns : row.timestamp_ns - begins;
    return gap <= kFoldGapNs ? r : kNoRow;
}

void SampleDrain::fold(size_t row, uint32_t serial, uint32_t id, const RawSampleHeader& hdr, uint32_t count) {
    // The wait goes on: the row that holds it grows (same bookkeeping as a new row's). It
    // costs no memory, so it is kept over the limit too (counted apart).
    store_.fold_into(row, hdr.timestamp_ns, hdr.weight_ns, count);
    last_ts_[serial] = std::max(last_ts_[serial], hdr.timestamp_ns);
    threads_.record(id).samples += count;
    counters_.idle_samples_folded += count;
    if (over_limit_) counters_.idle_folded_over_limit += count;
}

uint32_t SampleDrain::stack_of_idle(uint32_t serial, uint32_t flags) const {
    const uint32_t wait = (flags & kSampleAtWait) ? wait_stack_[serial] : kNoStack;
    return wait != kNoStack ? wait : last_stack_[serial];
}

uint32_t SampleDrain::intern_stack(const std::vector<uint32_t>& ids, const std::vector<uint64_t>& pcs) {
    // Most records of a thread repeat the stack of the one before (a loop on one line): the
    // store's hash of the whole stack is skipped for them. Stacks are never removed from the
    // store, so the id stays right for the session.
    if (last_built_stack_ != kNoStack && ids == last_built_ && pcs == last_built_pcs_) return last_built_stack_;
    last_built_ = ids;
    last_built_pcs_ = pcs;
    last_built_stack_ = store_.intern(ids.data(), static_cast<uint32_t>(ids.size()), pcs.empty() ? nullptr : pcs.data());
    return last_built_stack_;
}

bool SampleDrain::drain_all(bool over_limit, SymbolReads* reads) {
    over_limit_ = over_limit;
    bool whole = true;
    const ThreadTable& table = threads_.table();
    for (size_t i = 0; i < table.slot_count(); ++i) {
        ThreadCtx* ctx = table.at(i);
        if (ctx != nullptr && ctx->ring_) {
            if (!drain_one(ctx->ring_.get(), reads)) {
                whole = false;
                continue;
            }
            if (rewind_drained_ring(ctx)) ++counters_.ring_rewinds;
        }
    }
    threads_.collect_retired();
    // A record left in a ring may name a code object that died since: it stays kept.
    if (whole) keepalive_.end_of_pass();
    ++counters_.drains;
    if (!whole) ++counters_.drains_waiting_for_files;
    return whole;
}

bool SampleDrain::drain_one(RingBuffer* ring, SymbolReads* reads) {
    size_t size = 0;
    while (const void* rec = ring->peek(&size)) {
        ++counters_.records;
        const auto* stored = static_cast<const RawSampleHeader*>(rec);
        const auto* frames = reinterpret_cast<const RawFrame*>(stored + 1);
        const RawSampleHeader* hdr = whole_record(stored, &frames);
        // The record names its thread by slot; the profile by record id, which outlives the slot.
        const uint32_t id = threads_.record_of_slot(hdr->thread_serial);
        if (id == SessionThreads::kNoRecord) {
            ++counters_.unknown_thread;
            ring->pop();
            continue;
        }
        const uint32_t serial = threads_.record(id).slot;  // last_stack_ is per slot
        uint32_t flags = hdr->flags;
        if (last_stack_.size() <= serial) last_stack_.resize(serial + 1, kNoStack);
        if (wait_stack_.size() <= serial) wait_stack_.resize(serial + 1, kNoStack);
        if (last_flags_.size() <= serial) last_flags_.resize(serial + 1, 0);
        if (last_ts_.size() <= serial) last_ts_.resize(serial + 1, 0);
        if (cpu_stack_.size() <= serial) {
            cpu_stack_.resize(serial + 1, kNoStack);
            cpu_flags_.resize(serial + 1, 0);
            cpu_ts_.resize(serial + 1, 0);
        }
        uint64_t timestamp = hdr->timestamp_ns;
        if (last_row_.size() <= serial) last_row_.resize(serial + 1, kNoRow);
        // A census record of a long wait stands for every census that passed its thread over.
        const uint32_t count = hdr->censuses > 1 ? hdr->censuses : 1;
        const size_t reused =
            hdr->depth == 0 ? fold_target(serial, id, flags, stack_of_idle(serial, flags), *hdr) : kNoRow;
        if (reused != kNoRow) {
            fold(reused, serial, id, *hdr, count);
            ring->pop();
            continue;
        }
        if (over_limit_) {
            counters_.dropped_memory += count;
            ring->pop();
            continue;
        }
        uint32_t stack;
        if ((flags & (kSampleIdle | kSampleRunnable | kSampleThreadEnd)) && hdr->depth == 0 &&
            last_stack_[serial] != kNoStack) {
            // Blocked (or preempted) since its last stack, or the CPU a thread used after its
            // last sample: reuse that stack. A thread-end sample says what its last sample
            // said (truncated, the GIL) and when: a stack is never shown at a time it was not
            // seen.
            stack = stack_of_idle(serial, flags);
            if ((flags & kSampleThreadEnd) && cpu_stack_[serial] != kNoStack) {
                stack = cpu_stack_[serial];
                flags |= cpu_flags_[serial];
            } else if (flags & kSampleThreadEnd) {
                flags |= last_flags_[serial];
            }
            // Its time: the thread's latest record's, so that a thread's rows stay in time
            // order (a timeline draws them in that order) and the sample is never placed
            // after the thread was last seen.
            if (flags & kSampleThreadEnd) timestamp = std::max(cpu_ts_[serial], last_ts_[serial]);
        } else {
            namer_.set_thread_name(&threads_.record(id).name);
            const std::vector<uint32_t>* built = nullptr;
            if (namer_.build(builder_, *hdr, frames, reads, &built)) {
                // Its names wait for a module's file: the record stays, read again (and
                // counted, and put back whole, the same) by the pass that follows the file's read.
                --counters_.records;
                if (stored->shared_root != 0) --counters_.records_root_shared;
                return false;
            }
            stack = intern_stack(*built, builder_.pcs());
            // A walk that finds the thread blocked where its latest row waits continues that
            // row: a thread that wakes and blocks again on the same line (a contended lock, the
            // GIL after a release of many threads) keeps one row, not one per walk.
            const size_t walked = fold_target(serial, id, flags, stack, *hdr);
            if (walked != kNoRow) {
                fold(walked, serial, id, *hdr, count);
                last_stack_[serial] = wait_stack_[serial] = stack;
                last_flags_[serial] = 0;  // a plain idle record's
                ring->pop();
                continue;
            }
            last_stack_[serial] = stack;
            last_flags_[serial] = static_cast<uint8_t>(flags & (kSampleTruncated | kSampleGilKnown | kSampleHasGil));
            last_ts_[serial] = hdr->timestamp_ns;
            const bool ran = (flags & kSampleOnCpu) && !(flags & (kSampleIdle | kSampleRunnable));
            if (ran || (flags & kSampleStackOnly)) {
                cpu_stack_[serial] = stack;
                cpu_flags_[serial] = last_flags_[serial];
                cpu_ts_[serial] = hdr->timestamp_ns;
            }
        }
        if ((flags & (kSampleIdle | kSampleThreadEnd | kSampleStackOnly)) == kSampleIdle) wait_stack_[serial] = stack;
        if (!(flags & (kSampleStackOnly | kSampleThreadEnd))) last_ts_[serial] = std::max(last_ts_[serial], timestamp);
        if (!(flags & kSampleStackOnly)) {
            store_.add_sample(SampleRow{timestamp, hdr->weight_ns, stack,
                                        (id & kSerialMask) | ((flags & 0xFFu) << kSerialBits)});
            last_row_[serial] = store_.row_count() - 1;
            // Its weight spans those censuses: the row holds that many samples, spread over it.
            if (count > 1) {
                store_.fold_into(last_row_[serial], timestamp, 0, count - 1);
                counters_.idle_samples_folded += count - 1;
            }
            ThreadRecord& owner = threads_.record(id);
            owner.samples += count;
            if (flags & kSampleOnCpu) {
                owner.sampled_ns += hdr->weight_ns;
                counters_.profile_cpu_ns += hdr->weight_ns;
            }
            if (!config_.wall_mode && !owner.cpu_timer && hdr->timestamp_ns > owner.cpu_read_at_ns)
                owner.weight_since_cpu_read += hdr->weight_ns;
        }
        ring->pop();
    }
    return true;
}

}  // namespace spprof
