// platform/dir_numbers_linux.h: the numbered entries of a /proc directory (Linux only).
// /proc/self/task lists thread ids, /proc/thread-self/fd descriptor numbers: both are read
// through a descriptor the caller holds, with getdents64 (glibc before 2.30 has no wrapper).
// Normal context (allocates).
#pragma once

#if defined(__linux__)

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace spprof {

// Every entry of the directory `dir` whose name is a number, from its start, into *out.
// False when the directory could not be read to its end.
inline bool list_dir_numbers(int dir, std::vector<uint64_t>* out) {
    struct Dirent64 {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[1];
    };
    out->clear();
    if (lseek(dir, 0, SEEK_SET) != 0) return false;
    alignas(8) char buf[16384];
    for (;;) {
        const long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
        if (n < 0) return false;
        if (n == 0) return true;
        for (long off = 0; off < n;) {
            const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
            if (d->d_reclen == 0) break;
            off += d->d_reclen;
            if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
            out->push_back(std::strtoull(d->d_name, nullptr, 10));
        }
    }
}

}  // namespace spprof

#endif  // __linux__
