// test_unwind_live.cpp: the real path. A signal raised from the bottom of a chain of functions
// compiled WITHOUT frame pointers (and one of them zeroing rbp, so a frame-pointer walk cannot
// work) is unwound from the handler's ucontext with the process's UnwindTables; the pcs must
// fall in the callers, in order, through libc (pthread_kill / raise, and qsort). Also the
// symbolizer (a static C++ function only in .symtab, a libc export) and the eval-loop ranges
// of a libpython loaded with dlopen (skipped when none is installed).
//
// Every function of this file is compiled without frame pointers, even in the sanitizer build
// (which passes -fno-omit-frame-pointer).
#pragma GCC optimize("omit-frame-pointer")

#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <memory>
#include <thread>

#include "harness.h"
#include "platform/platform.h"
#include "unwind/eval_ranges.h"
#include "unwind/split_parts.h"
#include "unwind/step_cache.h"
#include "unwind/symbolizer.h"
#include "unwind/ucontext_regs.h"
#include "unwind/unwind_tables.h"
#include "unwind/unwinder.h"

namespace {
// The calling thread's stack, as the session reads it when a thread registers.
bool own_stack_bounds(uintptr_t* lo, uintptr_t* hi) {
    return spprof::platform_thread_stack_bounds(static_cast<unsigned long>(pthread_self()), lo, hi);
}
}  // namespace

using namespace spprof;

namespace {

constexpr uint32_t kMaxPcs = 128;

// What the handler fills; read by the test after raise() returns. Plain globals: the handler
// runs synchronously on this thread inside pthread_kill.
UnwindTables* g_tables = nullptr;
uintptr_t g_lo = 0, g_hi = 0;
uint64_t g_pcs[kMaxPcs];
UnwindStatus g_status;
uint32_t g_depth = 0;
bool g_regs_ok = false;

void on_signal(int, siginfo_t*, void* uc) {
    RegisterContext regs;
    g_regs_ok = register_context_from_ucontext(uc, &regs);
    g_depth = unwind_native(g_tables->current(), regs, g_lo, g_hi, g_pcs, kMaxPcs, &g_status);
}

struct ScopedHandler {
    struct sigaction old {};
    explicit ScopedHandler(void (*handler)(int, siginfo_t*, void*) = &on_signal) {
        struct sigaction sa {};
        sa.sa_sigaction = handler;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR2, &sa, &old);
    }
    ~ScopedHandler() { sigaction(SIGUSR2, &old, nullptr); }
};

void capture_here() { pthread_kill(pthread_self(), SIGUSR2); }

}  // namespace

// The chain: extern "C" so the symbol names are plain; not static, but the test binary exports
// no dynamic symbols, so only .symtab names them (the symbolizer's ELF path).
extern "C" {
__attribute__((noinline)) int spprof_chain_c(int x) {
    capture_here();
    asm volatile("" ::: "memory");
    return x + 1;
}

__attribute__((noinline)) int spprof_chain_b(int x) {
#if defined(__x86_64__)
    // rbp is callee-saved: the compiler saves it (and says so in the CFI); inside, it is 0,
    // so the frames below cannot be walked with frame pointers, only with CFI.
    asm volatile("xor %%ebp, %%ebp" ::: "rbp");
#endif
    int r = spprof_chain_c(x * 3);
    asm volatile("" : "+r"(r));
    return r + 2;
}

__attribute__((noinline)) int spprof_chain_a(int x) {
    int r = spprof_chain_b(x + 5);
    asm volatile("" : "+r"(r));
    return r * 2;
}

std::atomic<int> g_compare_captures{0};

__attribute__((noinline)) int spprof_compare(const void* a, const void* b) {
    if (g_compare_captures.fetch_add(1) == 0) capture_here();
    const int x = *static_cast<const int*>(a), y = *static_cast<const int*>(b);
    return (x > y) - (x < y);
}

__attribute__((noinline)) int spprof_qsort_caller(int* v, int n) {
    qsort(v, static_cast<size_t>(n), sizeof(int), &spprof_compare);
    int r = v[0];
    asm volatile("" : "+r"(r));
    return r;
}
}

namespace spprof_cpp_test {
// A static C++ function: named only by .symtab, mangled there.
__attribute__((noinline)) static int demangle_me(int a, double b) {
    int r = a + static_cast<int>(b);
    asm volatile("" : "+r"(r));
    return r;
}
int (*const g_demangle_me)(int, double) = &demangle_me;
}  // namespace spprof_cpp_test

namespace {

// Index of the first pc at or after `from` whose function (looked up at pc - 1 for return
// addresses) is `name`, or -1.
int find_frame(Symbolizer& sym, uint32_t from, const char* name) {
    for (uint32_t i = from; i < g_depth; ++i) {
        NativeSymbol s;
        sym.symbolize(i == 0 ? g_pcs[i] : g_pcs[i] - 1, &s);
        // Exact, or a C++ function whose demangled name continues with its parameters.
        const size_t n = std::strlen(name);
        if (s.function.compare(0, n, name) == 0 && (s.function.size() == n || s.function[n] == '('))
            return static_cast<int>(i);
    }
    return -1;
}

void dump_frames(Symbolizer& sym) {
    for (uint32_t i = 0; i < g_depth; ++i) {
        NativeSymbol s;
        sym.symbolize(i == 0 ? g_pcs[i] : g_pcs[i] - 1, &s);
        std::fprintf(stderr, "    #%u %#llx %s (%s+%#llx)\n", i, static_cast<unsigned long long>(g_pcs[i]),
                     s.function.c_str(), s.library.c_str(), static_cast<unsigned long long>(s.offset));
    }
    std::fprintf(stderr, "    stop=%s cfi=%u fp=%u\n", unwind_stop_name(g_status.stop), g_status.cfi_steps,
                 g_status.fp_steps);
}

}  // namespace

TEST(unwind_live_stack_bounds) {
    uintptr_t lo = 0, hi = 0;
    CHECK(own_stack_bounds(&lo, &hi));
    int local = 0;
    const uintptr_t a = reinterpret_cast<uintptr_t>(&local);
    // ASan may move locals to a fake stack; the frame address is on the real one.
    const uintptr_t f = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    CHECK((a >= lo && a < hi) || (f >= lo && f < hi));
    CHECK(hi - lo >= 64 * 1024);
}

TEST(unwind_live_chain_without_frame_pointers) {
    UnwindTables tables;
    CHECK(tables.refresh().ok());
    CHECK(tables.current() != nullptr);
    CHECK(tables.current()->modules.size() >= 2);  // the test binary and libc at least
    g_tables = &tables;
    CHECK(own_stack_bounds(&g_lo, &g_hi));
    g_depth = 0;
    {
        ScopedHandler h;
        CHECK_EQ(spprof_chain_a(1), ((1 + 5) * 3 + 1 + 2) * 2);
    }
    CHECK(g_regs_ok);
    Symbolizer sym;
    const int c = find_frame(sym, 0, "spprof_chain_c");
    const int b = find_frame(sym, 0, "spprof_chain_b");
    const int a = find_frame(sym, 0, "spprof_chain_a");
    const int t = find_frame(sym, 0, "test_unwind_live_chain_without_frame_pointers");
    const int m = find_frame(sym, 0, "main");
    CHECK(c > 0);  // pcs[0] is in libc (pthread_kill); capture_here may be inlined
    CHECK_EQ(b, c + 1);
    CHECK_EQ(a, b + 1);
    CHECK(t > a);
    CHECK(m > t);
    CHECK(g_status.stop == UnwindStop::kBottom);  // through main and libc's start code to _start
    CHECK_EQ(g_status.fp_steps, 0);
    CHECK(g_status.cfi_steps >= 5);
    NativeSymbol s0;
    sym.symbolize(g_pcs[0], &s0);
    CHECK(s0.library.find("libc") != std::string::npos);
    if (c <= 0 || b != c + 1 || a != b + 1 || g_status.stop != UnwindStop::kBottom) dump_frames(sym);
    g_tables = nullptr;
}

TEST(unwind_live_through_qsort) {
    UnwindTables tables;
    CHECK(tables.refresh().ok());
    g_tables = &tables;
    CHECK(own_stack_bounds(&g_lo, &g_hi));
    g_depth = 0;
    g_compare_captures = 0;
    int v[64];
    for (int i = 0; i < 64; ++i) v[i] = (i * 37) % 64;
    {
        ScopedHandler h;
        CHECK_EQ(spprof_qsort_caller(v, 64), 0);
    }
    Symbolizer sym;
    const int cmp = find_frame(sym, 0, "spprof_compare");
    const int caller = find_frame(sym, 0, "spprof_qsort_caller");
    CHECK(cmp > 0);
    CHECK(caller > cmp + 1);  // libc's qsort frames in between
    // Every frame between the comparator and its caller is libc's (in the sanitizer build,
    // libasan's qsort interceptor, which sorts by itself: libc is then not on the stack).
    bool libc_seen = false;
    for (int i = cmp + 1; i < caller && cmp > 0; ++i) {
        NativeSymbol s;
        sym.symbolize(g_pcs[i] - 1, &s);
        const bool in_libc = s.library.find("libc.so") != std::string::npos;
        libc_seen = libc_seen || in_libc;
        CHECK(in_libc || s.library.find("libasan") != std::string::npos);
    }
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(libc_seen);
#endif
    CHECK(g_status.stop == UnwindStop::kBottom);
    if (cmp <= 0 || caller <= cmp + 1) dump_frames(sym);
    g_tables = nullptr;
}

// The step cache (unwind/step_cache.h): a walk through rows an earlier walk kept gives the
// pcs and stop of the full CFI steps, frame for frame. Three walks of one signal: without a
// cache, with an empty one (filling it), with the filled one.
namespace {
const UnwindSnapshot* g_plain = nullptr;  // the current snapshot without its cache
uint64_t g_pcs_plain[kMaxPcs], g_pcs_kept[kMaxPcs];
UnwindStatus g_status_plain, g_status_kept;
uint32_t g_depth_plain = 0, g_depth_kept = 0;

void on_signal_three_walks(int, siginfo_t*, void* uc) {
    RegisterContext regs;
    g_regs_ok = register_context_from_ucontext(uc, &regs);
    g_depth_plain = unwind_native(g_plain, regs, g_lo, g_hi, g_pcs_plain, kMaxPcs, &g_status_plain);
    g_depth = unwind_native(g_tables->current(), regs, g_lo, g_hi, g_pcs, kMaxPcs, &g_status);
    g_depth_kept = unwind_native(g_tables->current(), regs, g_lo, g_hi, g_pcs_kept, kMaxPcs, &g_status_kept);
}
}  // namespace

TEST(unwind_live_step_cache_walks_as_the_full_steps) {
    UnwindTables tables;
    CHECK(tables.refresh().ok());
    CHECK(tables.current()->step_cache != nullptr);
    CHECK(tables.step_cache_bytes() > 0);
    UnwindSnapshot plain = *tables.current();
    plain.step_cache = nullptr;
    g_plain = &plain;
    g_tables = &tables;
    CHECK(own_stack_bounds(&g_lo, &g_hi));
    int v[64];
    for (int i = 0; i < 64; ++i) v[i] = (i * 37) % 64;
    {
        ScopedHandler h(&on_signal_three_walks);
        g_compare_captures = 0;
        CHECK_EQ(spprof_qsort_caller(v, 64), 0);  // through libc's qsort
    }
    CHECK(g_regs_ok);
    CHECK(g_status_plain.stop == UnwindStop::kBottom);
    CHECK(g_depth_plain > 5);
    CHECK_EQ(g_depth, g_depth_plain);
    CHECK_EQ(g_depth_kept, g_depth_plain);
    CHECK(g_status.stop == g_status_plain.stop && g_status_kept.stop == g_status_plain.stop);
    for (uint32_t i = 0; i < g_depth_plain && i < g_depth && i < g_depth_kept; ++i) {
        CHECK_EQ(g_pcs[i], g_pcs_plain[i]);
        CHECK_EQ(g_pcs_kept[i], g_pcs_plain[i]);
    }
    CHECK_EQ(g_status_plain.cached_steps, 0);
    CHECK_EQ(g_status_plain.cfi_steps, g_status.cfi_steps);
    CHECK_EQ(g_status_plain.cfi_steps, g_status_kept.cfi_steps);
    // The third walk took the rows the second one kept: all but rows of another shape
    // (expressions: PLT stubs), and the second one found none kept before it... unless the
    // same pc came twice in one walk (qsort's recursion), whose second step was kept.
    CHECK(g_status_kept.cached_steps + 3 >= g_status_kept.cfi_steps);
    CHECK(g_status_kept.cached_steps > g_status.cached_steps);
    g_tables = nullptr;
    g_plain = nullptr;
}

// Concurrent captures share the cache: writers racing on the same slots never let a reader
// see a mix of two entries. Each writer keeps steps whose every field is derived from the pc;
// readers check that whatever they get matches its pc.
TEST(unwind_step_cache_entries_are_never_torn) {
    std::unique_ptr<StepCache> cache = StepCache::create();
    CHECK(cache != nullptr);
    auto step_for = [](uint64_t pc) {
        CachedStep s;
        s.cfa_offset = static_cast<int32_t>(pc & 0xFFFF);
        s.cfa_col = static_cast<uint8_t>(pc % 17);
        s.ra_col = 16;
        s.saves = static_cast<uint8_t>(pc % (kMaxCachedSaves + 1));
        for (uint32_t i = 0; i < kMaxCachedSaves; ++i) {
            s.col[i] = static_cast<uint8_t>((pc >> i) & 0x1F);
            s.offset[i] = static_cast<int16_t>(-8 * static_cast<int>(i + (pc & 7)));
        }
        return s;
    };
    auto same = [](const CachedStep& a, const CachedStep& b) { return std::memcmp(&a, &b, sizeof a) == 0; };
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> torn{0}, hits{0};
    // Pcs that collide: the same slot for many of them keeps writers and readers racing.
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
        threads.emplace_back([&, w] {
            uint64_t x = 0x1000 + static_cast<uint64_t>(w);
            while (!stop.load(std::memory_order_relaxed)) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                const uint64_t pc = 0x400000 + (x >> 52);  // 4,096 pcs over 4,096 slots
                cache->insert(pc, 7, step_for(pc));
            }
        });
    }
    for (int r = 0; r < 2; ++r) {
        threads.emplace_back([&] {
            for (uint64_t i = 0; i < 2000000; ++i) {
                const uint64_t pc = 0x400000 + (i * 2654435761u) % 4096;
                CachedStep got;
                if (!cache->lookup(pc, 7, &got)) continue;
                hits.fetch_add(1, std::memory_order_relaxed);
                if (!same(got, step_for(pc))) torn.fetch_add(1, std::memory_order_relaxed);
            }
        });
    }
    for (size_t i = 2; i < threads.size(); ++i) threads[i].join();
    stop = true;
    threads[0].join();
    threads[1].join();
    CHECK(hits.load() > 1000);
    CHECK_EQ(torn.load(), uint64_t{0});
    // Another generation's entries are not this one's.
    CachedStep got;
    cache->insert(0x1234, 7, step_for(0x1234));
    CHECK(cache->lookup(0x1234, 7, &got));
    CHECK(!cache->lookup(0x1234, 8, &got));
    CHECK(!cache->lookup(0x1235, 7, &got));
}

TEST(unwind_live_refresh_is_cheap_and_sees_dlopen) {
    UnwindTables tables;
    CHECK(tables.refresh().ok());
    const UnwindSnapshot* first = tables.current();
    const uint32_t gen = tables.generation();
    CHECK(tables.refresh().ok());
    CHECK(tables.current() == first);  // nothing loaded: same snapshot
    CHECK_EQ(tables.generation(), gen);
    void* h = dlopen("libresolv.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
        std::fprintf(stderr, "  (libresolv.so.2 not loadable: dlopen part skipped)\n");
        return;
    }
    void* fn = dlsym(h, "__b64_ntop");  // only in libresolv (res_query moved to libc in 2.34)
    CHECK(tables.refresh().ok());
    CHECK(tables.current() != first);
    CHECK_EQ(tables.generation(), gen + 1);
    if (fn != nullptr) {
        const UnwindModule* mod = tables.current()->find(reinterpret_cast<uintptr_t>(fn));
        CHECK(mod != nullptr);
        CHECK(mod != nullptr && mod->eh.table != nullptr);
        Fde f;
        CHECK(mod != nullptr &&
              find_fde(mod->eh, mod->cfi_range, reinterpret_cast<uintptr_t>(fn), &f) == CfiResult::kOk);
        CHECK(first->find(reinterpret_cast<uintptr_t>(fn)) == nullptr);  // the old snapshot is intact
    }
    CHECK_EQ(tables.modules_dropped(), uint64_t{0});
    // The library stays loaded: the retired snapshot must not describe unmapped memory while
    // `tables` lives (docs/native-unwinding.md, "Unloading").
}

TEST(unwind_symbolizer_names) {
    Symbolizer sym;
    NativeSymbol s;
    const uint64_t fn = reinterpret_cast<uintptr_t>(spprof_cpp_test::g_demangle_me);
    CHECK(sym.symbolize(fn + 1, &s));
    CHECK(s.function == "spprof_cpp_test::demangle_me(int, double)");
    CHECK_EQ(s.offset, uint64_t{1});
    CHECK(!s.library.empty());
    // A libc export, through dladdr. Asked of libc itself: under ASan the default lookup
    // finds libasan's interceptor.
    void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(libc != nullptr);
    void* q = libc ? dlsym(libc, "qsort") : nullptr;
    CHECK(q != nullptr);
    CHECK(sym.symbolize(reinterpret_cast<uintptr_t>(q) + 2, &s));
    CHECK(s.function == "qsort");
    CHECK(s.library.find("libc.so") != std::string::npos);
    CHECK_EQ(s.offset, uint64_t{2});
    // Cached: same answer.
    NativeSymbol again;
    CHECK(sym.symbolize(reinterpret_cast<uintptr_t>(q) + 2, &again));
    CHECK(again.function == s.function);
    if (libc != nullptr) dlclose(libc);  // drops only the NOLOAD reference
    // No module.
    CHECK(!sym.symbolize(0x10, &s));
    CHECK(s.library.empty());
    CHECK_EQ(s.offset, uint64_t{0x10});
    CHECK(demangle_symbol("_ZN3foo3barEv") == "foo::bar()");
    CHECK(demangle_symbol("plain") == "plain");
    CHECK(demangle_symbol("_Zbroken") == "_Zbroken");
    // find_function_ranges over the test binary's own function.
    EvalRanges r;
    CHECK(find_function_ranges(sym, reinterpret_cast<void*>(&spprof_chain_b), "spprof_chain_b", &r).ok());
    CHECK_EQ(r.count, 1u);
    CHECK(is_eval_frame(r, reinterpret_cast<uintptr_t>(&spprof_chain_b)));
    CHECK(!is_eval_frame(r, r.hi[0]));
    CHECK(!is_eval_frame(r, reinterpret_cast<uintptr_t>(&spprof_chain_a)) ||
          reinterpret_cast<uintptr_t>(&spprof_chain_a) == reinterpret_cast<uintptr_t>(&spprof_chain_b));
}

// The drain's way (session/symbol_reads.h): ask which file a pc's name needs, read it apart
// from the Symbolizer (another thread, no GIL), install it; symbolize then reads nothing.
TEST(unwind_symbolizer_tables_read_elsewhere) {
    Symbolizer sym;
    const uint64_t fn = reinterpret_cast<uintptr_t>(spprof_cpp_test::g_demangle_me);
    ModuleTables want;
    CHECK(sym.needs_file_read(fn + 1, &want));
    CHECK(want.want_symbols && !want.want_starts);
    CHECK(!want.path.empty());
    ModuleTables got = want;
    read_module_tables(&got);  // what the drain thread does without the GIL
    CHECK(got.has_symbols && !got.symbols.syms.empty());
    sym.install(std::move(got));
    CHECK(!sym.needs_file_read(fn + 1, &want));  // the name is a binary search away now
    NativeSymbol s;
    CHECK(sym.symbolize(fn + 1, &s));
    CHECK(s.function == "spprof_cpp_test::demangle_me(int, double)");
    CHECK_EQ(sym.inline_reads(), uint64_t{0});
    // Without the drain's help, symbolize reads the file itself, and says so.
    Symbolizer alone;
    CHECK(alone.symbolize(fn + 1, &s));
    CHECK_EQ(alone.inline_reads(), uint64_t{1});
    CHECK(!alone.needs_file_read(fn + 1, &want));  // resolved and cached
    CHECK(!alone.needs_file_read(0x10, &want));     // in no module: nothing to read
    // A file that cannot be read installs as no table: its symbols are not asked for again;
    // the pc's function is then found by the unwind table's starts, the second file read.
    Symbolizer broken;
    CHECK(broken.needs_file_read(fn + 1, &want));
    ModuleTables none = want;
    none.path = "/nonexistent/spprof-test";
    read_module_tables(&none);
    CHECK(!none.has_symbols);
    none.path = want.path;
    broken.install(std::move(none));
    CHECK(broken.needs_file_read(fn + 1, &want));
    CHECK(!want.want_symbols && want.want_starts);
    ModuleTables starts = want;
    read_module_tables(&starts);
    CHECK(starts.has_starts && !starts.starts.empty());
    broken.install(std::move(starts));
    CHECK(!broken.needs_file_read(fn + 1, &want));
    broken.symbolize(fn + 1, &s);  // dladdr may name it (an export); else its function's start
    CHECK(s.has_symbol || s.has_start);
    CHECK_EQ(broken.inline_reads(), uint64_t{0});
}

// The eval loop of a real libpython: 3.11 and 3.12 release builds have a .cold part.
TEST(unwind_eval_ranges_libpython) {
    std::string path;
    if (const char* env = std::getenv("SPPROF_TEST_LIBPYTHON")) path = env;
    if (path.empty()) {
        const char* home = std::getenv("HOME");
        const std::string pattern =
            std::string(home ? home : "/root") + "/.pyenv/versions/3.1[12].*/lib/libpython3.1[12].so.1.0";
        glob_t g;
        if (glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) path = g.gl_pathv[0];
        globfree(&g);
    }
    void* h = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_LAZY | RTLD_GLOBAL);
    if (h == nullptr) {
        std::fprintf(stderr, "  (no libpython3.11/3.12 to dlopen: skipped; set SPPROF_TEST_LIBPYTHON)\n");
        return;
    }
    // Debian's libpython is stripped of .symtab, where the local .cold symbol lives: there only
    // the exported main part can be found (make test-arm64 sets this for its sysroot's library).
    const bool stripped = std::getenv("SPPROF_TEST_LIBPYTHON_STRIPPED") != nullptr;
    Symbolizer sym;
    EvalRanges r;
    const Error err = find_eval_ranges(sym, nullptr, &r);
    CHECK(err.ok());
    CHECK(r.count >= 2 || stripped);  // the function and its .cold part
    void* main_part = dlsym(h, "_PyEval_EvalFrameDefault");
    CHECK(is_eval_frame(r, reinterpret_cast<uintptr_t>(main_part)));
    bool main_found = false, cold_found = false;
    for (uint32_t i = 0; i < r.count; ++i) {
        NativeSymbol s;
        CHECK(sym.symbolize(r.lo[i], &s));
        main_found = main_found || s.function == "_PyEval_EvalFrameDefault";
        cold_found = cold_found || s.function.rfind("_PyEval_EvalFrameDefault.cold", 0) == 0 ||
                     r.lo[i] != reinterpret_cast<uintptr_t>(main_part);
        CHECK(r.hi[i] > r.lo[i]);
        CHECK(!is_eval_frame(r, r.lo[i] - 1) || r.count > 1);
    }
    CHECK(main_found);
    CHECK(cold_found || stripped);
    // The tables unwind it: an FDE covers the eval loop.
    UnwindTables tables;
    CHECK(tables.refresh().ok());
    const UnwindModule* mod = tables.current()->find(reinterpret_cast<uintptr_t>(main_part));
    CHECK(mod != nullptr);
    Fde f;
    CHECK(mod != nullptr &&
          find_fde(mod->eh, mod->cfi_range, reinterpret_cast<uintptr_t>(main_part) + 64, &f) == CfiResult::kOk);

    // libpython stays loaded for the rest of the run (dlclose of libpython is not supported).
}

// A function that gcc splits: the unlikely branch goes to spprof_split_me.cold (-O2 turns on
// -freorder-blocks-and-partition; the test binary is built at -O1).
__attribute__((cold, noinline)) int spprof_split_rare(int x) { return x * 3 + 1; }
extern "C" __attribute__((noinline, optimize("O2", "reorder-blocks-and-partition"))) int spprof_split_me(
    int n, int (*cb)(int)) {
    int s = 0;
    for (int i = 0; i < n; ++i) {
        if (__builtin_expect(i == 12345, 0)) s += spprof_split_rare(i) + cb(i);
        s += i;
    }
    return s;
}

// Without the symbol table (a stripped image), a function's .cold part is found again from
// the main part's jumps and the unwind data: the range .symtab names, nothing else.
TEST(split_parts_found_without_symbols) {
    CHECK_EQ(spprof_split_me(3, nullptr), 3);
    Symbolizer sym;
    std::vector<FunctionRange> named;
    const uintptr_t main_part = reinterpret_cast<uintptr_t>(&spprof_split_me);
    CHECK(sym.find_functions(main_part, "spprof_split_me", &named).ok());
    EvalRanges r;
    const FunctionRange* cold = nullptr;
    for (const FunctionRange& fr : named) {
        if (fr.lo == main_part) {
            r.lo[0] = fr.lo;
            r.hi[0] = fr.hi;
            r.count = 1;
        }
        if (fr.name == "spprof_split_me.cold") cold = &fr;
    }
    CHECK_EQ(r.count, 1u);
    CHECK(cold != nullptr);
    UnwindTables tables;
    CHECK(tables.refresh().ok());
    CHECK_EQ(find_split_parts(*tables.current(), r.lo[0], r.hi[0], &r), 1u);
    CHECK_EQ(r.count, 2u);
    CHECK(cold != nullptr && r.lo[1] == cold->lo && r.hi[1] == cold->hi);
    // A function without a split part gains nothing: its calls and tail jumps lead to
    // functions, whose unwind data starts like a function's.
    EvalRanges plain;
    plain.lo[0] = reinterpret_cast<uintptr_t>(&spprof_chain_b);
    std::vector<FunctionRange> b;
    CHECK(sym.find_functions(plain.lo[0], "spprof_chain_b", &b).ok() && !b.empty());
    plain.hi[0] = b.empty() ? plain.lo[0] + 1 : b[0].hi;
    plain.count = 1;
    CHECK_EQ(find_split_parts(*tables.current(), plain.lo[0], plain.hi[0], &plain), 0u);
}

// The branch scan over hand-made code: what it reads as direct jumps, and where they go.
TEST(split_parts_scan_direct_branches) {
    DirectBranch out[8];
#if defined(__x86_64__)
    // jmp -0x100; jne +0x10; a short jmp (not counted: it cannot leave the function); ret
    const uint8_t code[] = {0xE9, 0x00, 0xFF, 0xFF, 0xFF, 0x0F, 0x85, 0x10, 0x00, 0x00, 0x00, 0xEB, 0x02, 0xC3};
    const uint32_t n = scan_direct_branches(code, sizeof code, 0x1000, out, 8);
    CHECK_EQ(n, 2u);
    CHECK_EQ(out[0].from, 0x1000u);
    CHECK_EQ(out[0].to, 0x1005u - 0x100u);
    CHECK_EQ(out[1].from, 0x1005u);
    CHECK_EQ(out[1].to, 0x100Bu + 0x10u);
    CHECK_EQ(scan_direct_branches(code, sizeof code, 0x1000, out, 1), 1u);  // max is kept
#elif defined(__aarch64__)
    // b -8; b.ne +16; cbz x0, +8; ret
    const uint32_t insns[] = {0x17FFFFFEu, 0x54000081u, 0xB4000040u, 0xD65F03C0u};
    uint8_t code[sizeof insns];
    std::memcpy(code, insns, sizeof insns);
    const uint32_t n = scan_direct_branches(code, sizeof code, 0x1000, out, 8);
    CHECK_EQ(n, 3u);
    CHECK_EQ(out[0].to, 0x1000u - 8u);
    CHECK_EQ(out[1].to, 0x1004u + 16u);
    CHECK_EQ(out[2].to, 0x1008u + 8u);
#endif
}

#if defined(__x86_64__)
// The kernel (no CFI, the stack realigned a page down, rbp used for data), called from a
// function that keeps a frame pointer (CFA = rbp + 16) until the handler has caught it.
#include "realigned_kernel.inc"
extern "C" {
volatile int spprof_kernel_caught = 0;
void realigned_kernel(long n);
void realigned_kernel_end();

__attribute__((noinline, optimize("no-omit-frame-pointer"))) int spprof_kernel_caller(int x) {
    realigned_kernel(100000);
    asm volatile("" ::: "memory");
    return x + 1;
}
}

namespace {
void on_signal_in_kernel(int, siginfo_t*, void* uc) {
    RegisterContext regs;
    if (!register_context_from_ucontext(uc, &regs)) return;
    const uint64_t k0 = reinterpret_cast<uintptr_t>(&realigned_kernel);
    const uint64_t k1 = reinterpret_cast<uintptr_t>(&realigned_kernel_end);
    if (regs.pc < k0 || regs.pc >= k1 || spprof_kernel_caught) return;
    g_depth = unwind_native(g_tables->current(), regs, g_lo, g_hi, g_pcs, kMaxPcs, &g_status);
    spprof_kernel_caught = 1;
}

void* poke_until_caught(void* target) {
    for (int i = 0; i < 5000 && !spprof_kernel_caught; ++i) {
        pthread_kill(*static_cast<pthread_t*>(target), SIGUSR2);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, nullptr);
    }
    spprof_kernel_caught = 1;  // let the kernel return either way
    return nullptr;
}
}  // namespace

TEST(unwind_live_kernel_that_realigned_the_stack) {
    // Interrupted in the kernel's loop, where rsp is 4 KiB below its frame: the walk goes
    // through its caller (whose CFA needs the rbp the kernel saved) to this test and main.
    UnwindTables tables;
    CHECK(tables.refresh().ok());
    g_tables = &tables;
    CHECK(own_stack_bounds(&g_lo, &g_hi));
    g_depth = 0;
    spprof_kernel_caught = 0;
    {
        ScopedHandler h(&on_signal_in_kernel);
        pthread_t self = pthread_self(), poker;
        CHECK_EQ(pthread_create(&poker, nullptr, &poke_until_caught, &self), 0);
        while (!spprof_kernel_caught) CHECK_EQ(spprof_kernel_caller(1), 2);
        pthread_join(poker, nullptr);
    }
    Symbolizer sym;
    const int k = find_frame(sym, 0, "realigned_kernel");
    const int c = find_frame(sym, 0, "spprof_kernel_caller");
    const int t = find_frame(sym, 0, "test_unwind_live_kernel_that_realigned_the_stack");
    const int m = find_frame(sym, 0, "main");
    CHECK_EQ(k, 0);
    CHECK_EQ(c, 1);
    CHECK(t > c);
    CHECK(m > t);
    CHECK_EQ(g_status.leaf_steps, 1);
    CHECK(g_status.stop == UnwindStop::kBottom);
    if (k != 0 || c != 1 || t <= c || g_status.stop != UnwindStop::kBottom) dump_frames(sym);
    g_tables = nullptr;
}
#endif
