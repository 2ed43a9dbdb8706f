// unwind/symbolizer.cpp: Symbolizer (see symbolizer.h).
#include "unwind/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "platform/images.h"
#include "unwind/rust_demangle.h"

namespace spprof {

std::string demangle_symbol(const char* name) {
    if (name == nullptr) return std::string();
    std::string rust;
    if (rust_legacy_demangle(name, &rust)) return rust;  // before C++: it keeps rustc's escapes
    if (name[0] == '_' && name[1] == 'Z') {
        int status = 0;
        char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
        if (status == 0 && d != nullptr) {
            std::string s(d);
            std::free(d);
            return s;
        }
        std::free(d);
    }
    if (rust_v0_demangle(name, &rust)) return rust;
    return std::string(name);
}

// Cap on distinct pcs remembered; past it the cache starts over (names stay correct).
constexpr size_t kMaxCachedPcs = size_t{1} << 20;

struct Symbolizer::Module {
    std::string path;
    uintptr_t bias = 0;
    std::vector<std::pair<uintptr_t, uintptr_t>> loads;  // runtime PT_LOAD ranges
    bool symbols_read = false;
    bool has_symbols = false;
    ImageSymbols table;  // function symbols (addresses in the file: runtime = bias + value)
    // Names demangled so far, by offset into the table's names: a function's pcs share one
    // read of its name (a system call: the names stay in the file) and one demangling.
    std::unordered_map<uint32_t, std::string> demangled;
    bool starts_read = false;
    std::vector<uint64_t> starts;  // function starts by the unwind table (addresses in the file)

    bool contains(uint64_t pc) const {
        for (const auto& r : loads)
            if (pc >= r.first && pc < r.second) return true;
        return false;
    }
};

void read_module_tables(ModuleTables* t) {
    try {
        if (t->want_symbols) t->has_symbols = platform_read_function_symbols(t->path.c_str(), &t->symbols);
        if (t->want_starts) t->has_starts = platform_read_function_starts(t->path.c_str(), &t->starts);
    } catch (const std::bad_alloc&) {
        // As a file that cannot be read: the module goes without names, the program goes on.
    }
    if (!t->has_symbols) t->symbols = ImageSymbols();
    if (!t->has_starts) t->starts.clear();
}

bool Symbolizer::ensure_symbols(Module* m) {
    if (m->symbols_read) return false;
    m->symbols_read = true;
    read_apart([](void* p) {
        auto* mod = static_cast<Module*>(p);
        mod->has_symbols = platform_read_function_symbols(mod->path.c_str(), &mod->table);
    }, m);
    return true;
}

namespace {

// The symbol covering runtime address pc in `m`, or nullptr.
const ImageSymbol* lookup(const Symbolizer::Module& m, uint64_t pc) {
    if (pc < m.bias) return nullptr;
    const uint64_t v = pc - m.bias;
    const std::vector<ImageSymbol>& syms = m.table.syms;
    auto it = std::upper_bound(syms.begin(), syms.end(), v,
                               [](uint64_t x, const ImageSymbol& s) { return x < s.value; });
    // Look back a few entries: an earlier, larger symbol may enclose pc past a smaller one.
    for (int back = 0; back < 8 && it != syms.begin(); ++back) {
        --it;
        if (v < it->value + it->size) return &*it;
    }
    return nullptr;
}

// Appends every image as a Module; stops (a shorter list) when out of memory.
bool scan_module(const LoadedImage& img, void* data) {
    auto* out = static_cast<std::vector<std::unique_ptr<Symbolizer::Module>>*>(data);
    try {
        std::unique_ptr<Symbolizer::Module> m(new Symbolizer::Module());
        m->bias = img.bias;
        m->path = img.path;
        for (uint32_t i = 0; i < img.segment_count; ++i)
            m->loads.emplace_back(img.segments[i].lo, img.segments[i].hi);
        out->push_back(std::move(m));
    } catch (const std::bad_alloc&) {
        return false;  // no exception may cross the loader's iteration
    }
    return true;
}

}  // namespace

void Symbolizer::rescan_modules() {
    std::vector<std::unique_ptr<Module>> fresh;
    ImageListVersion version;
    (void)platform_for_each_image(&scan_module, &fresh, &version);  // none where not enumerated
    // Keep symbol tables already read for modules still loaded at the same place.
    for (auto& m : fresh) {
        for (auto& old : modules_) {
            if (old && old->bias == m->bias && old->path == m->path) {
                m = std::move(old);
                break;
            }
        }
    }
    modules_.swap(fresh);
    adds_ = version.known ? version.adds : 0;
    subs_ = version.known ? version.subs : 0;
    scanned_ = true;
}

Symbolizer::Module* Symbolizer::module_for(uint64_t pc) {
    for (auto& m : modules_)
        if (m->contains(pc)) return m.get();
    // Unknown pc: look again only if a module was loaded or unloaded since the last scan
    // (a garbage pc must not cost a rescan each time).
    if (scanned_) {
        ImageListVersion now;
        if (!platform_image_list_version(&now)) return nullptr;  // images not enumerated here
        if (now.known && now.adds == adds_ && now.subs == subs_ && now.adds != 0) return nullptr;
    }
    rescan_modules();
    for (auto& m : modules_)
        if (m->contains(pc)) return m.get();
    return nullptr;
}

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

void Symbolizer::reset() {
    modules_.clear();
    cache_.clear();
    scanned_ = false;
    adds_ = subs_ = 0;
}

bool Symbolizer::symbolize(uint64_t pc, NativeSymbol* out) {
    auto hit = cache_.find(pc);
    if (hit != cache_.end()) {
        *out = hit->second;
        return out->has_symbol;
    }
    NativeSymbol s;
    s.offset = pc;
    Module* m = module_for(pc);
    if (m != nullptr) {
        s.library = m->path;
        s.offset = pc - m->bias;
        s.load_bias = m->bias;
    }
    // The module's own sorted table first: a binary search. dladdr scans every dynamic
    // symbol of the object for each new pc (libtorch_cpu.so: 75,000; it was 60 % of the
    // drain's CPU on a torch run), and knows no static function.
    if (m != nullptr) {
        if (ensure_symbols(m)) ++inline_reads_;
        if (const ImageSymbol* e = lookup(*m, pc)) {
            auto named = m->demangled.find(e->name);
            std::string raw;
            if (named == m->demangled.end() && m->table.names.name_at(e->name, &raw))
                named = m->demangled.emplace(e->name, demangle_symbol(raw.c_str())).first;
            if (named != m->demangled.end()) {
                s.function = named->second;
                s.offset = pc - (m->bias + e->value);
                s.has_symbol = true;
            }
        }
    }
    // A module with no readable table (macOS, the vDSO), or a pc in none of ours.
    if (!s.has_symbol && (m == nullptr || !m->has_symbols)) {
        Dl_info info;
        std::memset(&info, 0, sizeof info);
        if (dladdr(reinterpret_cast<void*>(static_cast<uintptr_t>(pc)), &info) != 0) {
            if (s.library.empty() && info.dli_fname != nullptr) {
                s.library = info.dli_fname;
                s.load_bias = reinterpret_cast<uintptr_t>(info.dli_fbase);
                s.offset = pc - s.load_bias;
            }
            if (info.dli_sname != nullptr && info.dli_saddr != nullptr) {
                s.function = demangle_symbol(info.dli_sname);
                s.offset = pc - reinterpret_cast<uintptr_t>(info.dli_saddr);
                s.has_symbol = true;
            }
        }
    }
    if (!s.has_symbol && m != nullptr && pc >= m->bias) {
        if (!m->starts_read) {
            m->starts_read = true;
            ++inline_reads_;
            read_apart([](void* p) {
                auto* mod = static_cast<Module*>(p);
                if (!platform_read_function_starts(mod->path.c_str(), &mod->starts)) mod->starts.clear();
            }, m);
        }
        // The last start at or below the pc: a pc in code without unwind information (rare in
        // compiled code) goes to the function before it.
        const uint64_t v = pc - m->bias;
        auto it = std::upper_bound(m->starts.begin(), m->starts.end(), v);
        if (it != m->starts.begin()) {
            s.start_offset = *--it;
            s.has_start = true;
        }
    }
    if (cache_.size() >= kMaxCachedPcs) cache_.clear();
    cache_.emplace(pc, s);
    *out = std::move(s);
    return out->has_symbol;
}

bool Symbolizer::needs_file_read(uint64_t pc, ModuleTables* out) {
    if (cache_.count(pc) != 0) return false;
    Module* m = module_for(pc);
    if (m == nullptr) return false;
    // The same order as symbolize: the symbols first; the starts once no symbol covers the pc
    // (dladdr may still name it where the module has no table: then the starts were read for
    // nothing, off the caller's lock).
    bool symbols = false, starts = false;
    if (!m->symbols_read) {
        symbols = true;
    } else if (lookup(*m, pc) == nullptr && !m->starts_read && pc >= m->bias) {
        starts = true;
    }
    if (!symbols && !starts) return false;
    out->path = m->path;
    out->want_symbols = symbols;
    out->want_starts = starts;
    return true;
}

void Symbolizer::install(ModuleTables&& t) {
    // Usually one module has the path; one loaded twice (dlmopen) gets a copy each, the last
    // one the tables themselves.
    std::vector<Module*> symbols, starts;
    for (auto& m : modules_) {
        if (m->path != t.path) continue;
        if (t.want_symbols && !m->symbols_read) symbols.push_back(m.get());
        if (t.want_starts && !m->starts_read) starts.push_back(m.get());
    }
    for (size_t i = 0; i < symbols.size(); ++i) {
        symbols[i]->symbols_read = true;
        symbols[i]->has_symbols = t.has_symbols;
        symbols[i]->table = i + 1 == symbols.size() ? std::move(t.symbols) : t.symbols;
    }
    for (size_t i = 0; i < starts.size(); ++i) {
        starts[i]->starts_read = true;
        starts[i]->starts = i + 1 == starts.size() ? std::move(t.starts) : t.starts;
    }
}

Error Symbolizer::find_functions(uint64_t addr_in_module, const char* name,
                                 std::vector<FunctionRange>* out) {
    Module* m = module_for(addr_in_module);
    if (m == nullptr) return Error::value("symbolizer: address is in no loaded module");
    ensure_symbols(m);
    if (!m->has_symbols) return Error::runtime("symbolizer: module has no readable symbol table");
    const size_t n = std::strlen(name);
    std::string names;  // one read of the whole table for the scan (the interpreter's: ~1 MB)
    if (!m->table.names.copy_all(&names)) return Error::runtime("symbolizer: module's names cannot be read");
    for (const ImageSymbol& e : m->table.syms) {
        const char* s = names.c_str() + e.name;
        if (std::strncmp(s, name, n) != 0 || (s[n] != '\0' && s[n] != '.')) continue;
        FunctionRange r;
        r.lo = m->bias + e.value;
        r.hi = r.lo + e.size;
        r.name = s;
        out->push_back(std::move(r));
    }
    return Error::none();
}

}  // namespace spprof
