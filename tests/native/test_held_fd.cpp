// test_held_fd.cpp: HeldFd (held_fd.h): a kept descriptor sits at the floor or above, never on
// the low numbers; a program that closes it and reuses the number keeps its file (we neither
// read nor close it), and the loss is counted.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "harness.h"
#include "held_fd.h"

using spprof::HeldFd;

namespace {

int open_null() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

bool is_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

}  // namespace

TEST(held_fd_moves_above_the_floor_and_frees_the_low_number) {
    const int low = open_null();
    CHECK(low >= 0 && low < spprof::held_fd_floor());
    HeldFd held;
    CHECK(HeldFd::adopt(low, &held).ok());
    const int fd = held.get();
    CHECK(fd >= spprof::held_fd_floor());
    CHECK(!is_open(low));  // the program's number is free again
    CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    const uint64_t open_before = spprof::held_fds_open();
    held.reset();
    CHECK(!is_open(fd));
    CHECK_EQ(spprof::held_fds_open(), open_before - 1);
}

TEST(held_fd_never_closes_what_the_program_put_on_its_number) {
    HeldFd held;
    CHECK(HeldFd::adopt(open_null(), &held).ok());
    const int fd = held.get();
    // The program closes everything and dup2s a file of its own onto that number.
    close(fd);
    char path[] = "/tmp/spprof_held_fd_XXXXXX";
    const int mine = mkstemp(path);
    CHECK(mine >= 0);
    CHECK_EQ(dup2(mine, fd), fd);
    const uint64_t lost_before = spprof::held_fds_lost();
    CHECK(!held.ours());
    CHECK_EQ(held.get(), -1);
    CHECK_EQ(spprof::held_fds_lost(), lost_before + 1);
    held.reset();  // forgotten: no close
    CHECK(is_open(fd));
    CHECK_EQ(write(fd, "x", 1), 1);
    CHECK_EQ(spprof::held_fds_lost(), lost_before + 1);  // counted once
    close(fd);
    close(mine);
    unlink(path);
}

TEST(held_fd_moves_with_its_owner) {
    HeldFd a;
    CHECK(HeldFd::adopt(open_null(), &a).ok());
    const int fd = a.get();
    HeldFd b(std::move(a));
    CHECK(a.empty());
    CHECK_EQ(b.get(), fd);
    {
        HeldFd c;
        c = std::move(b);
        CHECK(b.empty());
    }
    CHECK(!is_open(fd));  // closed once, by the last owner
}

TEST(held_fd_adopt_of_a_bad_descriptor_is_an_error) {
    HeldFd held;
    CHECK(!HeldFd::adopt(-1, &held).ok());
    CHECK(held.empty());
}
