// platform/images_darwin.cpp: the macOS side of images.h (not enumerated: native unwinding
// tables and symbol tables are Linux-only) and platform_function_extent from the image's
// LC_FUNCTION_STARTS (platform.h). macOS only.
#if defined(__APPLE__)

#include "platform/images.h"

#include <dlfcn.h>
#include <mach-o/loader.h>

#include <cstring>

#include "platform/platform.h"

namespace spprof {

Error platform_for_each_image(ImageVisitor, void*, ImageListVersion* version) {
    if (version != nullptr) *version = ImageListVersion{};
    return Error::not_implemented("native unwinding is only implemented on Linux");
}

bool platform_image_list_version(ImageListVersion* out) {
    *out = ImageListVersion{};
    return false;
}

bool platform_read_function_symbols(const char*, ImageSymbols*) { return false; }

bool platform_read_function_starts(const char*, std::vector<uint64_t>*) { return false; }

bool platform_function_extent(const void* addr, uint64_t* lo, uint64_t* hi) {
    // Mach-O has no symbol sizes; LC_FUNCTION_STARTS lists every function start of the image
    // (ULEB128 deltas from the __TEXT segment), so the next start after ours ends it.
    Dl_info info;
    if (dladdr(addr, &info) == 0 || info.dli_fbase == nullptr || info.dli_saddr == nullptr) return false;
    const auto* header = static_cast<const mach_header_64*>(info.dli_fbase);
    if (header->magic != MH_MAGIC_64) return false;
    const auto* cmd = reinterpret_cast<const load_command*>(header + 1);
    uint64_t text_vmaddr = 0, linkedit_vmaddr = 0, linkedit_fileoff = 0;
    bool have_text = false, have_linkedit = false;
    const linkedit_data_command* starts = nullptr;
    for (uint32_t i = 0; i < header->ncmds && i < 4096; ++i) {
        if (cmd->cmd == LC_SEGMENT_64) {
            const auto* seg = reinterpret_cast<const segment_command_64*>(cmd);
            if (std::strncmp(seg->segname, "__TEXT", sizeof seg->segname) == 0) {
                text_vmaddr = seg->vmaddr;
                have_text = true;
            } else if (std::strncmp(seg->segname, "__LINKEDIT", sizeof seg->segname) == 0) {
                linkedit_vmaddr = seg->vmaddr;
                linkedit_fileoff = seg->fileoff;
                have_linkedit = true;
            }
        } else if (cmd->cmd == LC_FUNCTION_STARTS) {
            starts = reinterpret_cast<const linkedit_data_command*>(cmd);
        }
        cmd = reinterpret_cast<const load_command*>(reinterpret_cast<const char*>(cmd) + cmd->cmdsize);
    }
    if (!have_text || !have_linkedit || starts == nullptr || starts->dataoff < linkedit_fileoff) return false;
    const uintptr_t slide = reinterpret_cast<uintptr_t>(header) - text_vmaddr;
    const auto* p = reinterpret_cast<const uint8_t*>(linkedit_vmaddr + slide + (starts->dataoff - linkedit_fileoff));
    const uint8_t* end = p + starts->datasize;
    const uint64_t target = reinterpret_cast<uintptr_t>(info.dli_saddr) - slide;  // unslid
    uint64_t address = text_vmaddr;
    while (p < end) {
        uint64_t delta = 0;
        unsigned shift = 0;
        while (p < end && shift < 64) {  // ULEB128
            const uint8_t byte = *p++;
            delta |= static_cast<uint64_t>(byte & 0x7f) << shift;
            shift += 7;
            if ((byte & 0x80) == 0) break;
        }
        if (delta == 0) break;  // the list ends with a zero
        address += delta;
        if (address > target) {
            *lo = target + slide;
            *hi = address + slide;
            return true;
        }
    }
    return false;
}}  // namespace spprof

#endif  // __APPLE__
