// test_stack_store.cpp: the sample log's folded rows (a blocked thread's wait held in one row)
// come back out as the samples they hold, with the same count, total weight and span.
#include <cstdint>
#include <vector>

#include "harness.h"
#include "session/stack_store.h"

using spprof::SampleRow;
using spprof::StackStore;

static std::vector<SampleRow> exported(const StackStore& st) {
    std::vector<SampleRow> out(st.sample_count());
    if (!out.empty()) st.copy_samples(out.data());
    return out;
}

TEST(store_folded_row_exports_as_its_samples_over_the_same_span) {
    StackStore st;
    st.add_sample(SampleRow{1000, 1000, 7, 1});          // another thread's row
    st.add_sample(SampleRow{20000000, 10000000, 3, 2});  // the wait's first census: [10 ms, 20 ms]
    st.fold_into(1, 30000000, 10000000, true);                 // ... and three more, 10 ms each
    st.fold_into(1, 40000001, 10000001, true);
    st.fold_into(1, 50000001, 10000000, true);
    st.add_sample(SampleRow{60000000, 1000, 5, 2});      // the thread runs again
    CHECK_EQ(st.row_count(), static_cast<size_t>(3));
    CHECK_EQ(st.folded_samples(), static_cast<size_t>(3));
    CHECK_EQ(st.sample_count(), static_cast<size_t>(6));
    const std::vector<SampleRow> out = exported(st);
    CHECK_EQ(out.size(), static_cast<size_t>(6));
    CHECK_EQ(out[0].timestamp_ns, static_cast<uint64_t>(1000));
    CHECK_EQ(out[0].stack, static_cast<uint32_t>(7));
    uint64_t weight = 0;
    for (size_t i = 1; i <= 4; ++i) {
        CHECK_EQ(out[i].stack, static_cast<uint32_t>(3));
        CHECK_EQ(out[i].thread_and_flags, static_cast<uint32_t>(2));
        CHECK(out[i].timestamp_ns > out[i - 1].timestamp_ns);
        weight += out[i].weight_ns;
    }
    CHECK_EQ(weight, static_cast<uint64_t>(40000001));                      // every nanosecond
    CHECK_EQ(out[4].timestamp_ns, static_cast<uint64_t>(50000001));         // ends where it ended
    CHECK_EQ(out[1].timestamp_ns - out[1].weight_ns, static_cast<uint64_t>(10000000));  // began
    CHECK_EQ(out[5].timestamp_ns, static_cast<uint64_t>(60000000));
    CHECK_EQ(out[5].stack, static_cast<uint32_t>(5));
}

TEST(store_without_folds_exports_its_rows_as_they_are) {
    StackStore st;
    for (uint64_t i = 0; i < 5000; ++i) st.add_sample(SampleRow{i + 1, 1, static_cast<uint32_t>(i % 3), 0});
    CHECK_EQ(st.sample_count(), static_cast<size_t>(5000));
    const std::vector<SampleRow> out = exported(st);
    for (uint64_t i = 0; i < 5000; ++i) CHECK_EQ(out[i].timestamp_ns, i + 1);
}

// Over the memory limit a fold adds its time, not a sample: the export stays within the limit.
TEST(store_uncounted_fold_adds_time_not_samples) {
    StackStore st;
    st.add_sample(SampleRow{20000000, 10000000, 3, 2});
    const size_t before = st.memory_bytes();
    st.fold_into(0, 30000000, 10000000, true);
    CHECK_EQ(st.memory_bytes() > before, true);  // a counted fold is a sample to export
    const size_t counted = st.memory_bytes();
    st.fold_into(0, 40000000, 10000000, false);
    CHECK_EQ(st.memory_bytes(), counted);
    CHECK_EQ(st.sample_count(), static_cast<size_t>(2));
    const std::vector<SampleRow> out = exported(st);
    CHECK_EQ(out[0].weight_ns + out[1].weight_ns, static_cast<uint64_t>(30000000));
    CHECK_EQ(out[1].timestamp_ns, static_cast<uint64_t>(40000000));
}

// A window (profile_export.h) takes the samples stamped in [t0, t1] of the threads it keeps;
// a folded wait that spans the window's start gives it only its samples inside the window.
TEST(store_window_keeps_the_samples_in_its_time_and_threads) {
    StackStore st;
    st.add_sample(SampleRow{5000000, 1000, 1, 1});       // thread 1, before the window
    st.add_sample(SampleRow{20000000, 10000000, 3, 2});  // thread 2 waits: [10 ms, 20 ms] ...
    st.fold_into(1, 30000000, 10000000, true);           // ... [20, 30]
    st.fold_into(1, 40000000, 10000000, true);           // ... [30, 40]
    st.add_sample(SampleRow{35000000, 1000, 1, 1});      // thread 1, inside
    st.add_sample(SampleRow{45000000, 1000, 1, 1});      // thread 1, after
    std::vector<SampleRow> all;
    st.copy_samples_between(25000000, 40000000, [](uint32_t) { return true; }, &all);
    CHECK_EQ(all.size(), static_cast<size_t>(3));  // the wait's samples at 30 and 40 ms, thread 1's at 35
    uint64_t wait_ns = 0;
    for (const SampleRow& r : all) {
        CHECK(r.timestamp_ns >= 25000000 && r.timestamp_ns <= 40000000);
        if (r.stack == 3) wait_ns += r.weight_ns;
    }
    CHECK_EQ(wait_ns, static_cast<uint64_t>(20000000));
    std::vector<SampleRow> one;
    st.copy_samples_between(0, 100000000, [](uint32_t id) { return id == 1; }, &one);
    CHECK_EQ(one.size(), static_cast<size_t>(3));
    for (const SampleRow& r : one) CHECK_EQ(r.thread_and_flags, static_cast<uint32_t>(1));
}
