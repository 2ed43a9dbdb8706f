// platform/os_threads_linux.cpp: the process's OS threads as the kernel lists them
// (/proc/self/task): every thread, with or without a Python thread state, its start time,
// whether it blocks a signal, and the stack of a thread known only by its tid (platform.h,
// "the process's OS threads"). Linux only. Normal context: these read files and allocate.
#if defined(__linux__)

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "platform/platform.h"
#include "platform/proc_task_files.h"

namespace spprof {
namespace {

// Reads /proc/self/task/<tid>/<leaf> into buf (NUL-terminated). Returns the length, or -1.
ssize_t read_task_file(uint64_t tid, const char* leaf, char* buf, size_t len) {
    char path[80];
    std::snprintf(path, sizeof path, "/proc/self/task/%llu/%s", static_cast<unsigned long long>(tid), leaf);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t total = 0;
    while (static_cast<size_t>(total) + 1 < len) {
        const ssize_t n = read(fd, buf + total, len - 1 - static_cast<size_t>(total));
        if (n <= 0) break;
        total += n;
    }
    close(fd);
    if (total <= 0) return -1;
    buf[total] = '\0';
    return total;
}

}  // namespace

const char* platform_os_threads_source() { return "proc"; }

bool platform_os_threads(std::vector<OsThread>* out) {
    out->clear();
    // Through the directory descriptor the session holds (proc_task_files.h); outside a
    // session, the old way.
    std::vector<uint64_t> tids;
    const int held = proc_task_list(&tids);
    if (held < 0) return false;  // the program took our descriptors: no opening behind its back
    if (held > 0) {
        out->reserve(tids.size());
        for (uint64_t tid : tids) {
            OsThread t;
            t.tid = tid;
            out->push_back(t);
        }
        return true;
    }
    DIR* dir = opendir("/proc/self/task");
    if (dir == nullptr) return false;
    while (const struct dirent* e = readdir(dir)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        OsThread t;
        t.tid = std::strtoull(e->d_name, nullptr, 10);
        if (t.tid != 0) out->push_back(t);
    }
    closedir(dir);
    return true;
}

uint64_t platform_thread_start_ticks(uint64_t tid) {
    char buf[1024];
    const ssize_t held = proc_task_stat(tid, buf, sizeof buf);
    if (held == -1 || held == -3 || (held == -2 && read_task_file(tid, "stat", buf, sizeof buf) < 0)) return 0;
    // "tid (comm) S ppid ...": comm may hold spaces and parentheses; fields count from the
    // state (field 3) after the last ')'. starttime is field 22.
    const char* p = std::strrchr(buf, ')');
    if (p == nullptr) return 0;
    ++p;
    for (int field = 3; field <= 22; ++field) {
        while (*p == ' ') ++p;
        if (*p == '\0') return 0;
        if (field == 22) return std::strtoull(p, nullptr, 10);
        while (*p != ' ' && *p != '\0') ++p;
    }
    return 0;
}

bool platform_thread_exists(uint64_t tid) {
    if (tid == 0) return false;
    const int saved = errno;
    const long r = syscall(SYS_tgkill, static_cast<long>(getpid()), static_cast<long>(tid), 0L);
    const bool exists = r == 0 || errno == EPERM;
    errno = saved;
    return exists;
}

int platform_thread_blocks_signal(uint64_t tid, int signo) {
    if (signo <= 0 || signo > 64) return -1;
    char buf[2048];
    if (read_task_file(tid, "status", buf, sizeof buf) < 0) return -1;
    const char* line = std::strstr(buf, "\nSigBlk:");
    if (line == nullptr) return -1;
    const unsigned long long mask = std::strtoull(line + 8, nullptr, 16);
    return (mask >> (signo - 1)) & 1u ? 1 : 0;
}

bool platform_thread_stack_bounds_by_tid(uint64_t tid, uintptr_t* lo, uintptr_t* hi) {
    *lo = 0;
    *hi = 0;
    // "nr a1 .. a6 sp pc" while in a system call, "-1 sp pc" while blocked otherwise,
    // "running" while on a CPU (then the stack pointer is not known: try again later).
    char buf[256];
    if (read_task_file(tid, "syscall", buf, sizeof buf) < 0 || std::strncmp(buf, "running", 7) == 0) return false;
    const char* tokens[10] = {};
    int n = 0;
    for (char* save = nullptr, *tok = strtok_r(buf, " \n", &save); tok != nullptr && n < 10;
         tok = strtok_r(nullptr, " \n", &save))
        tokens[n++] = tok;
    if (n < 3) return false;
    const uintptr_t sp = static_cast<uintptr_t>(std::strtoull(tokens[n - 2], nullptr, 16));
    if (sp == 0) return false;
    FILE* maps = std::fopen("/proc/self/maps", "re");
    if (maps == nullptr) return false;
    char line[512];
    bool found = false;
    while (std::fgets(line, sizeof line, maps) != nullptr) {
        char* end = nullptr;
        const uintptr_t start = static_cast<uintptr_t>(std::strtoull(line, &end, 16));
        if (end == nullptr || *end != '-') continue;
        const uintptr_t stop = static_cast<uintptr_t>(std::strtoull(end + 1, nullptr, 16));
        if (sp >= start && sp < stop) {
            *lo = start;
            *hi = stop;
            found = true;
            break;
        }
    }
    std::fclose(maps);
    return found;
}

}  // namespace spprof

#endif  // __linux__
