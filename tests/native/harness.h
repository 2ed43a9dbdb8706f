// harness.h: a dependency-free test harness for spprof's native unit tests.
//
// TEST(name) { ... CHECK(cond); CHECK_EQ(a, b); } registers a test; main.cpp runs them all and
// prints "N passed, M failed". Each test file exercises one portable component (ring buffer,
// frame-pointer walk, thread registry, deadline loop...) without Python.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace spprof_test {

// The randomised tests' generator (xorshift64): a fixed seed gives the same run every time.
struct XorShift {
    uint64_t x;
    uint64_t next() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    }
    uint32_t operator()(uint32_t bound) { return static_cast<uint32_t>(next() % bound); }
};

struct TestCase {
    const char* name;
    void (*fn)(bool* failed);
};

inline std::vector<TestCase>& registry() {
    static std::vector<TestCase> tests;
    return tests;
}

struct Registrar {
    Registrar(const char* name, void (*fn)(bool*)) { registry().push_back({name, fn}); }
};

}  // namespace spprof_test

#define TEST(name)                                                              \
    static void test_##name(bool* spprof_failed_);                              \
    static ::spprof_test::Registrar registrar_##name(#name, &test_##name);      \
    static void test_##name(bool* spprof_failed_)

#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            std::fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            *spprof_failed_ = true;                                             \
        }                                                                       \
    } while (0)

#define CHECK_EQ(a, b)                                                          \
    do {                                                                        \
        const auto va_ = (a);                                                   \
        const auto vb_ = (b);                                                   \
        if (!(va_ == vb_)) {                                                    \
            std::fprintf(stderr, "  %s:%d: CHECK_EQ(%s, %s) failed: %lld vs %lld\n", __FILE__, \
                         __LINE__, #a, #b, static_cast<long long>(va_),         \
                         static_cast<long long>(vb_));                          \
            *spprof_failed_ = true;                                             \
        }                                                                       \
    } while (0)
