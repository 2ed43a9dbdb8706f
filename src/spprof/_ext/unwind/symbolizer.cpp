// unwind/symbolizer.cpp: Symbolizer (see symbolizer.h).
#include "unwind/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstddef>
#endif

namespace spprof {

std::string demangle_symbol(const char* name) {
    if (name == nullptr) return std::string();
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
    return std::string(name);
}

// Cap on distinct pcs remembered; past it the cache starts over (names stay correct).
constexpr size_t kMaxCachedPcs = size_t{1} << 20;

struct SymEntry {
    uint64_t value = 0;     // ELF virtual address (runtime address = bias + value)
    uint64_t size = 0;
    uint32_t name = 0;      // offset into the module's string table
};

struct Symbolizer::Module {
    std::string path;
    uintptr_t bias = 0;
    std::vector<std::pair<uintptr_t, uintptr_t>> loads;  // runtime PT_LOAD ranges
    bool symbols_read = false;
    bool has_symbols = false;
    std::vector<SymEntry> syms;  // function symbols, sorted by value
    std::string strtab;

    bool contains(uint64_t pc) const {
        for (const auto& r : loads)
            if (pc >= r.first && pc < r.second) return true;
        return false;
    }
};

#if defined(__linux__)

namespace {

// Largest symbol or string table read from a file; bigger ones (only huge debug builds) are
// skipped so one module cannot cost hundreds of MB.
constexpr uint64_t kMaxTableBytes = uint64_t{128} << 20;

bool pread_all(int fd, void* buf, size_t n, uint64_t off) {
    char* p = static_cast<char*>(buf);
    while (n > 0) {
        const ssize_t got = pread(fd, p, n, static_cast<off_t>(off));
        if (got <= 0) return false;
        p += got;
        n -= static_cast<size_t>(got);
        off += static_cast<uint64_t>(got);
    }
    return true;
}

// Read the function symbols of the ELF file at `path` into `m`.
bool read_elf_symbols(const std::string& path, Symbolizer::Module* m) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{fd};
    Elf64_Ehdr eh;
    if (!pread_all(fd, &eh, sizeof eh, 0)) return false;
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
        return false;
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 65000) return false;
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    if (!pread_all(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff)) return false;
    // Prefer the full .symtab; .dynsym when the file is stripped.
    const Elf64_Shdr* symtab = nullptr;
    for (const Elf64_Shdr& s : sh)
        if (s.sh_type == SHT_SYMTAB) symtab = &s;
    if (symtab == nullptr)
        for (const Elf64_Shdr& s : sh)
            if (s.sh_type == SHT_DYNSYM) symtab = &s;
    if (symtab == nullptr || symtab->sh_link >= sh.size()) return false;
    const Elf64_Shdr& strsec = sh[symtab->sh_link];
    if (symtab->sh_entsize != sizeof(Elf64_Sym) || symtab->sh_size > kMaxTableBytes ||
        strsec.sh_size > kMaxTableBytes || strsec.sh_size == 0)
        return false;
    std::vector<Elf64_Sym> raw(symtab->sh_size / sizeof(Elf64_Sym));
    if (!pread_all(fd, raw.data(), raw.size() * sizeof(Elf64_Sym), symtab->sh_offset)) return false;
    std::string strtab(strsec.sh_size, '\0');
    if (!pread_all(fd, &strtab[0], strtab.size(), strsec.sh_offset)) return false;
    strtab.back() = '\0';  // every name ends inside the table
    std::vector<SymEntry> syms;
    syms.reserve(raw.size() / 2);
    for (const Elf64_Sym& s : raw) {
        const unsigned type = ELF64_ST_TYPE(s.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF ||
            s.st_value == 0 || s.st_size == 0 || s.st_name >= strtab.size())
            continue;
        syms.push_back(SymEntry{s.st_value, s.st_size, s.st_name});
    }
    std::sort(syms.begin(), syms.end(), [](const SymEntry& a, const SymEntry& b) {
        return a.value != b.value ? a.value < b.value : a.size > b.size;
    });
    m->syms.swap(syms);
    m->strtab.swap(strtab);
    return true;
}

void ensure_symbols(Symbolizer::Module* m) {
    if (m->symbols_read) return;
    m->symbols_read = true;
    if (m->path.empty() || m->path.compare(0, 10, "linux-vdso") == 0) return;
    m->has_symbols = read_elf_symbols(m->path, m);
}

// The symbol covering runtime address pc in `m`, or nullptr.
const SymEntry* lookup(const Symbolizer::Module& m, uint64_t pc) {
    if (pc < m.bias) return nullptr;
    const uint64_t v = pc - m.bias;
    auto it = std::upper_bound(m.syms.begin(), m.syms.end(), v,
                               [](uint64_t x, const SymEntry& s) { return x < s.value; });
    // Look back a few entries: an earlier, larger symbol may enclose pc past a smaller one.
    for (int back = 0; back < 8 && it != m.syms.begin(); ++back) {
        --it;
        if (v < it->value + it->size) return &*it;
    }
    return nullptr;
}

struct ScanState {
    std::vector<std::unique_ptr<Symbolizer::Module>>* out;
    uint64_t adds = 0;
    uint64_t subs = 0;
    bool first = true;
};

int scan_module(dl_phdr_info* info, size_t size, void* data) {
    ScanState* st = static_cast<ScanState*>(data);
    try {
        if (st->first && size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
            st->adds = info->dlpi_adds;
            st->subs = info->dlpi_subs;
        }
        const bool is_main = st->first;
        st->first = false;
        std::unique_ptr<Symbolizer::Module> m(new Symbolizer::Module());
        m->bias = info->dlpi_addr;
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
            m->path = info->dlpi_name;
        } else if (is_main) {
            char buf[4096];
            const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
            if (n > 0) m->path.assign(buf, static_cast<size_t>(n));
        }
        for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type == PT_LOAD && ph.p_memsz > 0)
                m->loads.emplace_back(m->bias + ph.p_vaddr, m->bias + ph.p_vaddr + ph.p_memsz);
        }
        st->out->push_back(std::move(m));
    } catch (const std::bad_alloc&) {
        return 1;  // no exception may cross dl_iterate_phdr; the list is just shorter
    }
    return 0;
}

}  // namespace

void Symbolizer::rescan_modules() {
    std::vector<std::unique_ptr<Module>> fresh;
    ScanState st;
    st.out = &fresh;
    dl_iterate_phdr(&scan_module, &st);
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
    adds_ = st.adds;
    subs_ = st.subs;
    scanned_ = true;
}

Symbolizer::Module* Symbolizer::module_for(uint64_t pc) {
    for (auto& m : modules_)
        if (m->contains(pc)) return m.get();
    // Unknown pc: look again only if a module was loaded or unloaded since the last scan
    // (a garbage pc must not cost a rescan each time).
    if (scanned_) {
        ScanState probe;
        std::vector<std::unique_ptr<Module>> none;
        probe.out = &none;
        dl_iterate_phdr(
            [](dl_phdr_info* info, size_t size, void* data) -> int {
                ScanState* s = static_cast<ScanState*>(data);
                if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
                    s->adds = info->dlpi_adds;
                    s->subs = info->dlpi_subs;
                }
                return 1;
            },
            &probe);
        if (probe.adds == adds_ && probe.subs == subs_ && probe.adds != 0) return nullptr;
    }
    rescan_modules();
    for (auto& m : modules_)
        if (m->contains(pc)) return m.get();
    return nullptr;
}

#else  // !__linux__: dladdr only

void Symbolizer::rescan_modules() { scanned_ = true; }
Symbolizer::Module* Symbolizer::module_for(uint64_t) { return nullptr; }

#endif

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
    }
    Dl_info info;
    std::memset(&info, 0, sizeof info);
    if (dladdr(reinterpret_cast<void*>(static_cast<uintptr_t>(pc)), &info) != 0) {
        if (s.library.empty() && info.dli_fname != nullptr) {
            s.library = info.dli_fname;
            s.offset = pc - reinterpret_cast<uintptr_t>(info.dli_fbase);
        }
        if (info.dli_sname != nullptr && info.dli_saddr != nullptr) {
            s.function = demangle_symbol(info.dli_sname);
            s.offset = pc - reinterpret_cast<uintptr_t>(info.dli_saddr);
            s.has_symbol = true;
        }
    }
#if defined(__linux__)
    if (!s.has_symbol && m != nullptr) {
        ensure_symbols(m);
        if (const SymEntry* e = lookup(*m, pc)) {
            s.function = demangle_symbol(m->strtab.c_str() + e->name);
            s.offset = pc - (m->bias + e->value);
            s.has_symbol = true;
        }
    }
#endif
    if (cache_.size() >= kMaxCachedPcs) cache_.clear();
    cache_.emplace(pc, s);
    *out = std::move(s);
    return out->has_symbol;
}

Error Symbolizer::find_functions(uint64_t addr_in_module, const char* name,
                                 std::vector<FunctionRange>* out) {
#if defined(__linux__)
    Module* m = module_for(addr_in_module);
    if (m == nullptr) return Error::value("symbolizer: address is in no loaded module");
    ensure_symbols(m);
    if (!m->has_symbols) return Error::runtime("symbolizer: module has no readable symbol table");
    const size_t n = std::strlen(name);
    for (const SymEntry& e : m->syms) {
        const char* s = m->strtab.c_str() + e.name;
        if (std::strncmp(s, name, n) != 0 || (s[n] != '\0' && s[n] != '.')) continue;
        FunctionRange r;
        r.lo = m->bias + e.value;
        r.hi = r.lo + e.size;
        r.name = s;
        out->push_back(std::move(r));
    }
    return Error::none();
#else
    (void)addr_in_module;
    (void)name;
    (void)out;
    return Error::not_implemented("symbolizer: symbol tables are only read on Linux");
#endif
}

}  // namespace spprof
