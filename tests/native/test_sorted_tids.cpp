// test_sorted_tids.cpp: the sorted copy of a changing tid set (session/sorted_tids.h) stays
// equal to the set through adds, removes, an id removed and added again (or added and
// removed) between two syncs, and many changes with no sync.
#include <cstdint>
#include <set>

#include "harness.h"
#include "session/sorted_tids.h"

using spprof::SortedTids;

namespace {

// The set as the owner keeps it, and the copy told of every change.
struct Owned {
    std::set<uint64_t> truth;
    SortedTids copy;
    void add(uint64_t tid) {
        truth.insert(tid);
        copy.touched(tid);
    }
    void remove(uint64_t tid) {
        truth.erase(tid);
        copy.touched(tid);
    }
    void sync() {
        copy.sync([this](uint64_t tid) { return truth.count(tid) != 0; },
                  [this](auto&& add) {
                      for (uint64_t tid : truth) add(tid);
                  });
    }
    // Every id of the set found, and no id around them that the set lacks.
    bool same() const {
        if (copy.size() != truth.size()) return false;
        for (uint64_t tid = 0; tid < 400; ++tid)
            if (copy.has(tid) != (truth.count(tid) != 0)) return false;
        return true;
    }
};

}  // namespace

TEST(sorted_tids_follows_adds_and_removes_between_syncs) {
    Owned o;
    for (uint64_t tid = 100; tid < 200; tid += 3) o.add(tid);
    o.sync();  // the first sync remakes it whole
    CHECK(o.same());
    o.add(5);    // below every id
    o.add(101);  // between two
    o.add(399);  // above every id
    o.remove(100);
    o.remove(199);
    CHECK(!o.copy.has(5));  // as of the last sync
    o.sync();
    CHECK(o.same());
    CHECK(o.copy.has(5) && o.copy.has(101) && o.copy.has(399) && !o.copy.has(100));
}

TEST(sorted_tids_an_id_removed_and_added_again_or_the_reverse_ends_as_the_set_says) {
    Owned o;
    for (uint64_t tid = 10; tid < 20; ++tid) o.add(tid);
    o.sync();
    o.remove(12);  // a thread ended, its tid went to a new thread before the next pass
    o.add(12);
    o.add(30);  // a thread that started and ended between two passes
    o.remove(30);
    o.remove(15);
    o.sync();
    CHECK(o.same());
    CHECK(o.copy.has(12));
    CHECK(!o.copy.has(30));
    CHECK(!o.copy.has(15));
}

TEST(sorted_tids_many_changes_without_a_sync_stay_bounded_and_exact) {
    Owned o;
    o.sync();
    for (uint64_t round = 0; round < 50; ++round) {
        for (uint64_t tid = 0; tid < 100; ++tid) o.add(tid + round);
        for (uint64_t tid = 0; tid < 90; ++tid) o.remove(tid + round);
    }
    // Past its slack the copy stops collecting and is remade whole at the next sync.
    CHECK(o.copy.memory_bytes() < 64 * 1024);
    o.sync();
    CHECK(o.same());
}
