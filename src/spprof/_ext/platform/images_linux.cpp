// platform/images_linux.cpp: loaded images over dl_iterate_phdr, ELF function symbols (their
// names mapped from the file: SymbolNames), and the extent of a function from its dynamic
// symbol (see images.h and platform.h). Linux only.
#if defined(__linux__)

#include "platform/images.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

#include "platform/platform.h"

namespace spprof {
namespace {

// dl_phdr_info grew dlpi_adds/dlpi_subs in glibc 2.4; `size` says whether this one has them.
bool has_counters(size_t size) {
    return size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(dl_phdr_info::dlpi_subs);
}

struct Iteration {
    ImageVisitor visit = nullptr;
    void* data = nullptr;
    ImageListVersion version;
    bool first = true;
};

int visit_one(dl_phdr_info* info, size_t size, void* arg) {
    Iteration* it = static_cast<Iteration*>(arg);
    const bool is_main = it->first;
    if (it->first) {
        it->first = false;
        if (has_counters(size)) {
            it->version.adds = info->dlpi_adds;
            it->version.subs = info->dlpi_subs;
            it->version.known = true;
        }
        if (it->visit == nullptr) return 1;  // only the counts were wanted
    }
    LoadedImage img;
    img.bias = info->dlpi_addr;
    // The executable has no name in the loader's list: its path is /proc/self/exe's target.
    char exe[4096];
    if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
        img.path = info->dlpi_name;
    } else if (is_main) {
        const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            img.path = exe;
        }
    }
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_GNU_EH_FRAME) img.eh_frame_hdr = img.bias + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && ph.p_memsz > 0 && img.segment_count < kMaxImageSegments) {
            ImageSegment& s = img.segments[img.segment_count++];
            s.lo = img.bias + ph.p_vaddr;
            s.hi = s.lo + ph.p_memsz;
            s.exec = (ph.p_flags & PF_X) != 0;
        }
    }
    return it->visit(img, it->data) ? 0 : 1;
}

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

// The string table [off, off + size) of the file, mapped read-only (images.h, SymbolNames):
// false when it cannot be (then it is copied). The file must hold the whole table now: a
// mapping past the end of the file would fault on first touch.
bool map_names(int fd, uint64_t off, uint64_t size, SymbolNames* out) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || off + size > static_cast<uint64_t>(st.st_size)) return false;
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t start = off & ~(page - 1);
    const size_t len = static_cast<size_t>(off - start + size);
    void* base = mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(start));
    if (base == MAP_FAILED) return false;
    const char* data = static_cast<const char*>(base) + (off - start);
    char last = 1;
    if (!platform_read_no_fault(reinterpret_cast<uintptr_t>(data + size - 1), &last, 1) || last != '\0') {
        munmap(base, len);  // a table whose last name does not end inside it: the copy mends it
        return false;
    }
    // Read ahead into the page cache now, on the reading thread: the names a lookup touches
    // later (the drain, with the GIL) are then minor faults, not disk reads.
    madvise(base, len, MADV_WILLNEED);
    std::shared_ptr<const char> owner(static_cast<const char*>(base),
                                      [len](const char* p) { munmap(const_cast<char*>(p), len); });
    *out = SymbolNames(std::move(owner), data, static_cast<size_t>(size), true);
    return true;
}

// The string table read into memory of its own (where it cannot be mapped).
bool copy_names(int fd, uint64_t off, uint64_t size, SymbolNames* out) {
    std::shared_ptr<char> copy(new char[size], std::default_delete<char[]>());
    if (!pread_all(fd, copy.get(), static_cast<size_t>(size), off)) return false;
    copy.get()[size - 1] = '\0';  // every name ends inside the table
    const char* data = copy.get();
    *out = SymbolNames(std::shared_ptr<const char>(std::move(copy)), data, static_cast<size_t>(size), false);
    return true;
}

// Owns an open file descriptor.
class ScopedFd {
public:
    explicit ScopedFd(int fd) : fd_(fd) {}
    ~ScopedFd() {
        if (fd_ >= 0) close(fd_);
    }
    ScopedFd(const ScopedFd&) = delete;
    ScopedFd& operator=(const ScopedFd&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

// Opens the ELF64 file at `path` and reads its header into `eh`: the descriptor, or -1 for
// anything else (no path, the vDSO, not ELF64, unreadable).
int open_elf64(const char* path, Elf64_Ehdr* eh) {
    if (path == nullptr || path[0] == '\0' || std::strncmp(path, "linux-vdso", 10) == 0) return -1;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (!pread_all(fd, eh, sizeof *eh, 0) || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64) {
        close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

Error platform_for_each_image(ImageVisitor visit, void* data, ImageListVersion* version) {
    Iteration it;
    it.visit = visit;
    it.data = data;
    dl_iterate_phdr(&visit_one, &it);
    if (version != nullptr) *version = it.version;
    return Error::none();
}

bool platform_image_list_version(ImageListVersion* out) {
    Iteration it;
    dl_iterate_phdr(&visit_one, &it);
    *out = it.version;
    return true;
}

bool platform_read_function_symbols(const char* path, ImageSymbols* out) {
    Elf64_Ehdr eh;
    ScopedFd file(open_elf64(path, &eh));
    const int fd = file.get();
    if (fd < 0) return false;
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
    SymbolNames names;
    if (!map_names(fd, strsec.sh_offset, strsec.sh_size, &names) &&
        !copy_names(fd, strsec.sh_offset, strsec.sh_size, &names))
        return false;
    std::vector<ImageSymbol> syms;
    syms.reserve(raw.size() / 2);
    for (const Elf64_Sym& s : raw) {
        const unsigned type = ELF64_ST_TYPE(s.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF ||
            s.st_value == 0 || s.st_size == 0 || s.st_name >= names.size())
            continue;
        syms.push_back(ImageSymbol{s.st_value, s.st_size, s.st_name});
    }
    std::sort(syms.begin(), syms.end(), [](const ImageSymbol& a, const ImageSymbol& b) {
        return a.value != b.value ? a.value < b.value : a.size > b.size;
    });
    out->syms.swap(syms);
    out->names = std::move(names);
    return true;
}

bool platform_read_function_starts(const char* path, std::vector<uint64_t>* out) {
    Elf64_Ehdr eh;
    ScopedFd file(open_elf64(path, &eh));
    const int fd = file.get();
    if (fd < 0) return false;
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 4096) return false;
    std::vector<Elf64_Phdr> ph(eh.e_phnum);
    if (!pread_all(fd, ph.data(), ph.size() * sizeof(Elf64_Phdr), eh.e_phoff)) return false;
    const Elf64_Phdr* hdr = nullptr;
    for (const Elf64_Phdr& p : ph)
        if (p.p_type == PT_GNU_EH_FRAME) hdr = &p;
    if (hdr == nullptr || hdr->p_filesz < 12) return false;
    // version 1; eh_frame_ptr as a 4-byte value; fde_count udata4; table datarel|sdata4
    // (DW_EH_PE 0x3b): the header every ELF linker writes (unwind/eh_frame.h).
    uint8_t head[12];
    if (!pread_all(fd, head, sizeof head, hdr->p_offset)) return false;
    const uint8_t ptr_size = head[1] & 0x0f;  // udata4 (0x03) or sdata4 (0x0b)
    if (head[0] != 1 || head[1] == 0xff || (ptr_size != 0x03 && ptr_size != 0x0b) || head[2] != 0x03 ||
        head[3] != 0x3b)
        return false;
    uint32_t count = 0;
    std::memcpy(&count, head + 8, 4);
    const uint64_t bytes = uint64_t{count} * 8;
    if (count == 0 || bytes > kMaxTableBytes || 12 + bytes > hdr->p_filesz) return false;
    std::vector<int32_t> table(size_t{count} * 2);
    if (!pread_all(fd, table.data(), bytes, hdr->p_offset + 12)) return false;
    std::vector<uint64_t> starts;
    starts.reserve(count);
    for (uint32_t i = 0; i < count; ++i)
        starts.push_back(hdr->p_vaddr + static_cast<uint64_t>(int64_t{table[size_t{i} * 2]}));
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    out->swap(starts);
    return true;
}

bool platform_function_extent(const void* addr, uint64_t* lo, uint64_t* hi) {
    Dl_info info;
    void* extra = nullptr;  // dladdr1 stores a const ElfW(Sym)* here
    if (dladdr1(addr, &info, &extra, RTLD_DL_SYMENT) == 0 || info.dli_saddr == nullptr) return false;
    const auto* sym = static_cast<const ElfW(Sym)*>(extra);
    if (sym == nullptr || sym->st_size == 0) return false;
    *lo = reinterpret_cast<uintptr_t>(info.dli_saddr);
    *hi = *lo + sym->st_size;
    return true;
}

}  // namespace spprof

#endif  // __linux__
