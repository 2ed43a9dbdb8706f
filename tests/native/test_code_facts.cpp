// test_code_facts.cpp: the capture path's per-thread cache of code-object facts: hits return
// what was put, a colliding code object replaces its slot, and once code objects were freed
// (a new generation) nothing filled before matches any more.
#include <cstdint>

#include "capture/code_facts.h"
#include "harness.h"

using spprof::CodeFacts;
using spprof::CodeFactsCache;

namespace {

CodeFacts facts(uintptr_t code, uint32_t fingerprint, int32_t first_traceable) {
    CodeFacts f;
    f.code = code;
    f.fingerprint = fingerprint;
    f.first_traceable = first_traceable;
    return f;
}

bool hit(const CodeFactsCache& cache, uintptr_t code) { return cache.find(code).code == code; }

}  // namespace

TEST(code_cache_returns_what_was_put) {
    static CodeFactsCache cache;  // 4 KiB: not on the test's stack
    cache.sync();
    CHECK(!hit(cache, 0x7f0000001000));
    cache.put(facts(0x7f0000001000, 42, 7));
    CHECK(hit(cache, 0x7f0000001000));
    CHECK_EQ(cache.find(0x7f0000001000).fingerprint, 42u);
    CHECK_EQ(cache.find(0x7f0000001000).first_traceable, 7);
    CHECK(!hit(cache, 0x7f0000001010));  // a neighbour is not a hit
    cache.sync();  // the next walk, nothing freed: entries stay
    CHECK(hit(cache, 0x7f0000001000));
}

TEST(code_cache_collision_replaces_the_slot) {
    static CodeFactsCache cache;
    cache.sync();
    // Another code address that maps to the same slot (the index mixes bits 4-11 and 12-19).
    const uintptr_t a = 0x7f0000010000;
    uintptr_t b = 0;
    for (uintptr_t cand = a + 16; cand < a + (1u << 20); cand += 16) {
        if ((((cand >> 4) ^ (cand >> 12)) & 255u) == (((a >> 4) ^ (a >> 12)) & 255u)) {
            b = cand;
            break;
        }
    }
    CHECK(b != 0);
    cache.put(facts(a, 1, 0));
    cache.put(facts(b, 2, 0));
    CHECK(!hit(cache, a));
    CHECK(hit(cache, b) && cache.find(b).fingerprint == 2u);
}

TEST(code_cache_forgets_everything_after_code_objects_were_freed) {
    static CodeFactsCache cache;
    cache.sync();
    for (uintptr_t i = 0; i < 100; ++i) cache.put(facts(0x7f0000100000 + i * 512, uint32_t(i), 0));
    CHECK(hit(cache, 0x7f0000100000 + 5 * 512));
    spprof::g_code_generation.fetch_add(1);  // what CodeKeepAlive does before it frees
    CHECK(hit(cache, 0x7f0000100000 + 5 * 512));  // not until the next walk syncs
    cache.sync();
    int hits = 0;
    for (uintptr_t i = 0; i < 100; ++i) hits += hit(cache, 0x7f0000100000 + i * 512);
    CHECK_EQ(hits, 0);
    cache.put(facts(0x7f0000100000, 9, 0));  // filled again under the new generation
    CHECK(hit(cache, 0x7f0000100000));
}
