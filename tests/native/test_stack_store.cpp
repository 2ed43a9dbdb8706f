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
    st.fold_into(1, 30000000, 10000000);                 // ... and three more, 10 ms each
    st.fold_into(1, 40000001, 10000001);
    st.fold_into(1, 50000001, 10000000);
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

// stop()'s export: the rows as held and, for each folded row, the samples it holds.
TEST(store_rows_as_held_and_their_folds) {
    StackStore st;
    st.add_sample(SampleRow{1000, 1000, 7, 1});
    st.add_sample(SampleRow{20000000, 10000000, 3, 2});
    st.add_sample(SampleRow{25000000, 10000000, 4, 3});
    st.fold_into(1, 30000000, 10000000);
    st.fold_into(1, 40000000, 10000000);
    std::vector<SampleRow> rows(st.row_count());
    st.copy_rows(rows.data());
    CHECK_EQ(rows.size(), static_cast<size_t>(3));
    CHECK_EQ(rows[1].timestamp_ns, static_cast<uint64_t>(40000000));  // the whole wait, once
    CHECK_EQ(rows[1].weight_ns, static_cast<uint64_t>(30000000));
    CHECK_EQ(rows[2].weight_ns, static_cast<uint64_t>(10000000));
    const auto folds = st.folds();
    CHECK_EQ(folds.size(), static_cast<size_t>(1));
    CHECK_EQ(folds[0].first, static_cast<size_t>(1));
    CHECK_EQ(folds[0].second, static_cast<uint64_t>(3));
    CHECK_EQ(st.sample_count(), static_cast<size_t>(5));
}

// A fold costs no memory: a wait's first fold makes the row's entry in folded_, every later
// one only counts (at 815e3fa each counted 24 bytes against the limit: 100 blocked threads at
// 100 Hz reached the default 256 MB in 18 minutes, and every wait after that was dropped).
TEST(store_folds_cost_no_memory) {
    StackStore st;
    st.add_sample(SampleRow{20000000, 10000000, 3, 2});
    st.fold_into(0, 30000000, 10000000);
    const size_t first = st.memory_bytes();
    for (uint64_t i = 0; i < 100000; ++i) st.fold_into(0, 40000000 + i * 10000000, 10000000);
    CHECK_EQ(st.memory_bytes(), first);
    CHECK_EQ(st.sample_count(), static_cast<size_t>(100002));
    CHECK_EQ(st.row_count(), static_cast<size_t>(1));
}

// A window (profile_export.h) takes the samples stamped in [t0, t1] of the threads it keeps;
// a folded wait that spans the window's start gives it only its samples inside the window,
// as one row holding them.
TEST(store_window_keeps_the_samples_in_its_time_and_threads) {
    StackStore st;
    st.add_sample(SampleRow{5000000, 1000, 1, 1});       // thread 1, before the window
    st.add_sample(SampleRow{20000000, 10000000, 3, 2});  // thread 2 waits: [10 ms, 20 ms] ...
    st.fold_into(1, 30000000, 10000000);           // ... [20, 30]
    st.fold_into(1, 40000000, 10000000);           // ... [30, 40]
    st.add_sample(SampleRow{35000000, 1000, 1, 1});      // thread 1, inside
    st.add_sample(SampleRow{45000000, 1000, 1, 1});      // thread 1, after
    std::vector<SampleRow> all;
    std::vector<std::pair<size_t, uint64_t>> folds;
    st.copy_samples_between(25000000, 40000000, [](uint32_t) { return true; }, &all, &folds);
    // The wait's samples at 30 and 40 ms as one row [20, 40 ms], thread 1's at 35.
    CHECK_EQ(all.size(), static_cast<size_t>(2));
    CHECK_EQ(folds.size(), static_cast<size_t>(1));
    CHECK_EQ(all[folds[0].first].stack, static_cast<uint32_t>(3));
    CHECK_EQ(folds[0].second, static_cast<uint64_t>(2));
    CHECK_EQ(all[folds[0].first].timestamp_ns, static_cast<uint64_t>(40000000));
    CHECK_EQ(all[folds[0].first].weight_ns, static_cast<uint64_t>(20000000));
    for (const SampleRow& r : all) CHECK(r.timestamp_ns >= 25000000 && r.timestamp_ns <= 40000000);
    std::vector<SampleRow> one;
    folds.clear();
    st.copy_samples_between(0, 100000000, [](uint32_t id) { return id == 1; }, &one, &folds);
    CHECK_EQ(one.size(), static_cast<size_t>(3));
    CHECK_EQ(folds.size(), static_cast<size_t>(0));
    for (const SampleRow& r : one) CHECK_EQ(r.thread_and_flags, static_cast<uint32_t>(1));
}

// Windows read from the time marks on, not the whole log: with 10,000 rows marked as a drain
// marks them, a window near the end gets exactly the brute-force answer, including a wait
// folded into a row from the start (its time moved into the window), and the marks skip the
// old rows.
TEST(store_window_from_time_marks_matches_a_full_scan) {
    StackStore st;
    const uint64_t ms = 1000000;
    st.add_sample(SampleRow{1 * ms, 1 * ms, 9, 3});  // thread 3 starts waiting at 1 ms ...
    st.add_sample(SampleRow{1 * ms, 1 * ms, 8, 4});  // thread 4 too
    uint64_t now = 2 * ms;
    for (uint32_t i = 0; i < 10000; ++i) {
        if (i % 100 == 0) st.mark_time(now);  // a drain pass every 100 rows
        now += ms;
        st.add_sample(SampleRow{now, ms, i % 5, 1});
    }
    CHECK(st.mark_count() >= 9);
    st.fold_into(0, now, now - 1 * ms);    // thread 3's wait ends now: [1 ms, now]
    st.fold_into(1, now, now - 1 * ms);   // thread 4's: [0, now], cut in two
    const uint64_t t0 = now - 200 * ms, t1 = now;
    CHECK(st.first_row_for(t0) > 8500);  // the old rows are not read (a mark per 1024+ rows)
    CHECK(st.first_row_for(t0) <= 10002 - 250);  // ... and none the window needs is skipped
    std::vector<SampleRow> got;
    std::vector<std::pair<size_t, uint64_t>> folds;
    st.copy_samples_between(t0, t1, [](uint32_t) { return true; }, &got, &folds);
    CHECK_EQ(folds.size(), static_cast<size_t>(0));  // one sample of each wait is inside
    std::vector<SampleRow> all = exported(st), want;
    for (const SampleRow& r : all)
        if (r.timestamp_ns >= t0 && r.timestamp_ns <= t1) want.push_back(r);
    CHECK_EQ(got.size(), want.size());
    size_t waits = 0;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
        CHECK_EQ(got[i].timestamp_ns, want[i].timestamp_ns);
        CHECK_EQ(got[i].stack, want[i].stack);
        CHECK_EQ(got[i].weight_ns, want[i].weight_ns);
        waits += got[i].stack == 9 || got[i].stack == 8;
    }
    CHECK_EQ(waits, static_cast<size_t>(2));  // threads 3's and 4's last pieces
    // A window before the first mark reads from the start.
    CHECK_EQ(st.first_row_for(3 * ms), static_cast<size_t>(0));
}

// A wait folded 5,000 times (a thread blocked for minutes in wall mode) is cut only where a
// window needs it: every window, at the start, the middle, the end and past both ends, gets
// one row holding exactly the pieces a full export has in it (their count, their weight,
// the last one's time), uneven weights included.
TEST(store_window_cuts_a_long_folded_wait_only_where_it_needs_to) {
    StackStore st;
    const uint64_t ms = 1000000;
    st.add_sample(SampleRow{10 * ms, 7 * ms, 9, 3});
    uint64_t now = 10 * ms;
    for (int i = 0; i < 5000; ++i) {
        now += 3 * ms + static_cast<uint64_t>(i % 7);  // weights that do not divide evenly
        st.fold_into(0, now, 3 * ms + static_cast<uint64_t>(i % 7));
    }
    const std::vector<SampleRow> all = exported(st);
    CHECK_EQ(all.size(), static_cast<size_t>(5001));
    const uint64_t windows[][2] = {{0, 20 * ms},           {3 * ms, 12 * ms},   {7000 * ms, 7010 * ms},
                                   {now - 5 * ms, now},    {now, now + ms},     {now + ms, now + 9 * ms},
                                   {0, now},               {7001 * ms, 7001 * ms}};
    for (const auto& w : windows) {
        std::vector<SampleRow> got, want;
        std::vector<std::pair<size_t, uint64_t>> folds;
        st.copy_samples_between(w[0], w[1], [](uint32_t) { return true; }, &got, &folds);
        uint64_t want_ns = 0;
        for (const SampleRow& r : all)
            if (r.timestamp_ns >= w[0] && r.timestamp_ns <= w[1]) {
                want.push_back(r);
                want_ns += r.weight_ns;
            }
        CHECK_EQ(got.size(), static_cast<size_t>(want.empty() ? 0 : 1));
        if (got.empty() || want.empty()) continue;
        CHECK_EQ(folds.size(), static_cast<size_t>(want.size() > 1 ? 1 : 0));
        if (!folds.empty()) CHECK_EQ(folds[0].second, static_cast<uint64_t>(want.size()));
        CHECK_EQ(got[0].timestamp_ns, want.back().timestamp_ns);
        CHECK_EQ(got[0].weight_ns, want_ns);
    }
}

TEST(store_the_same_frames_at_other_addresses_are_another_stack) {
    // Native mode: one stack per (frames, addresses), so pprof's locations keep each address
    // while every other output merges the stacks' equal frames.
    StackStore st;
    const uint32_t frames[3] = {7, 8, 9};
    const uint64_t at_a[3] = {0, 0x1000, 0x2004};
    const uint64_t at_b[3] = {0, 0x1000, 0x2010};
    const uint32_t plain = st.intern(frames, 3);
    CHECK(st.pcs(plain) == nullptr);  // no addresses made yet: none kept
    const uint32_t a = st.intern(frames, 3, at_a);
    const uint32_t b = st.intern(frames, 3, at_b);
    CHECK(a != plain);
    CHECK(b != a);
    CHECK_EQ(st.intern(frames, 3, at_a), a);
    CHECK_EQ(st.intern(frames, 3), plain);
    const uint64_t zeros[3] = {0, 0, 0};
    CHECK_EQ(st.intern(frames, 3, zeros), plain);  // no address at all: the plain stack
    CHECK_EQ(st.stack_count(), static_cast<size_t>(3));
    for (uint32_t k = 0; k < 3; ++k) {
        CHECK_EQ(st.pool()[st.begin(b) + k], frames[k]);
        CHECK_EQ(st.pcs(b)[k], at_b[k]);
        CHECK_EQ(st.pcs(a)[k], at_a[k]);
        CHECK_EQ(st.pcs(plain)[k], static_cast<uint64_t>(0));
    }
    // A stack interned after addresses began, without any, has zeros beside it.
    const uint32_t other[2] = {7, 10};
    const uint32_t c = st.intern(other, 2);
    CHECK_EQ(st.pcs(c)[0], static_cast<uint64_t>(0));
    CHECK_EQ(st.pcs(c)[1], static_cast<uint64_t>(0));
    CHECK_EQ(st.intern(other, 2), c);
}

TEST(store_the_first_stack_keeps_its_addresses) {
    // The first stack of a session is the one that starts the address pool.
    StackStore st;
    const uint32_t frames[2] = {3, 4};
    const uint64_t at[2] = {0, 0x4000};
    const uint32_t id = st.intern(frames, 2, at);
    CHECK(st.pcs(id) != nullptr);
    CHECK_EQ(st.pcs(id)[1], static_cast<uint64_t>(0x4000));
    CHECK_EQ(st.intern(frames, 2, at), id);
    CHECK(st.intern(frames, 2) != id);
}
