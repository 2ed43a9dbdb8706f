/* native_threads_lib.c: threads without a Python state, for tests/test_native_threads.py.
 *
 * Built by the test with `cc -shared -fPIC -pthread` into a temporary directory and loaded
 * with ctypes. No Python headers: the GILState churn thread calls a ctypes callback, which
 * takes and releases a thread state (PyGILState_Ensure / Release) on every call.
 * Each thread measures its own CPU time with its thread CPU clock (the truth the profile is
 * compared with). One worker of each kind at a time is enough for the tests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile uint64_t sink;

/* Spins for `seconds` of this thread's CPU time. */
static void spin(double seconds) {
    const double end = thread_cpu() + seconds;
    while (thread_cpu() < end)
        for (int i = 0; i < 2000; ++i) sink = sink * 6364136223846793005ull + 1442695040888963407ull;
}

struct worker {
    pthread_t thread;
    char name[16];
    double seconds;      /* CPU time to spend */
    int block_signals;   /* pthread_sigmask(SIG_BLOCK, all) first; 2: only until it starts
                            spinning, waiting in a futex meanwhile (no CPU): what a thread
                            pthread_create made and the scheduler has not run yet looks like */
    void (*callback)(void);  /* churn: called between spins (a ctypes callback) */
    int rounds;
    double cpu;          /* the thread's CPU time, measured by itself at its end */
    long tid;
    volatile int started;
    volatile int go;     /* 0: wait (started, idle) before spinning */
    long eintr;          /* EINTR seen by the wait loop */
};

static struct worker workers[8];

static void* worker_main(void* arg) {
    struct worker* w = arg;
    pthread_setname_np(pthread_self(), w->name);
    if (w->block_signals) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
    }
    w->tid = syscall(SYS_gettid);
    w->started = 1;
    while (!w->go) {
        if (w->block_signals == 2) {
            syscall(SYS_futex, &w->go, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
            continue;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (w->block_signals == 2) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_UNBLOCK, &all, NULL);
    }
    const double t0 = thread_cpu();
    if (w->callback) {
        for (int i = 0; i < w->rounds; ++i) {
            w->callback();  /* takes a thread state, runs Python, drops the state */
            spin(w->seconds / w->rounds);
        }
    } else {
        spin(w->seconds);
    }
    w->cpu = thread_cpu() - t0;
    return NULL;
}

/* Starts worker `i` (named `name`), idle until worker_go(i). Returns its tid. */
long worker_start(int i, const char* name, double seconds, int block_signals, void (*callback)(void), int rounds) {
    struct worker* w = &workers[i];
    memset(w, 0, sizeof *w);
    strncpy(w->name, name, sizeof w->name - 1);
    w->seconds = seconds;
    w->block_signals = block_signals;
    w->callback = callback;
    w->rounds = rounds;
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) return -1;
    while (!w->started) {
        struct timespec ms = {0, 100000};
        nanosleep(&ms, NULL);
    }
    return w->tid;
}

void worker_go(int i) {
    workers[i].go = 1;
    syscall(SYS_futex, &workers[i].go, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Joins worker `i`; returns the CPU time it spent spinning (seconds). */
double worker_join(int i) {
    pthread_join(workers[i].thread, NULL);
    return workers[i].cpu;
}

/* The EINTR check: a thread that spins a little, then waits in read() on a pipe another thread
 * feeds, in nanosleep() and in a timed futex wait, `rounds` times; counts every EINTR. */
static int feed_pipe[2];
static volatile int feeding;
static int futex_word;

static void* feeder_main(void* arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "eintr feeder");
    while (feeding) {
        struct timespec ms = {0, 500000};
        nanosleep(&ms, NULL);
        char c = 'x';
        if (write(feed_pipe[1], &c, 1) < 0) break;
    }
    return NULL;
}

static long wait_rounds;
static long eintr_count;
static double wait_cpu;

static void* waiter_main(void* arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "eintr waiter");
    const double t0 = thread_cpu();
    for (long r = 0; r < wait_rounds; ++r) {
        spin(0.0003);
        char c;
        if (read(feed_pipe[0], &c, 1) < 0 && errno == EINTR) ++eintr_count;
        struct timespec ts = {0, 200000};
        if (nanosleep(&ts, NULL) != 0 && errno == EINTR) ++eintr_count;
        struct timespec to = {0, 200000};
        if (syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, &to, NULL, 0) != 0 && errno == EINTR)
            ++eintr_count;
    }
    wait_cpu = thread_cpu() - t0;
    return NULL;
}

/* Runs the EINTR check on two fresh C threads; returns the EINTR count. */
long eintr_run(long rounds, double* cpu) {
    if (pipe(feed_pipe) != 0) return -1;
    wait_rounds = rounds;
    eintr_count = 0;
    feeding = 1;
    pthread_t feeder, waiter;
    pthread_create(&feeder, NULL, feeder_main, NULL);
    pthread_create(&waiter, NULL, waiter_main, NULL);
    pthread_join(waiter, NULL);
    feeding = 0;
    pthread_join(feeder, NULL);
    close(feed_pipe[0]);
    close(feed_pipe[1]);
    *cpu = wait_cpu;
    return eintr_count;
}

/* Thread churn: for `seconds` of wall time, `width` C threads at a time, each spinning
 * `each` seconds of CPU then ending (a thread pool that starts a thread per task). Many end
 * between the scan's listing and their timer. Returns the number of threads started. */
static double churn_each;

static void* churn_main(void* arg) {
    (void)arg;
    spin(churn_each);
    return NULL;
}

long churn_short_threads(double seconds, int width, double each) {
    churn_each = each;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long started = 0;
    pthread_t threads[16];
    if (width > 16) width = 16;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 >= seconds) break;
        int n = 0;
        for (; n < width; ++n)
            if (pthread_create(&threads[n], NULL, churn_main, NULL) != 0) break;
        for (int i = 0; i < n; ++i) pthread_join(threads[i], NULL);
        started += n;
    }
    return started;
}
