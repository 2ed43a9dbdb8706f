// test_fd_table.cpp: a descriptor table of a spprof thread's own (platform.h,
// platform_own_fd_table_enter): what the thread opens takes none of the program's numbers,
// the program's descriptors are not kept alive by the thread's copies (a pipe's EOF, a lock),
// and its /proc reads go through descriptors outside the program's table.
#if defined(__linux__)

#include <dirent.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "harness.h"
#include "platform/platform.h"
#include "platform/proc_task_files.h"

namespace {

int open_null() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

// The lowest number free in the caller's table now.
int lowest_free() {
    const int fd = open_null();
    if (fd >= 0) close(fd);
    return fd;
}

// Entries of the process's table (/proc/self/fd lists the thread group leader's, the
// program's), not counting the one that lists them.
int program_fds() {
    DIR* d = opendir("/proc/self/fd");
    if (d == nullptr) return -1;
    int n = 0;
    while (const dirent* e = readdir(d))
        if (e->d_name[0] != '.') ++n;
    closedir(d);
    return n - 1;
}

// Whether a thread may take a table of its own here: Docker's default seccomp profile refuses
// unshare() without CAP_SYS_ADMIN (spprof then opens in the program's table, as before).
bool own_tables_allowed() {
    static const int err = [] {
        int e = 0;
        std::thread t([&] { e = unshare(CLONE_FILES) == 0 ? 0 : errno; });
        t.join();
        return e;
    }();
    if (err != 0) std::fprintf(stderr, "  skipped: unshare(CLONE_FILES) refused: %s\n", std::strerror(err));
    return err == 0;
}

void wait_for(const std::atomic<int>& step, int value) {
    while (step.load() < value) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace

TEST(fd_table_own_opens_take_no_number_of_the_programs) {
    if (!own_tables_allowed()) return;
    const int program = open_null();  // one of the program's, open before the thread leaves
    CHECK(program >= 0);
    const int before = lowest_free();
    std::atomic<int> step{0};
    bool entered = false, program_fd_seen = true;
    int thread_fd = -1;
    std::thread t([&] {
        entered = spprof::platform_own_fd_table_enter();
        program_fd_seen = fcntl(program, F_GETFD) >= 0;  // a copy would still be open here
        thread_fd = open_null();  // held while the program opens
        step = 1;
        wait_for(step, 2);
        close(thread_fd);
        spprof::platform_own_fd_table_leave();
    });
    wait_for(step, 1);
    // The program's lowest free number is what it was: the thread's open took none of it.
    const int mine = open_null();
    CHECK_EQ(mine, before);
    close(mine);
    step = 2;
    t.join();
    CHECK(entered);
    CHECK(!program_fd_seen);
    CHECK_EQ(thread_fd, 0);  // its table was empty: its first open is 0, apart from the program's 0
    CHECK(fcntl(program, F_GETFD) >= 0);  // the program's own is untouched
    close(program);
    uint64_t made = 0, refused = 0;
    spprof::platform_own_fd_table_counts(&made, &refused);
    CHECK(made >= 1);
}

TEST(fd_table_own_keeps_no_copy_of_a_pipe_the_program_closes) {
    if (!own_tables_allowed()) return;
    // A daemon closes its end of a pipe and its parent waits for EOF: a copy in the thread's
    // table would hold the pipe open for as long as the thread lives.
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
    std::atomic<int> step{0};
    std::thread t([&] {
        spprof::platform_own_fd_table_enter();
        step = 1;
        wait_for(step, 2);
        spprof::platform_own_fd_table_leave();
    });
    wait_for(step, 1);
    close(p[1]);
    char c;
    const ssize_t n = read(p[0], &c, 1);
    CHECK_EQ(n, 0);  // EOF while the thread lives (a copy: -1, EAGAIN)
    step = 2;
    t.join();
    close(p[0]);
}

TEST(fd_table_own_leaves_the_programs_record_locks_held) {
    if (!own_tables_allowed()) return;
    // Closing the thread's copy of a locked file must not drop the program's POSIX lock (Linux
    // keys it by the table that took it).
    char path[] = "/tmp/spprof_fd_table_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    struct flock lk{};
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    CHECK(fcntl(fd, F_SETLK, &lk) == 0);
    std::thread t([] {
        spprof::platform_own_fd_table_enter();
        spprof::platform_own_fd_table_leave();
    });
    t.join();
    const pid_t child = fork();
    if (child == 0) {
        // Another process asks: is the file still locked by the program?
        const int cfd = open(path, O_RDWR);
        struct flock q{};
        q.l_type = F_WRLCK;
        q.l_whence = SEEK_SET;
        _exit(cfd >= 0 && fcntl(cfd, F_GETLK, &q) == 0 && q.l_type == F_WRLCK && q.l_pid == getppid() ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fd);
    unlink(path);
}

TEST(fd_table_own_proc_reads_open_nothing_in_the_programs_table) {
    if (!own_tables_allowed()) return;
    const uint64_t tid = static_cast<uint64_t>(syscall(SYS_gettid));
    std::atomic<int> step{0};
    int before = -1, during = -1;
    ssize_t read_len = -1;
    std::thread t([&] {
        spprof::platform_own_fd_table_enter();
        before = program_fds();
        // The directory (opened on enter) and this thread's stat file, kept in its own table.
        char buf[512];
        read_len = spprof::proc_task_stat(tid, buf, sizeof buf);
        during = program_fds();
        spprof::platform_own_fd_table_leave();
    });
    t.join();
    CHECK(read_len > 0);
    CHECK(before >= 0);
    CHECK_EQ(during, before);
}

#endif  // __linux__
