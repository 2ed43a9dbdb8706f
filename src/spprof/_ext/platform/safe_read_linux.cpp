// platform/safe_read_linux.cpp: platform_read_no_fault on Linux (platform.h).
//
// process_vm_readv on ourselves reports EFAULT for memory that is unmapped, or a file mapping
// past its file's end, instead of faulting. Where a sandbox refuses it (EPERM, ENOSYS), write()
// into a pipe makes the same check (EFAULT), then the bytes are read back. The pipe is each
// calling thread's own: the drain, the wall census and the program's threads in the resolver
// may read at once, and the census keeps a descriptor table of its own (fd_table_linux.cpp),
// where the others' numbers name nothing.
#if defined(__linux__)

#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "../held_fd.h"
#include "../log.h"
#include "platform/platform.h"

namespace spprof {
namespace {

std::atomic<bool> g_use_pipe{false};

// The calling thread's pipe: made on its first use, moved above the program's numbers and
// proven ours before each use (held_fd.h); closed when the thread ends.
struct ProbePipe {
    HeldFd r, w;
};
thread_local ProbePipe t_pipe;

}  // namespace

bool platform_read_no_fault(uintptr_t addr, void* out, size_t n) {
    if (!g_use_pipe.load(std::memory_order_relaxed)) {
        struct iovec local = {out, n};
        struct iovec remote = {reinterpret_cast<void*>(addr), n};
        const ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (r == static_cast<ssize_t>(n)) return true;
        if (r < 0 && errno != ENOSYS && errno != EPERM) return false;
        if (!g_use_pipe.exchange(true, std::memory_order_relaxed))
            log_debug("process_vm_readv unavailable (%s): validating pointers through a pipe", std::strerror(errno));
    }
    ProbePipe& p = t_pipe;
    if (p.r.empty() || p.w.empty()) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
        if (!HeldFd::adopt(fds[0], &p.r).ok() || !HeldFd::adopt(fds[1], &p.w).ok()) {
            p.r.reset();
            p.w.reset();
            return false;
        }
    }
    const int r = p.r.get(), w = p.w.get();
    if (r < 0 || w < 0) return false;
    // In pieces well inside the pipe's capacity; a write cut short by a bad page leaves the
    // bytes before it in the pipe, which are read away so the next read starts clean.
    auto* dst = static_cast<char*>(out);
    for (size_t done = 0; done < n;) {
        const size_t piece = n - done < 4096 ? n - done : 4096;
        const ssize_t wrote = write(w, reinterpret_cast<const void*>(addr + done), piece);
        if (wrote != static_cast<ssize_t>(piece)) {
            char sink[4096];
            while (read(r, sink, sizeof sink) > 0) {
            }
            return false;
        }
        if (read(r, dst + done, piece) != static_cast<ssize_t>(piece)) return false;
        done += piece;
    }
    return true;
}

}  // namespace spprof

#endif  // __linux__
