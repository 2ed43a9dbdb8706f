// platform/proc_task_files_linux.cpp: the /proc descriptors a session keeps (proc_task_files.h).
//
// Before, every census tick and every thread scan opened and closed /proc files from spprof's
// threads, taking the lowest free descriptor at moments the program cannot foresee (a program
// that closes fd 2 and reopens it got another number, or EBUSY from dup2). Now the directory is
// opened in start() and a thread's stat file once per thread, each moved above the floor at
// once; reads are pread/getdents64 on those. The per-thread descriptors are bounded
// (kMaxThreadFds, and a quarter of the room between the floor and the soft RLIMIT_NOFILE);
// reads past that bound open the file as before and are counted.
#if defined(__linux__)

#include "platform/proc_task_files.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "held_fd.h"
#include "platform/dir_numbers_linux.h"
#include "platform/platform.h"

namespace spprof {
namespace {

constexpr size_t kMaxThreadFds = 4096;

struct TaskFiles {
    std::mutex mutex;
    pid_t owner = 0;  // the process that opened them; a forked child does not use its parent's
    HeldFd dir;
    std::unordered_map<uint64_t, HeldFd> stat_by_tid;
    size_t budget = 0;
    // One of them turned out to be the program's (it closed or reused the number): no more
    // /proc reads this session, by held descriptor or otherwise (reopening would be exactly
    // the open behind the program's back this file exists to avoid).
    bool lost = false;
};

// The session's, in the program's descriptor table.
TaskFiles& shared_files() {
    static TaskFiles* f = new TaskFiles;  // never destroyed: a late reader must find it
    return *f;
}

// A thread with a descriptor table of its own (fd_table_linux.cpp) reads through descriptors
// in that table: those in the program's are not its to use (the numbers name other files there).
thread_local std::unique_ptr<TaskFiles> t_own_table_files;

TaskFiles& files() { return t_own_table_files ? *t_own_table_files : shared_files(); }

std::atomic<uint64_t> g_over_budget{0};
std::atomic<uint64_t> g_thread_fds_opened{0};

// A fork while a spprof thread holds the mutex must not leave it held in the child. (A
// thread's own table's files are its alone, and spprof's threads are stopped across a fork.)
void fork_prepare() { shared_files().mutex.lock(); }
void fork_release() { shared_files().mutex.unlock(); }

size_t thread_fd_budget() {
    struct rlimit lim;
    const int floor = held_fd_floor();
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return kMaxThreadFds;
    if (lim.rlim_cur <= static_cast<rlim_t>(floor)) return 0;
    const size_t room = static_cast<size_t>(lim.rlim_cur) - static_cast<size_t>(floor);
    return room / 4 < kMaxThreadFds ? room / 4 : kMaxThreadFds;
}

bool usable(const TaskFiles& f) { return f.owner == getpid() && (f.lost || !f.dir.empty()); }

void mark_lost(TaskFiles& f) {
    f.lost = true;
    f.stat_by_tid.clear();  // each closed only when still ours (HeldFd)
    f.dir.reset();
}

}  // namespace

Error platform_proc_files_open() {
    static bool atfork = false;
    TaskFiles& f = files();
    if (!atfork) {
        if (pthread_atfork(&fork_prepare, &fork_release, &fork_release) != 0)
            return Error::runtime("could not register the /proc descriptors' fork hook");
        atfork = true;
    }
    std::lock_guard<std::mutex> lock(f.mutex);
    held_fds_reset_lost();  // the count the session reports is its own
    f.stat_by_tid.clear();  // a forked child's copies, or a session that did not close them
    f.dir.reset();
    HeldFd dir;
    const Error e = HeldFd::adopt(open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC), &dir);
    if (!e.ok()) return e;
    f.dir = std::move(dir);
    f.owner = getpid();
    f.lost = false;
    f.budget = thread_fd_budget();
    return Error::none();
}

void proc_task_files_enter_own_table() {
    auto f = std::make_unique<TaskFiles>();
    HeldFd dir;
    // Out of the program's table: no number of the program's is taken, none can be lost.
    if (HeldFd::adopt(open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC), &dir).ok()) {
        f->dir = std::move(dir);
        f->owner = getpid();
        f->budget = thread_fd_budget();
    }
    t_own_table_files = std::move(f);
}

void proc_task_files_leave_own_table() { t_own_table_files.reset(); }

void platform_proc_files_close() {
    TaskFiles& f = files();
    std::lock_guard<std::mutex> lock(f.mutex);
    f.stat_by_tid.clear();
    f.dir.reset();
    f.owner = 0;
    f.lost = false;
}

bool proc_task_files_lost() {
    TaskFiles& f = files();
    std::lock_guard<std::mutex> lock(f.mutex);
    return f.lost;
}

uint64_t platform_proc_files_over_budget() { return g_over_budget.load(std::memory_order_relaxed); }
uint64_t platform_proc_thread_fds_opened() { return g_thread_fds_opened.load(std::memory_order_relaxed); }

namespace {

// The tids /proc/self/task lists now, through f's directory; the per-thread descriptors of
// threads no longer listed are closed. f's mutex held. False when the list failed.
bool list_and_prune(TaskFiles& f, std::vector<uint64_t>* tids) {
    tids->clear();
    const int fd = f.dir.get();
    if (fd < 0) {
        mark_lost(f);
        return false;
    }
    if (!list_dir_numbers(fd, tids)) return false;
    tids->erase(std::remove(tids->begin(), tids->end(), uint64_t{0}), tids->end());
    // Threads gone from the list: their descriptors go (closed only when still ours).
    std::sort(tids->begin(), tids->end());
    for (auto it = f.stat_by_tid.begin(); it != f.stat_by_tid.end();)
        it = std::binary_search(tids->begin(), tids->end(), it->first) ? std::next(it) : f.stat_by_tid.erase(it);
    return true;
}

}  // namespace

int proc_task_list(std::vector<uint64_t>* tids) {
    tids->clear();
    TaskFiles& f = files();
    std::lock_guard<std::mutex> lock(f.mutex);
    if (!usable(f)) return 0;
    if (f.lost) return -1;
    return list_and_prune(f, tids) ? 1 : -1;
}

ssize_t proc_task_stat(uint64_t tid, char* buf, size_t len) {
    if (len == 0) return -1;
    TaskFiles& f = files();
    std::lock_guard<std::mutex> lock(f.mutex);
    if (!usable(f)) return -2;
    if (f.lost) return -3;
    for (int attempt = 0; attempt < 2; ++attempt) {
        auto it = f.stat_by_tid.find(tid);
        if (it == f.stat_by_tid.end()) {
            if (f.stat_by_tid.size() >= f.budget && t_own_table_files.get() == &f) {
                // A thread's own table has no scan to close the descriptors of threads that
                // ended (the session's scan prunes the session's): pruned here, when full.
                std::vector<uint64_t> listed;
                list_and_prune(f, &listed);
            }
            if (f.stat_by_tid.size() >= f.budget) {
                g_over_budget.fetch_add(1, std::memory_order_relaxed);
                return -2;
            }
            const int dir = f.dir.get();
            if (dir < 0) {
                mark_lost(f);
                return -3;
            }
            char leaf[40];
            std::snprintf(leaf, sizeof leaf, "%llu/stat", static_cast<unsigned long long>(tid));
            const int raw = openat(dir, leaf, O_RDONLY | O_CLOEXEC);
            if (raw < 0) return -1;  // gone
            HeldFd held;
            if (!HeldFd::adopt(raw, &held).ok()) return -2;
            g_thread_fds_opened.fetch_add(1, std::memory_order_relaxed);
            it = f.stat_by_tid.emplace(tid, std::move(held)).first;
        }
        const int fd = it->second.get();
        if (fd < 0) {
            mark_lost(f);
            return -3;
        }
        const ssize_t n = pread(fd, buf, len - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            return n;
        }
        // The thread ended (ESRCH): a thread with this tid may be a new one, opened once.
        f.stat_by_tid.erase(it);
    }
    return -1;
}

}  // namespace spprof

#endif  // __linux__
