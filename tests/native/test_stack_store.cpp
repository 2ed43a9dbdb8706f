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
