// test_port_list.cpp: the owner of a task_threads list (suspend/port_list.h): every right not
// taken is released exactly once, the array once, on every path (kept, reloaded, refused).
#include <cstdint>
#include <vector>

#include "harness.h"
#include "suspend/port_list.h"

using namespace spprof;

namespace {

// A fake kernel: hands out arrays of ports 1..n and counts what comes back.
struct FakeKernel {
    std::vector<uint32_t> released;  // released[port] = times released
    int lists_out = 0;               // arrays handed out and not yet released
    int list_size_mismatch = 0;      // release_list called with a count other than the one given
    uint32_t next_count = 0;
    bool refuse = false;
    std::vector<uint32_t*> arrays;
};

struct FakeOps {
    using Handle = uint32_t;
    FakeKernel* k;
    bool load(Handle** list, uint32_t* count) {
        if (k->refuse) return false;
        auto* a = new uint32_t[k->next_count + 1];
        for (uint32_t i = 0; i < k->next_count; ++i) a[i] = i + 1;
        a[k->next_count] = k->next_count;  // the count it was made with, for release_list
        *list = a;
        *count = k->next_count;
        ++k->lists_out;
        return true;
    }
    void release(Handle h) {
        if (k->released.size() <= h) k->released.resize(h + 1, 0);
        ++k->released[h];
    }
    void release_list(Handle* list, uint32_t count) {
        if (list[count] != count) ++k->list_size_mismatch;
        delete[] list;
        --k->lists_out;
    }
};

uint32_t times_released(const FakeKernel& k, uint32_t port) {
    return port < k.released.size() ? k.released[port] : 0;
}

}  // namespace

TEST(port_list_releases_every_right_and_the_array) {
    FakeKernel k;
    k.next_count = 5;
    {
        PortList<FakeOps> list(FakeOps{&k});
        CHECK(list.load());
        CHECK_EQ(list.size(), 5u);
        CHECK_EQ(list.at(0), 1u);
        CHECK_EQ(k.lists_out, 1);
    }
    CHECK_EQ(k.lists_out, 0);
    CHECK_EQ(k.list_size_mismatch, 0);
    for (uint32_t p = 1; p <= 5; ++p) CHECK_EQ(times_released(k, p), 1u);
}

TEST(port_list_taken_rights_are_the_callers) {
    FakeKernel k;
    k.next_count = 4;
    uint32_t kept = 0;
    {
        PortList<FakeOps> list(FakeOps{&k});
        CHECK(list.load());
        kept = list.take(2);
        CHECK_EQ(list.at(2), 0u);  // the list no longer holds it
    }
    CHECK_EQ(kept, 3u);
    CHECK_EQ(times_released(k, 3), 0u);
    CHECK_EQ(times_released(k, 1), 1u);
    CHECK_EQ(times_released(k, 2), 1u);
    CHECK_EQ(times_released(k, 4), 1u);
    CHECK_EQ(k.lists_out, 0);
}

TEST(port_list_reload_and_refusal_leak_nothing) {
    FakeKernel k;
    k.next_count = 3;
    PortList<FakeOps> list(FakeOps{&k});
    CHECK(list.load());
    k.next_count = 2;
    CHECK(list.load());  // the first list is released before the second is held
    CHECK_EQ(k.lists_out, 1);
    CHECK_EQ(times_released(k, 3), 1u);
    k.refuse = true;
    CHECK(!list.load());  // refused: the held list goes, nothing is held
    CHECK_EQ(list.size(), 0u);
    CHECK_EQ(k.lists_out, 0);
    CHECK_EQ(times_released(k, 1), 2u);
    CHECK_EQ(times_released(k, 2), 2u);
    CHECK_EQ(k.list_size_mismatch, 0);
}

TEST(port_list_empty_list_is_still_released) {
    FakeKernel k;
    k.next_count = 0;
    {
        PortList<FakeOps> list(FakeOps{&k});
        CHECK(list.load());
        CHECK_EQ(list.size(), 0u);
    }
    CHECK_EQ(k.lists_out, 0);
}
