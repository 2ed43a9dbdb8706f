// unwind/rust_demangle.h: Rust v0 symbol names ("_R...") -> readable paths, for the symbolizer.
//
// rustc's v0 mangling (RFC 2603, the rustc book's "v0 Symbol Format"; the default of
// `-C symbol-mangling-version=v0`) is not known to abi::__cxa_demangle, which reads Itanium C++
// and so Rust's legacy "_ZN...17h<hash>E" names only. This is a demangler written from the
// published grammar; its output is rustc's own demangler's "alternate" form (no crate hashes):
//   _RNvCs15kBYyAo9fc_7mycrate4main                -> mycrate::main
//   _RNvMsr_NtCs3ssYzQotkvD_3std4pathNtB5_7PathBuf3newCs15kBYyAo9fc_7mycrate
//                                                  -> <std::path::PathBuf>::new
// It covers paths (crate roots, nested paths with closure/shim namespaces, inherent and trait
// impls, trait definitions), generic arguments, lifetimes and binders, every basic type,
// references, raw pointers, arrays, slices, tuples, fn pointers, dyn traits, integer, bool and
// char constants, the value constants of `adt_const_params` (str, references, arrays, tuples,
// structs and enums: `f::<{Point { x: -3, y: 7 }}>`), backrefs and punycode identifiers.
//
// Bounded: input of at most kRustMaxSymbolBytes, recursion at most kRustMaxDepth, output at most
// kRustMaxOutputBytes and a cap on parse steps, so that backrefs (which may multiply the output)
// cannot make it loop or grow without end. Any malformed, truncated or over-limit input gives
// false, and the caller keeps the mangled name; a limit hit is also counted.
//
// Normal context only (allocates); used at resolve time by the drain, never by a capture.
// Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace spprof {

// Longest mangled name read; real v0 symbols of deeply generic code reach a few KiB.
constexpr size_t kRustMaxSymbolBytes = 16 * 1024;
// Deepest nesting of paths, types and constants (also bounds the C++ stack this uses).
constexpr int kRustMaxDepth = 256;
// Longest demangled name; backrefs can make the output exponentially longer than the input.
constexpr size_t kRustMaxOutputBytes = 16 * 1024;

// True when `mangled` (with or without the Mach-O extra underscore: "_R..." or "__R...") is a
// well-formed Rust v0 symbol; `*out` is then its demangled form. False leaves `*out` unchanged.
// Normal context (allocates), any thread.
bool rust_v0_demangle(const char* mangled, std::string* out);

// True when `mangled` ("_ZN...E" or "__ZN...E") is a Rust legacy symbol, one whose path ends in
// rustc's hash element (h + 16 hex digits); `*out` is then the path with rustc's escapes undone
// ("$LT$" '<', "$u7b$" '{', ".." "::"), hash kept, as rustc's demangler shows it:
// `_ZN3leg10S$LT$T$GT$3get17h99412fe535dce591E` is `leg::S<T>::get::h99412fe535dce591`.
// abi::__cxa_demangle reads these as C++ and keeps the escapes. Normal context, any thread.
bool rust_legacy_demangle(const char* mangled, std::string* out);

// How many v0 symbols were left mangled because they went past a limit above (input, depth,
// output or steps), since the extension was loaded (a session reports its own share:
// stats()["rust_names_over_limit"]). Any thread (a relaxed atomic).
uint64_t rust_names_over_limit();

}  // namespace spprof
