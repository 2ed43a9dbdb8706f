// test_thread_table.cpp: the session's thread table over a long life: slots of ended threads are
// reused only once no reader can hold their ctx, the tid index forgets ended threads (and
// stays short under churn), and a full table refuses instead of overwriting.
#include <cstdint>
#include <memory>

#include "harness.h"
#include "capture/thread_table.h"

using spprof::ThreadCtx;
using spprof::ThreadTable;

namespace {

ThreadCtx* add(ThreadTable& t, uint64_t tid, uint64_t generation) {
    const uint32_t slot = t.take_slot();
    if (slot == ThreadTable::kNoSlot) return nullptr;
    return t.add(std::make_unique<ThreadCtx>(slot, generation, nullptr, tid, tid, nullptr));
}

}  // namespace

TEST(thread_table_ended_slot_is_reused_only_after_the_gate_was_seen_empty) {
    auto t = std::make_unique<ThreadTable>();
    ThreadCtx* a = add(*t, 1001, 1);
    CHECK(a != nullptr);
    const uint32_t slot = a->serial_;
    t->retire(a);
    CHECK(t->by_serial(slot) == nullptr);  // no new lookup finds it
    CHECK(t->by_tid(1001) == nullptr);
    CHECK_EQ(t->quarantined(), 1u);
    CHECK_EQ(t->collect(/*gate_empty=*/false), 0u);  // a capture may hold it
    ThreadCtx* b = add(*t, 1002, 2);
    CHECK(b->serial_ != slot);  // the quarantined slot is not handed out
    CHECK_EQ(t->collect(/*gate_empty=*/true), 1u);
    ThreadCtx* c = add(*t, 1003, 3);
    CHECK_EQ(c->serial_, slot);  // now it is
    CHECK(t->by_serial(slot) == c);
    CHECK(t->by_tid(1003) == c);
    CHECK(t->by_tid(1002) == b);
}

TEST(thread_table_a_session_sees_far_more_threads_than_it_holds_at_once) {
    // 200,000 threads, at most 3 alive at a time, with tids that wrap like the kernel's:
    // every one is found by slot and by tid while alive, none after.
    auto t = std::make_unique<ThreadTable>();
    ThreadCtx* alive[3] = {};
    uint64_t generation = 0;
    for (uint32_t i = 0; i < 200'000; ++i) {
        ThreadCtx*& cell = alive[i % 3];
        if (cell != nullptr) {
            const uint64_t tid = cell->native_tid_;
            t->retire(cell);
            CHECK(t->by_tid(tid) == nullptr);
            if (i % 64 == 0) t->collect(true);
        }
        const uint64_t tid = 300 + (i * 7919u) % 40'000;  // reused tids
        cell = add(*t, tid, ++generation);
        CHECK(cell != nullptr);
        if (cell == nullptr) return;
        CHECK(t->by_tid(tid) == cell);
        CHECK(t->by_serial(cell->serial_) == cell);
    }
    CHECK_EQ(t->live(), 3u);
    CHECK(t->slot_count() <= 3u + 64u);  // slots come back: the table does not grow
}

TEST(thread_table_full_table_refuses_a_new_thread_and_keeps_the_others) {
    auto t = std::make_unique<ThreadTable>();
    for (uint32_t i = 0; i < ThreadTable::kMaxThreads; ++i) CHECK(add(*t, 10 + i, i + 1) != nullptr);
    CHECK_EQ(t->take_slot(), ThreadTable::kNoSlot);
    CHECK(t->by_tid(10) != nullptr);
    CHECK(t->by_tid(10 + ThreadTable::kMaxThreads - 1) != nullptr);
    // one ends and is collected: room for one more
    ThreadCtx* first = t->by_tid(10);
    t->retire(first);
    t->collect(true);
    CHECK(add(*t, 999'999, 0) != nullptr);
    CHECK_EQ(t->take_slot(), ThreadTable::kNoSlot);
}
