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
//
// A table read holds its caller for as long as the file takes (libtorch_cpu.so: 76 MB of
// names, 60 ms from the page cache, twice that from disk). So the drain asks needs_file_read
// first, reads what it names with read_module_tables on its own thread without the GIL, and
// hands the result to install; symbolize reads the file itself only when nobody did.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "error.h"
#include "platform/images.h"

namespace spprof {

struct NativeSymbol {
    std::string function;     // demangled name; empty when no symbol covers the pc
    std::string library;      // path of the module holding the pc; empty when none does
    uint64_t offset = 0;      // pc - symbol start; pc - load bias when no symbol covers it
    uint64_t load_bias = 0;   // where the library's file addresses start in memory (library set)
    bool has_symbol = false;  // function is set
    // No symbol: the start of the function holding the pc by the module's unwind table
    // (pc - load bias of that start), so the samples of one static function of a stripped
    // library share one frame rather than one per address.
    uint64_t start_offset = 0;
    bool has_start = false;
};

// What a module's file holds for symbolize, read apart from any Symbolizer: the module's path,
// what is wanted of it, and what was read. The starts are wanted only once the symbols are read
// and cover no pc that needs them (a stripped library's static functions).
struct ModuleTables {
    std::string path;
    bool want_symbols = false;
    bool want_starts = false;
    bool has_symbols = false;  // set by read_module_tables
    ImageSymbols symbols;
    bool has_starts = false;
    std::vector<uint64_t> starts;
};

// Reads what `t` wants from the file at t->path (a failure leaves has_* false: the module then
// has no table, as when symbolize reads it). Any thread, touches no Symbolizer; normal
// context (opens and reads the file, allocates; out of memory counts as a failed read).
void read_module_tables(ModuleTables* t);

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

    // Whether symbolize(pc) would read a module's file now: then true, with *out naming the
    // file and what is wanted of it (its results still empty). Same thread rules as symbolize;
    // cheap for a pc already resolved (one hash lookup).
    bool needs_file_read(uint64_t pc, ModuleTables* out);
    // Tables read by read_module_tables, given to every module at t.path that has not read
    // them yet (a table is in file addresses: where the module is loaded does not matter).
    // Same thread rules as symbolize.
    void install(ModuleTables&& t);
    // Files symbolize read itself, on its caller's behalf (nobody had installed their tables).
    uint64_t inline_reads() const { return inline_reads_; }
    // How those reads run: run(fn, arg) calls fn(arg) and returns when it has (the session
    // passes own_thread_run_apart, so a file opened for a name takes none of the program's
    // descriptor numbers); null, the default: on the caller's thread.
    using FileReadRunner = void (*)(void (*fn)(void*), void* arg);
    void set_file_read_runner(FileReadRunner run) { run_reads_ = run; }

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
    // Reads m's symbol table if nobody did (through run_reads_); true when it read.
    bool ensure_symbols(Module* m);
    void read_apart(void (*fn)(void*), void* arg) const { run_reads_ != nullptr ? run_reads_(fn, arg) : fn(arg); }

    std::vector<std::unique_ptr<Module>> modules_;
    std::unordered_map<uint64_t, NativeSymbol> cache_;
    uint64_t adds_ = 0;
    uint64_t subs_ = 0;
    bool scanned_ = false;
    uint64_t inline_reads_ = 0;
    FileReadRunner run_reads_ = nullptr;
};

// Demangle an Itanium C++ name (starting with "_Z", which includes Rust's legacy mangling) or a
// Rust v0 name ("_R", unwind/rust_demangle.h); other names, and malformed ones, are returned
// unchanged. Normal context (allocates).
std::string demangle_symbol(const char* name);

}  // namespace spprof
