// test_suspend_io.cpp: the Mach sampler's fault-free line-cached reader, its weight rule, the
// thread census and the statistics counters.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "suspend/cached_reader.h"
#include "suspend/time_convert.h"
#include "suspend/suspend_stats.h"
#include "suspend/thread_census.h"

using namespace spprof;

namespace {

// A fake address space: [base, base + size) readable, everything else unmapped.
struct FakeMemory {
    uintptr_t base = 0x10000;
    std::vector<unsigned char> bytes = std::vector<unsigned char>(6 * kReadLineBytes);
    int calls = 0;
};
FakeMemory* g_mem = nullptr;

struct FakeFetch {
    bool operator()(uintptr_t addr, void* out, size_t n) const {
        ++g_mem->calls;
        if (addr < g_mem->base || addr + n > g_mem->base + g_mem->bytes.size()) return false;
        std::memcpy(out, g_mem->bytes.data() + (addr - g_mem->base), n);
        return true;
    }
};

}  // namespace

TEST(reader_reads_through_line_cache) {
    FakeMemory mem;
    g_mem = &mem;
    for (size_t i = 0; i < mem.bytes.size(); ++i) mem.bytes[i] = static_cast<unsigned char>(i * 7);
    CachedReader<FakeFetch> r;
    uint64_t v = 0;
    CHECK(r.read(mem.base + 16, &v, sizeof v));
    uint64_t want;
    std::memcpy(&want, mem.bytes.data() + 16, sizeof want);
    CHECK_EQ(v, want);
    CHECK_EQ(mem.calls, 1);
    for (int i = 0; i < 100; ++i) CHECK(r.read(mem.base + 8 * i, &v, sizeof v));  // same line
    CHECK_EQ(mem.calls, 1);
    // A read straddling two lines: both fetched, bytes exact.
    unsigned char buf[32];
    CHECK(r.read(mem.base + kReadLineBytes - 8, buf, sizeof buf));
    CHECK(std::memcmp(buf, mem.bytes.data() + kReadLineBytes - 8, sizeof buf) == 0);
    CHECK_EQ(mem.calls, 2);
    CHECK_EQ(r.fetches(), 2ull);
}

TEST(reader_rejects_unmapped_and_null_page) {
    FakeMemory mem;
    g_mem = &mem;
    CachedReader<FakeFetch> r;
    uint64_t v = 0;
    CHECK(!r.read(8, &v, sizeof v));  // null page: no call at all
    CHECK(!r.read(0xEC00, &v, sizeof v));  // a torn link seen in the field: below 64 KiB
    CHECK(!r.read(0xFFFF800000001000ull, &v, sizeof v));  // kernel half: no object there
    CHECK_EQ(mem.calls, 0);
    CHECK(!r.read(mem.base + mem.bytes.size() + 64, &v, sizeof v));
    CHECK(!r.read(UINTPTR_MAX - 3, &v, sizeof v));  // would wrap
    // Last bytes of the mapping then one beyond: the read spanning into unmapped fails.
    CHECK(r.read(mem.base + mem.bytes.size() - 8, &v, sizeof v));
    CHECK(!r.read(mem.base + mem.bytes.size() - 4, &v, sizeof v));
    CHECK(r.read(mem.base, &v, 0));
}

TEST(reader_reset_drops_stale_lines_and_evicts_when_full) {
    FakeMemory mem;
    mem.bytes.resize((kReadCacheLines + 8) * kReadLineBytes);
    g_mem = &mem;
    CachedReader<FakeFetch> r;
    uint32_t v = 0;
    mem.bytes[0] = 1;
    CHECK(r.read(mem.base, &v, 1));
    CHECK_EQ(v, 1u);
    mem.bytes[0] = 2;  // the thread ran between two windows
    CHECK(r.read(mem.base, &v, 1));
    CHECK_EQ(v, 1u);  // same window: cached
    r.reset();
    CHECK(r.read(mem.base, &v, 1));
    CHECK_EQ(v, 2u);  // new window: fresh
    // Touch more lines than the cache holds: every read still returns the right bytes.
    bool ok = true;
    for (size_t line = 0; line < kReadCacheLines + 8; ++line) {
        mem.bytes[line * kReadLineBytes + 5] = static_cast<unsigned char>(line);
    }
    r.reset();
    for (int pass = 0; pass < 3; ++pass) {
        for (size_t line = 0; line < kReadCacheLines + 8; ++line) {
            unsigned char b = 0;
            if (!r.read(mem.base + line * kReadLineBytes + 5, &b, 1) ||
                b != static_cast<unsigned char>(line))
                ok = false;
        }
    }
    CHECK(ok);
    // Large reads bypass the cache.
    std::vector<unsigned char> big(2 * kReadLineBytes + 1);
    const int before = mem.calls;
    CHECK(r.read(mem.base + 3, big.data(), big.size()));
    CHECK_EQ(mem.calls, before + 1);
    CHECK(std::memcmp(big.data(), mem.bytes.data() + 3, big.size()) == 0);
}

TEST(weight_is_elapsed_time_since_previous_sample) {
    CHECK_EQ(sample_weight_ns(1'000, 0, 10), 10ull);           // first sample: nominal
    CHECK_EQ(sample_weight_ns(12'500'000, 1'000'000, 10'000'000), 11'500'000ull);  // overslept
    CHECK_EQ(sample_weight_ns(5, 9, 10), 10ull);               // clock went back: nominal
}

TEST(census_tracks_names_cpu_and_samples) {
    ThreadCensus c;
    const size_t a = c.slot(42);
    const size_t b = c.slot(43);
    CHECK_EQ(c.slot(42), a);
    CHECK(a != b);
    c.set_name(a, "worker-1");
    c.set_name(a, nullptr);  // keeps the old name
    c.observe_cpu(a, 1'000);
    c.observe_cpu(a, 51'000);
    c.add_sample(a);
    c.add_sample(a);
    std::string long_name(200, 'x');
    c.set_name(b, long_name.c_str());
    CensusEntry out[4];
    CHECK_EQ(c.copy(out, 4), static_cast<size_t>(2));
    CHECK_EQ(out[a].thread_id, 42ull);
    CHECK(std::strcmp(out[a].name, "worker-1") == 0);
    CHECK_EQ(out[a].cpu_ns(), 50'000ull);
    CHECK_EQ(out[a].samples, 2ull);
    CHECK_EQ(std::strlen(out[b].name), kThreadNameBytes - 1);  // truncated, terminated
    CHECK_EQ(out[b].cpu_ns(), 0ull);
    c.clear();
    CHECK_EQ(c.size(), static_cast<size_t>(0));
}

TEST(stats_max_total_and_reset) {
    SuspendStats s;
    s.add_suspend_ns(30);
    s.add_suspend_ns(90);
    s.add_suspend_ns(10);
    s.add_captured();
    s.add_dropped();
    s.add_missed_ticks(4);
    s.add_off_cpu_skipped();
    SuspendStatsSnapshot snap = s.snapshot();
    CHECK_EQ(snap.off_cpu_skipped, 1ull);
    CHECK_EQ(snap.max_suspend_ns, 90ull);
    CHECK_EQ(snap.total_suspend_ns, 130ull);
    CHECK_EQ(snap.samples_captured, 1ull);
    CHECK_EQ(snap.samples_dropped, 1ull);
    CHECK_EQ(snap.missed_ticks, 4ull);
    s.reset();
    snap = s.snapshot();
    CHECK_EQ(snap.max_suspend_ns + snap.total_suspend_ns + snap.missed_ticks + snap.off_cpu_skipped, 0ull);
}
