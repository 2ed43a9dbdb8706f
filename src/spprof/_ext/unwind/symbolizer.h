// unwind/symbolizer.h: native pc -> (function, library, offset), outside the signal handler.
//
// The handler records raw pcs; the drain resolves them here. dladdr answers for exported
// symbols; static functions (most of libpython's and the python executable's: the eval loop's
// .cold part, ceval helpers, GC internals) are only in the ELF .symtab of the file on disk, so
// each module's .symtab (or .dynsym when stripped) is read once with pread, its function
// symbols kept sorted, and looked up by address. C++ names (starting with _Z) are demangled
// with abi::__cxa_demangle, Rust v0 names (_R) by unwind/rust_demangle.h. Results are cached per pc.
//
// Modules are enumerated with platform_for_each_image (dl_iterate_phdr on Linux; tables are
// read by platform_read_function_symbols: platform/images.h) and re-enumerated when a pc
// falls outside them and the loader's add/remove counters moved. The file read is the one at the module's path
// when first needed: a library replaced on disk while loaded gives wrong names (not detected).
//
// Normal context only: allocates, takes the loader lock, reads files. Not thread-safe: the
// caller serialises (the drain holds the GIL). Linux reads ELF symbol tables; on macOS only
// dladdr is used (exported symbols), with the library from dladdr too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "error.h"

namespace spprof {

struct NativeSymbol {
    std::string function;     // demangled name; empty when no symbol covers the pc
    std::string library;      // path of the module holding the pc; empty when none does
    uint64_t offset = 0;      // pc - symbol start; pc - load bias when no symbol covers it
    bool has_symbol = false;  // function is set
    // No symbol: the start of the function holding the pc by the module's unwind table
    // (pc - load bias of that start), so the samples of one static function of a stripped
    // library share one frame rather than one per address.
    uint64_t start_offset = 0;
    bool has_start = false;
};

// An address range [lo, hi) of a named function in the running process.
struct FunctionRange {
    uint64_t lo = 0;
    uint64_t hi = 0;
    std::string name;
};

class Symbolizer {
public:
    Symbolizer();
    ~Symbolizer();
    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    // Resolve `pc` (for a return address pass pc - 1: the call instruction). Returns true when
    // a function name was found; false leaves `library`/`offset` filled when the pc is in a
    // module, or an empty library and offset = pc when it is in none. Drain thread, GIL held
    // (or any single thread that owns this object).
    bool symbolize(uint64_t pc, NativeSymbol* out);

    // Every function symbol of the module that contains `addr_in_module` named `name` or
    // `name` + "." + suffix (gcc's clones and split parts: .cold, .part.0, .constprop.0...),
    // with its runtime range. Reads the module's symbol table if not yet read. Same thread
    // rules as symbolize. Errors: kValue (addr in no module), kRuntime (no symbol table).
    Error find_functions(uint64_t addr_in_module, const char* name, std::vector<FunctionRange>* out);

    // Forget every cached result and symbol table (e.g. at session end). Same thread rules.
    void reset();

    struct Module;  // defined in symbolizer.cpp

private:
    Module* module_for(uint64_t pc);
    void rescan_modules();

    std::vector<std::unique_ptr<Module>> modules_;
    std::unordered_map<uint64_t, NativeSymbol> cache_;
    uint64_t adds_ = 0;
    uint64_t subs_ = 0;
    bool scanned_ = false;
};

// Demangle an Itanium C++ name (starting with "_Z", which includes Rust's legacy mangling) or a
// Rust v0 name ("_R", unwind/rust_demangle.h); other names, and malformed ones, are returned
// unchanged. Normal context (allocates).
std::string demangle_symbol(const char* name);

}  // namespace spprof
