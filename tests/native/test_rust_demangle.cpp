// test_rust_demangle.cpp: the Rust v0 demangler (unwind/rust_demangle.h) over a table of real
// symbols and their expected forms, then malformed, truncated, cyclic, exponential and huge
// inputs, each of which must give false (the caller keeps the mangled name) without crashing.
//
// The table: the rustc book's "v0 Symbol Format" examples, and symbols rustc 1.95 emitted with
// `-C symbol-mangling-version=v0` for a test crate and its std, with the output of rustc's own
// demangler in its alternate form ("{:#}") as the expected text.
#include <cstring>
#include <string>

#include "harness.h"
#include "unwind/rust_demangle.h"
#include "unwind/symbolizer.h"

using namespace spprof;

namespace {

struct Case {
    const char* mangled;
    const char* demangled;
};

const Case kCases[] = {
    // The rustc book's examples.
    {"_RNvCs15kBYyAo9fc_7mycrate7example", "mycrate::example"},
    {"_RNvMsr_NtCs3ssYzQotkvD_3std4pathNtB5_7PathBuf3newCs15kBYyAo9fc_7mycrate", "<std::path::PathBuf>::new"},
    {"_RNvMs_Cs4Cv8Wi1oAIB_7mycrateNtB4_7Example3foo", "<mycrate::Example>::foo"},
    {"_RNvXCs15kBYyAo9fc_7mycrateNtB2_7ExampleNtB2_5Trait3foo", "<mycrate::Example as mycrate::Trait>::foo"},
    {"_RNvYNtCs15kBYyAo9fc_7mycrate7ExampleNtB4_5Trait7exampleB4_", "<mycrate::Example as mycrate::Trait>::example"},
    {"_RNCNvCsgStHSCytQ6I_7mycrate4main0B3_", "mycrate::main::{closure#0}"},
    {"_RNCNvCsgStHSCytQ6I_7mycrate4mains_0B3_", "mycrate::main::{closure#1}"},
    {"_RINvCsgStHSCytQ6I_7mycrate7examplelKj1_EB2_", "mycrate::example::<i32, 1>"},
    {"_RINvCs7qp2U7fqm6G_7mycrate7exampleFG0_RL1_hRL0_tEuEB2_", "mycrate::example::<for<'a, 'b> fn(&'a u8, &'b u16)>"},
    {"_RINvCs7qp2U7fqm6G_7mycrate7exampleKy12345678_EB2_", "mycrate::example::<305419896>"},
    {"_RNvNvMCsd9PVOYlP1UU_7mycrateINtB4_7ExamplepKpE3foo14EXAMPLE_STATIC", "<mycrate::Example<_, _>>::foo::EXAMPLE_STATIC"},
    {"_RINvCs7qp2U7fqm6G_7mycrate7exampleAtj8_EB2_", "mycrate::example::<[u16; 8]>"},
    {"_RINvCs7qp2U7fqm6G_7mycrate7exampleNtB2_7ExampleBw_EB2_", "mycrate::example::<mycrate::Example, mycrate::Example>"},
    {"_RINvMsY_NtCseXNvpPnDBDp_3std4pathNtB6_4Path3neweECs7qp2U7fqm6G_7mycrate", "<std::path::Path>::new::<str>"},
    {"_RNvNtNtCsgOH4LzxkuMq_7mycrateu8gdel_5qa6escher4bach", "mycrate::gödel::escher::bach"},
    // Emitted by rustc 1.95.
    {"_RINvCsdrzbAzSuyJg_3zoo6tuplesoEB2_", "zoo::tuples::<u128>"},
    {"_RINvCsdrzbAzSuyJg_3zoo6tuplesThEEB2_", "zoo::tuples::<(u8,)>"},
    {"_RINvCsdrzbAzSuyJg_3zoo6tuplesARSmj3_EB2_", "zoo::tuples::<[&[u32]; 3]>"},
    {"_RINvCsdrzbAzSuyJg_3zoo2hrNCNvB2_3runs_0EB2_", "zoo::hr::<zoo::run::{closure#1}>"},
    {"_RINvCsdrzbAzSuyJg_3zoo6tuplesFG_hRL0_eEzEB2_", "zoo::tuples::<for<'a> fn(u8, &'a str) -> !>"},
    {"_RINvCsdrzbAzSuyJg_3zoo6tuplesFUKCPhOlvEuEB2_", "zoo::tuples::<unsafe extern \"C\" fn(*const u8, *mut i32, ...)>"},
    {"_RINvCsdrzbAzSuyJg_3zoo6tuplesTufdijmstbEEB2_", "zoo::tuples::<((), f32, f64, isize, usize, u32, i16, u16, bool)>"},
    {"_RINvCsdrzbAzSuyJg_3zoo7genericTaReAyj2_EEB2_", "zoo::generic::<(i8, &str, [u64; 2])>"},
    {"_RINvCsdrzbAzSuyJg_3zoo8constgenKca_Kb0_Kx0_EB2_", "zoo::constgen::<'\\n', false, 0>"},
    {"_RINvCsdrzbAzSuyJg_3zoo8constgenKc78_Kb1_Kxn2a_EB2_", "zoo::constgen::<'x', true, -42>"},
    {"_RNvXs_CsdrzbAzSuyJg_3zooNtB4_2SqNtB4_5Shape4area", "<zoo::Sq as zoo::Shape>::area"},
    {"_RNvMCsdrzbAzSuyJg_3zooINtB2_7ExampletKj4_E3fooB2_", "<zoo::Example<u16, 4>>::foo"},
    {"_RINvCsdrzbAzSuyJg_3zoo7genericINtNtCsgEmfK2I1SDS_4core6option6OptionQnEEB2_",
     "zoo::generic::<core::option::Option<&mut i128>>"},
    {"_RNvXs1g_NtCsgEmfK2I1SDS_4core3fmtRDNtB6_5DebugEL_Bx_3fmtB8_", "<&dyn core::fmt::Debug as core::fmt::Debug>::fmt"},
    {"_RNvXs1h_NtCsgEmfK2I1SDS_4core3fmtQShNtB6_5Debug3fmtCsgY6Mt91CT9J_14rustc_demangle",
     "<&mut [u8] as core::fmt::Debug>::fmt"},
    {"_RNCNCNvNtNtCsjrHSEGnQ3l9_3std3sys9backtrace10__print_fmts_00B9_",
     "std::sys::backtrace::_print_fmt::{closure#1}::{closure#0}"},
    {"_RNvCsfLfy6EI15iL_7___rustc12___rust_alloc", "__rustc::__rust_alloc"},
    {"_RINvCsdrzbAzSuyJg_3zoo6tuplesRDNtNtNtNtCsgEmfK2I1SDS_4core4iter6traits8iterator8Iteratorp4ItemhEL_EB2_",
     "zoo::tuples::<&dyn core::iter::traits::iterator::Iterator<Item = u8>>"},
    {"_RINvCsdrzbAzSuyJg_3zoo6tuplesINtNtCslNYArtu3iFV_5alloc5boxed3BoxDG_INtNtNtCsgEmfK2I1SDS_4core3ops8function2FnTRL0_"
     "hEEp6OutputRL0_hNtNtB1a_6marker4SyncNtB26_4SendEL_EEB2_",
     "zoo::tuples::<alloc::boxed::Box<dyn for<'a> core::ops::function::Fn<(&'a u8,), Output = &'a u8> + "
     "core::marker::Sync + core::marker::Send>>"},
    {"_RINvMs4_NtCsgY6Mt91CT9J_14rustc_demangle2v0NtB6_7Printer14print_sep_listNCNvB2_11print_consts0_0EB8_",
     "<rustc_demangle::v0::Printer>::print_sep_list::<<rustc_demangle::v0::Printer>::print_const::{closure#2}>"},
    // Hand-made from the grammar, checked against rustc's demangler.
    {"_RNvC3foou4fq9h", "foo::\xF0\x9F\xA4\xA6"},                  // punycode without a basic part
    {"_RNvC3foou6f_5gaa", "foo::f\xC3\xB8\xC3\xB8"},               // føø
    {"_RNvC3foou6n84amf", "foo::\xE9\x93\x81\xE9\x94\x88"},        // 铁锈
    {"_RINvC3foo3barKc1f4a9_Kc27_Kc5c_Kc7f_Kln80000000_EB2_", "foo::bar::<'\xF0\x9F\x92\xA9', '\\'', '\\\\', '\\u{7f}', -2147483648>"},
    {"_RINvC3foo3barKoffffffffffffffffffffffffffffffff_Kh0_Kt_E", "foo::bar::<0xffffffffffffffffffffffffffffffff, 0, 0>"},
    {"_RINvC3foo3barFK13system_unwindEuEB2_", "foo::bar::<extern \"system-unwind\" fn()>"},
    {"_RINvC3foo3barDNvC3foo3BazEL_E", "foo::bar::<dyn foo::Baz>"},
    {"_RNvNvC3foo0_3bar", "foo::bar"},                              // an empty name in a value namespace
    {"_RNvCs15kBYyAo9fc_7mycrate4main.llvm.9D1C9369", "mycrate::main"},  // LTO's suffix dropped
    {"_RNvNvC3foo3bar3baz.cold.1", "foo::bar::baz.cold.1"},         // other suffixes kept
    {"__RNvCs15kBYyAo9fc_7mycrate4main", "mycrate::main"},          // Mach-O's extra underscore
    // Const generics of values (adt_const_params), from tests/tools/rust_demangle_zoo_consts.rs.
    {"_RINvCs9VRaA0WHXOc_6consts1aKAh1_h2_h3_EEB2_", "consts::a::<{[1, 2, 3]}>"},
    {"_RINvCs9VRaA0WHXOc_6consts1mKVNtNtB2_4Mode3OffUEB2_", "consts::m::<{consts::Mode::Off}>"},
    {"_RINvCs9VRaA0WHXOc_6consts1mKVNtNtB2_4Mode5LevelTh2_EEB2_", "consts::m::<{consts::Mode::Level(2)}>"},
    {"_RINvCs9VRaA0WHXOc_6consts1mKVNtNtB2_4Mode5NamedS1nc7a_EEB2_", "consts::m::<{consts::Mode::Named { n: 'z' }}>"},
    {"_RINvCs9VRaA0WHXOc_6consts1pKVNtB2_5PointS1xln3_1yh7_EEB2_", "consts::p::<{consts::Point { x: -3, y: 7 }}>"},
    {"_RINvCs9VRaA0WHXOc_6consts1qKVNtB2_4PairTh4_b1_EEB2_", "consts::q::<{consts::Pair(4, true)}>"},
    {"_RINvCs9VRaA0WHXOc_6consts1rKRAt1_t2_EEB2_", "consts::r::<{&[1, 2]}>"},
    {"_RINvCs9VRaA0WHXOc_6consts1sKRe68692022796f752220277827200a20c3bc20e2888220f09f9880_EB2_",
     "consts::s::<\"hi \\\"you\\\" 'x' \\n \xC3\xBC \xE2\x88\x82 \xF0\x9F\x98\x80\">"},
    {"_RINvCs9VRaA0WHXOc_6consts1sKRe_EB2_", "consts::s::<\"\">"},
    {"_RINvCs9VRaA0WHXOc_6consts1tKTh5_b0_EEB2_", "consts::t::<{(5, false)}>"},
    {"_RINvCs9VRaA0WHXOc_6consts2rrKRRe6162_EB2_", "consts::rr::<{&\"ab\"}>"},
    {"_RINvCs9VRaA0WHXOc_6consts2t1KTc71_EEB2_", "consts::t1::<{('q',)}>"},
    // Hand-made, checked against rustc's demangler: a str itself, &mut, a value as an array
    // type's length (no braces there), the empty tuple.
    {"_RINvC3foo3barKe616263_E", "foo::bar::<{*\"abc\"}>"},
    {"_RINvC3foo3barKQh1_E", "foo::bar::<{&mut 1}>"},
    {"_RINvC3foo3barAhAh1_EE", "foo::bar::<[u8; [1]]>"},
    {"_RINvC3foo3barKTEE", "foo::bar::<{()}>"},
};

std::string demangled_or_empty(const std::string& s) {
    std::string out;
    return rust_v0_demangle(s.c_str(), &out) ? out : std::string();
}

}  // namespace

// Each case through `demangle` and through the symbolizer's entry point (which must pick the
// same reader: for a legacy name, before abi::__cxa_demangle).
template <size_t N>
void check_cases(const Case (&cases)[N], bool (*demangle)(const char*, std::string*), bool* spprof_failed_) {
    for (const Case& c : cases) {
        std::string out;
        const bool ok = demangle(c.mangled, &out);
        if (!ok || out != c.demangled) {
            std::fprintf(stderr, "  %s\n    want %s\n    got  %s\n", c.mangled, c.demangled, ok ? out.c_str() : "(false)");
        }
        CHECK(ok);
        CHECK(out == c.demangled);
        CHECK(demangle_symbol(c.mangled) == c.demangled);
    }
}

TEST(rust_demangle_table) { check_cases(kCases, &rust_v0_demangle, spprof_failed_); }

// Rust's legacy mangling (stable rustc's default for a crate's own code), from
// tests/tools/rust_demangle_zoo.rs built with -C symbol-mangling-version=legacy; each checked
// against rustc's demangler (which drops the hash in its alternate form; it is kept here).
const Case kLegacyCases[] = {
    {"_ZN17rust_demangle_zoo20Example$LT$T$C$_$GT$3foo17hcd0402b890e47845E",
     "rust_demangle_zoo::Example<T,_>::foo::hcd0402b890e47845"},
    {"_ZN17rust_demangle_zoo3run28_$u7b$$u7b$closure$u7d$$u7d$17h0410b583a5778607E",
     "rust_demangle_zoo::run::{{closure}}::h0410b583a5778607"},
    {"_ZN66_$LT$rust_demangle_zoo..Sq$u20$as$u20$rust_demangle_zoo..Shape$GT$4area17h2c7518503477359fE",
     "<rust_demangle_zoo::Sq as rust_demangle_zoo::Shape>::area::h2c7518503477359f"},
    {"_ZN3leg9g$uf6$del4bach17haef9b05c78fdad0aE", "leg::g\xC3\xB6" "del::bach::haef9b05c78fdad0a"},
    {"_ZN3foo3bar17h0123456789abcdefE.llvm.4711", "foo::bar::h0123456789abcdef"},  // LTO's suffix
    {"_ZN3foo3bar17h0123456789abcdefE.cold.1", "foo::bar::h0123456789abcdef.cold.1"},
    {"__ZN3foo3bar17h0123456789abcdefE", "foo::bar::h0123456789abcdef"},  // Mach-O's underscore
    {"_ZN3foo10a$SP$b$BP$17h0123456789abcdefE", "foo::a@b*::h0123456789abcdef"},
    {"_ZN3foo5a$u7$17h0123456789abcdefE", "foo::a$u7$::h0123456789abcdef"},  // a control code: kept
    {"_ZN3foo5a$XY$17h0123456789abcdefE", "foo::a$XY$::h0123456789abcdef"},  // unknown escape: kept
};

TEST(rust_legacy_demangle_table) {
    check_cases(kLegacyCases, &rust_legacy_demangle, spprof_failed_);
    // C++ names (no hash element, or parameters after the path) are C++'s.
    const char* cxx[] = {"_ZN3foo3barEv", "_ZN3foo3barE", "_ZN3foo17h0123456789abcdefEv", "_ZN17h0123456789abcdefE",
                         "_ZN3foo17h0123456789abcdeE", "_ZN3foo17h0123456789ABCDEFE", "_ZN3foo", "_ZN05abcdeE"};
    for (const char* name : cxx) {
        std::string out = "untouched";
        CHECK(!rust_legacy_demangle(name, &out));
        CHECK(out == "untouched");
    }
    CHECK(demangle_symbol("_ZN3foo3barEv") == "foo::bar()");
}

TEST(rust_demangle_malformed) {
    const char* bad[] = {
        "", "_R", "_RN", "_RNv", "_RC", "_RC3fo", "_RNvC3foo", "_RX", "_RM", "_RY", "_RI", "_RB", "_RB_",
        "_R0NvC3foo3bar",                 // an encoding version
        "_RNvC3foo3barW",                 // trailing garbage that is no path
        "_RNvC3foo3bar_",                 // trailing garbage
        "_RB0_",                          // a backref forward of itself
        "_RNvB_3foo",                     // a backref cycle: the depth limit ends it
        "_RINvC3foo3barKb2_E",            // bool 2
        "_RINvC3foo3barKjn1_E",           // a negative unsigned
        "_RINvC3foo3barKc110000_E",       // a char past Unicode
        "_RINvC3foo3barKcd800_E",         // a surrogate
        "_RINvC3foo3barKRe3foo_E",        // a str constant whose bytes are not hex
        "_RINvC3foo3barKRe616_E",         // half a byte
        "_RINvC3foo3barKRefe_E",          // not UTF-8
        "_RINvC3foo3barKRec080_E",        // overlong UTF-8
        "_RINvC3foo3barKReeda080_E",      // a surrogate in UTF-8 (utf8_text.h's rule)
        "_RINvC3foo3barKRef4908080_E",    // UTF-8 past U+10FFFF
        "_RINvC3foo3barKVNtC3foo1AXE",    // an ADT value neither unit, tuple nor struct
        "_RINvC3foo3barKTE",              // an unterminated list of generic arguments
        "_RINvC3foo3barRL1_hE",           // a lifetime no binder binds
        "_RINvC3foo3barDG0_NvC3foo3BazEL1_E",  // the binder does not reach the dyn's lifetime
        "_RINvC3foo3barqE",               // an unknown basic type
        "_RNvC3foou2zz",                  // punycode that decodes to nothing valid
        "_RNvC3foo99bar",                 // an identifier longer than the symbol
        "_RNvC3foo01a",                   // a length with a leading zero
        "_RNv9C3foo3bar",                 // a namespace that is no letter
        "_RINvC3foo3barTh",               // an unterminated tuple
        "_RINvC3foo3barFhh",              // an unterminated fn signature
        "_RINvC3foo3barK",                // an unterminated const
        "_RNvCsZZZZZZZZZZZZZZZZZZZZZZZZ_3foo3bar",  // a disambiguator past 64 bits
        "foo", "R", "_Rust",
    };
    const uint64_t over_before = rust_names_over_limit();
    for (const char* s : bad) {
        std::string out = "untouched";
        const bool ok = rust_v0_demangle(s, &out);
        if (ok) std::fprintf(stderr, "  accepted %s as %s\n", s, out.c_str());
        CHECK(!ok);
        CHECK(out == "untouched");
        CHECK(demangle_symbol(s) == s);  // the symbolizer keeps the mangled name
    }
    std::string out;
    CHECK(!rust_v0_demangle(nullptr, &out));
    // Malformed is not over a limit, except the backref cycle, which the depth limit ends
    // (counted twice: demangler and symbolizer).
    CHECK_EQ(rust_names_over_limit() - over_before, uint64_t{2});
}

// Every prefix of every table symbol: no crash, no over-long output, and a cut that falls
// inside the path never passes for the whole name.
TEST(rust_demangle_truncated) {
    for (const Case& c : kCases) {
        const std::string full = c.mangled;
        for (size_t len = 0; len < full.size(); ++len) {
            const std::string cut = full.substr(0, len);
            std::string out;
            if (rust_v0_demangle(cut.c_str(), &out)) {
                CHECK(out.size() <= kRustMaxOutputBytes);
                if (out == c.demangled && cut.size() + 40 < full.size()) std::fprintf(stderr, "  %s\n", cut.c_str());
                CHECK(out != c.demangled || cut.size() + 40 >= full.size());  // only the dropped crate or suffix
            }
        }
    }
}

// Byte flips over the table (a fixed pseudo-random sequence): whatever they decode to, the
// demangler ends, stays within its output limit, and (under ASan) reads nothing out of bounds.
TEST(rust_demangle_mutated) {
    uint32_t x = 12345;
    const char kAlphabet[] = "_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.$";
    for (const Case& c : kCases) {
        for (int round = 0; round < 200; ++round) {
            std::string s = c.mangled;
            for (int flips = 0; flips < 3; ++flips) {
                x = x * 1103515245u + 12345u;
                const size_t at = 2 + (x >> 8) % (s.size() - 2);
                x = x * 1103515245u + 12345u;
                s[at] = kAlphabet[(x >> 8) % (sizeof kAlphabet - 1)];
            }
            std::string out;
            if (rust_v0_demangle(s.c_str(), &out)) CHECK(out.size() <= kRustMaxOutputBytes);
        }
    }
}

namespace {

std::string base62(size_t v) {  // the grammar's base-62-number
    if (v == 0) return "_";
    static const char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    std::string r;
    for (size_t n = v - 1;; n /= 62) {
        r.insert(r.begin(), kDigits[n % 62]);
        if (n < 62) break;
    }
    return r + "_";
}

}  // namespace

TEST(rust_demangle_limits) {
    CHECK(base62(0) == "_");
    CHECK(base62(1) == "0_");
    CHECK(base62(62) == "Z_");
    CHECK(base62(63) == "10_");
    CHECK(base62(1000) == "g7_");
    const uint64_t over_before = rust_names_over_limit();
    // Backrefs doubling the output at each generic argument: 2^40 characters if followed. It
    // must stop at the output limit (and quickly: the whole test binary runs in seconds).
    {
        std::string body = "INvC3foo3bar";
        size_t prev = body.size();
        body += "Thh" "E";  // (u8, u8)
        for (int i = 0; i < 40; ++i) {
            const size_t here = body.size();
            body += "T" + std::string("B") + base62(prev) + "B" + base62(prev) + "E";
            prev = here;
        }
        body += "E";
        std::string out;
        CHECK(!rust_v0_demangle(("_R" + body).c_str(), &out));
        // The same with 3 levels is fine, and exact.
        std::string small = "INvC3foo3bar";
        size_t p = small.size();
        small += "ThhE";
        const size_t here = small.size();
        small += "TB" + base62(p) + "B" + base62(p) + "EE";
        (void)here;
        CHECK(demangled_or_empty("_R" + small) == "foo::bar::<(u8, u8), ((u8, u8), (u8, u8))>");
    }
    // Nesting past the depth limit, without backrefs: references of references.
    {
        std::string deep = "_RINvC3foo3bar" + std::string(kRustMaxDepth + 10, 'R') + "hE";
        std::string out;
        CHECK(!rust_v0_demangle(deep.c_str(), &out));
        std::string shallow = "_RINvC3foo3bar" + std::string(20, 'R') + "hE";
        CHECK(demangled_or_empty(shallow) == "foo::bar::<" + std::string(20, '&') + "u8>");
    }
    // A name longer than the input limit stays mangled; one just under it is read.
    {
        std::string name(kRustMaxSymbolBytes, 'a');
        std::string huge = "_RNvC3foo" + std::to_string(name.size()) + name;
        std::string out;
        CHECK(!rust_v0_demangle(huge.c_str(), &out));
        CHECK(demangle_symbol(huge.c_str()) == huge);
        std::string fits(kRustMaxSymbolBytes - 100, 'b');
        CHECK(demangled_or_empty("_RNvC3foo" + std::to_string(fits.size()) + fits) == "foo::" + fits);
    }
    // Each of the four over-limit names above is counted (exponential output, depth, and the
    // huge name twice: demangler and symbolizer); the names that fit are not.
    CHECK_EQ(rust_names_over_limit() - over_before, uint64_t{4});
}
