// held_fd.h: a file descriptor spprof keeps for a session, out of the program's way.
//
// Descriptor numbers are the program's: it closes ranges (os.closerange(3, ...)), expects
// open() to return the lowest free number, dup2()s over numbers it knows. So a descriptor
// spprof keeps is moved at once, with F_DUPFD_CLOEXEC, to held_fd_floor() or above (never the
// low numbers programs reuse), and its identity (st_dev, st_ino, kept when it is made) is
// proven before every use, close included. One that is no longer ours (the program closed it
// and the number now names something else) is forgotten, never read and never closed, and
// counted (held_fds_lost(); the summary says so). docs/reliability.md, "File descriptors".
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "error.h"

namespace spprof {

// The lowest number a held descriptor takes: 512, or half the soft RLIMIT_NOFILE when that is
// below 1024 (read once). Any thread.
int held_fd_floor();

// Descriptors held now, and held ones found to be the program's since the last
// held_fds_reset_lost() (a session's start). Any thread.
uint64_t held_fds_open();
uint64_t held_fds_lost();
void held_fds_reset_lost();

class HeldFd {
   public:
    HeldFd() = default;
    // Takes `fd` (just opened by the caller), moves it to held_fd_floor() or above with
    // FD_CLOEXEC and closes the original number. On failure `fd` is closed and *out is empty.
    static Error adopt(int fd, HeldFd* out);

    ~HeldFd() { reset(); }
    HeldFd(HeldFd&& other) noexcept { take(other); }
    HeldFd& operator=(HeldFd&& other) noexcept {
        if (this != &other) {
            reset();
            take(other);
        }
        return *this;
    }
    HeldFd(const HeldFd&) = delete;
    HeldFd& operator=(const HeldFd&) = delete;

    // The number when it still names what we made, else -1: then it is forgotten (counted
    // once in held_fds_lost) and never closed by us.
    int get();
    // Still ours? No change, no count. SIGNAL-SAFE (fstat only).
    bool ours() const;
    bool empty() const { return fd_ < 0; }
    // Closes it when it is still ours; forgets it (counted) when it is not.
    void reset();

   private:
    void take(HeldFd& other) {
        fd_ = other.fd_;
        dev_ = other.dev_;
        ino_ = other.ino_;
        other.fd_ = -1;
    }
    void forget_lost();

    int fd_ = -1;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
};

}  // namespace spprof
