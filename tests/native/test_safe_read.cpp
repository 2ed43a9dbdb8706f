// test_safe_read.cpp: platform_read_no_fault (platform/safe_read_linux.cpp) where a sandbox
// refuses process_vm_readv: the pipe fallback reads good memory and refuses bad, on the main
// thread and on a thread with a descriptor table of its own (its pipe must be its own: the
// other thread's numbers name nothing there). Run in a forked child under a seccomp filter.
#if defined(__linux__)

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "harness.h"
#include "platform/platform.h"

namespace {

// process_vm_readv fails with EPERM from here on, as under a seccomp profile without it.
bool refuse_process_vm_readv() {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// Good memory read back, unmapped memory refused.
bool reads_right() {
    static const uint64_t value = 0x5350'5052'4f46'0001ull;
    uint64_t got = 0;
    if (!spprof::platform_read_no_fault(reinterpret_cast<uintptr_t>(&value), &got, sizeof got) || got != value)
        return false;
    return !spprof::platform_read_no_fault(0x10, &got, sizeof got);
}

}  // namespace

TEST(safe_read_falls_back_to_each_threads_own_pipe_under_a_sandbox) {
    const pid_t child = fork();
    if (child == 0) {
        if (!refuse_process_vm_readv()) _exit(3);
        int code = reads_right() ? 0 : 1;  // the main thread's pipe made
        std::thread t([&] {
            spprof::platform_own_fd_table_enter();
            if (!reads_right()) code = 2;  // its own pipe, in its own table
            spprof::platform_own_fd_table_leave();
        });
        t.join();
        if (code == 0 && !reads_right()) code = 4;  // the main thread's still works
        // A read that runs into an unmapped page: refused, and nothing of the part before it is
        // left in the pipe for the next read to take as its own.
        const long page = sysconf(_SC_PAGESIZE);
        auto* two = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        std::memset(two, 0x77, page);
        munmap(two + page, page);
        std::vector<char> buf(2 * page);
        if (code == 0 && spprof::platform_read_no_fault(reinterpret_cast<uintptr_t>(two + 100), buf.data(), static_cast<size_t>(page)))
            code = 5;
        if (code == 0 && !reads_right()) code = 6;
        _exit(code);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        std::fprintf(stderr, "  skipped: no seccomp filter here (qemu-user)\n");
        return;
    }
    CHECK_EQ(WEXITSTATUS(status), 0);
}

#endif  // __linux__
