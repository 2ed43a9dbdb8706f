// held_fd.cpp: descriptors kept above the program's numbers, proven ours before use (held_fd.h).
#include "held_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

namespace spprof {
namespace {

constexpr int kFloor = 512;

std::atomic<uint64_t> g_open{0};
std::atomic<uint64_t> g_lost{0};

int compute_floor() {
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= 2 * kFloor)
        return kFloor;
    // A low limit (256 is macOS's default): the upper half, still far from 0, 1, 2, 3...
    return static_cast<int>(lim.rlim_cur / 2);
}

}  // namespace

int held_fd_floor() {
    static const int floor = compute_floor();
    return floor;
}

uint64_t held_fds_open() { return g_open.load(std::memory_order_relaxed); }
uint64_t held_fds_lost() { return g_lost.load(std::memory_order_relaxed); }
void held_fds_reset_lost() { g_lost.store(0, std::memory_order_relaxed); }

Error HeldFd::adopt(int fd, HeldFd* out) {
    out->reset();
    if (fd < 0) return Error::os("no descriptor to hold", EBADF);
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, held_fd_floor());
    const int dup_errno = errno;
    close(fd);
    if (high < 0) return Error::os("could not move a descriptor above the program's numbers", dup_errno);
    struct stat st;
    if (fstat(high, &st) != 0) {
        const int e = errno;
        close(high);
        return Error::os("could not identify a held descriptor", e);
    }
    out->fd_ = high;
    out->dev_ = st.st_dev;
    out->ino_ = st.st_ino;
    g_open.fetch_add(1, std::memory_order_relaxed);
    return Error::none();
}

bool HeldFd::ours() const {
    if (fd_ < 0) return false;
    struct stat st;
    return fstat(fd_, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

void HeldFd::forget_lost() {
    fd_ = -1;
    g_open.fetch_sub(1, std::memory_order_relaxed);
    g_lost.fetch_add(1, std::memory_order_relaxed);
}

int HeldFd::get() {
    if (fd_ < 0) return -1;
    if (!ours()) {
        forget_lost();
        return -1;
    }
    return fd_;
}

void HeldFd::reset() {
    if (fd_ < 0) return;
    if (!ours()) {
        forget_lost();
        return;
    }
    close(fd_);
    fd_ = -1;
    g_open.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace spprof
