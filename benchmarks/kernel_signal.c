/* The kernel's cost per signal and per timer expiry, on its own (no Python, no spprof).
 *
 *   cc -O2 -o kernel_signal kernel_signal.c        (benchmarks/kernel.py builds and runs it)
 *   kernel_signal ops N REPEATS         tight loops, ns of thread CPU per operation
 *   kernel_signal timer mono|cpu HZ ITERS REPEATS   a fixed spin with and without a timer
 *
 * ops: N getppid() calls (a bare system call); N tgkill(SIGPROF) to this thread with SIGPROF
 * ignored (the send alone: the kernel drops an ignored signal before queueing it); N tgkill
 * to this thread with an empty SA_SIGINFO handler (send + signal frame set-up, including the
 * FPU/AVX state, + handler + rt_sigreturn). Delivery = handler - ignored.
 * timer: the same fixed amount of spinning, alternately with no timer and with a
 * timer at HZ that signals this thread (SIGEV_THREAD_ID, empty handler: ks_arm); cost per expiry =
 * (CPU with - CPU without) / signals. `cpu`: a thread CPU-clock timer, what spprof arms; it
 * expires only on the scheduler tick (250 Hz here), so few signals and a poor resolution.
 * `mono`: a CLOCK_MONOTONIC hrtimer, which resolves at 10 kHz but pays its own interrupt (in a
 * VM, a timer exit) that the CPU-clock timer, checked in the tick that happens anyway, does not.
 * Every figure is the minimum over REPEATS: load from other processes only ever adds.
 * Prints one JSON line.
 *
 * Built as a shared library (cc -O2 -shared -fPIC), ks_arm/ks_disarm are what
 * benchmarks/ab.py's "signal" mode arms in place of spprof: the kernel's share alone, measured
 * on a real workload. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_signals;

static void on_signal(int sig, siginfo_t *info, void *uc) {
    (void)sig;
    (void)info;
    (void)uc;
    g_signals++;
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void set_handler(int ignore) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (ignore) {
        sa.sa_handler = SIG_IGN;
    } else {
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
    }
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
}

static double per_op_ns(int what, long n) {
    pid_t pid = getpid();
    pid_t tid = (pid_t)syscall(SYS_gettid);
    uint64_t t0 = thread_cpu_ns();
    for (long i = 0; i < n; i++) {
        if (what == 0)
            syscall(SYS_getppid);
        else
            syscall(SYS_tgkill, pid, tid, SIGPROF);
    }
    return (double)(thread_cpu_ns() - t0) / (double)n;
}

static uint64_t g_sink;

static uint64_t spin_ns(long iters) {
    uint64_t t0 = thread_cpu_ns();
    uint64_t acc = g_sink;
    for (long i = 0; i < iters; i++) acc = acc * 6364136223846793005u + 1442695040888963407u;
    g_sink = acc;
    return thread_cpu_ns() - t0;
}

static timer_t g_timer;
static struct sigaction g_old;

/* The calling thread's timer (its CPU clock, or CLOCK_MONOTONIC) every interval_ns into the
 * empty SIGPROF handler (the old one kept for ks_disarm); the signal count starts at 0.
 * Returns 0, or -1 with errno set. */
int ks_arm(int cpu_clock, long interval_ns) {
    sigaction(SIGPROF, NULL, &g_old);
    set_handler(0);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &sev, &g_timer) != 0) return -1;
    struct itimerspec on;
    memset(&on, 0, sizeof on);
    on.it_interval.tv_sec = interval_ns / 1000000000L;
    on.it_interval.tv_nsec = interval_ns % 1000000000L;
    on.it_value = on.it_interval;
    g_signals = 0;
    if (timer_settime(g_timer, 0, &on, NULL) == 0) return 0;
    timer_delete(g_timer);
    sigaction(SIGPROF, &g_old, NULL);
    return -1;
}

/* Deletes ks_arm's timer and puts SIGPROF's handler back; returns the signals handled since.
 * A signal of the timer still pending is delivered as the call returns, before the handler
 * goes (it is directed at this thread). */
long ks_disarm(void) {
    timer_delete(g_timer);
    sigaction(SIGPROF, &g_old, NULL);
    return g_signals;
}

static int timer_mode(int cpu_clock, long hz, long iters, int repeats) {
    double best_off = 1e30, best_on = 1e30;
    long signals_at_best = 0;
    spin_ns(iters); /* warm-up */
    for (int r = 0; r < repeats; r++) {
        double a = (double)spin_ns(iters);
        if (a < best_off) best_off = a;
        if (ks_arm(cpu_clock, 1000000000L / hz) != 0) {
            perror("timer_create");
            return 1;
        }
        double b = (double)spin_ns(iters);
        long s = ks_disarm();
        if (b < best_on) {
            best_on = b;
            signals_at_best = s;
        }
    }
    double per = signals_at_best > 0 ? (best_on - best_off) / (double)signals_at_best : 0.0;
    printf("{\"mode\": \"timer\", \"clock\": \"%s\", \"hz\": %ld, \"iters\": %ld, \"repeats\": %d, \"spin_ns_off\": %.0f, "
           "\"spin_ns_on\": %.0f, \"signals\": %ld, \"ns_per_expiry\": %.1f}\n",
           cpu_clock ? "thread-cpu" : "monotonic", hz, iters, repeats, best_off, best_on, signals_at_best, per);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "ops") == 0) {
        long n = atol(argv[2]);
        int repeats = atoi(argv[3]);
        double best[3] = {1e30, 1e30, 1e30};
        for (int r = 0; r < repeats; r++) {
            double v = per_op_ns(0, n);
            if (v < best[0]) best[0] = v;
            set_handler(1);
            v = per_op_ns(1, n);
            if (v < best[1]) best[1] = v;
            set_handler(0);
            g_signals = 0;
            v = per_op_ns(1, n);
            if (v < best[2]) best[2] = v;
            if (g_signals != n) {
                fprintf(stderr, "expected %ld signals, got %ld\n", n, (long)g_signals);
                return 1;
            }
        }
        printf("{\"mode\": \"ops\", \"n\": %ld, \"repeats\": %d, \"syscall_ns\": %.1f, "
               "\"send_ignored_ns\": %.1f, \"send_and_deliver_ns\": %.1f, \"delivery_ns\": %.1f}\n",
               n, repeats, best[0], best[1], best[2], best[2] - best[1]);
        return 0;
    }
    if (argc >= 6 && strcmp(argv[1], "timer") == 0)
        return timer_mode(strcmp(argv[2], "cpu") == 0, atol(argv[3]), atol(argv[4]), atoi(argv[5]));
    fprintf(stderr, "usage: kernel_signal ops N REPEATS | timer mono|cpu HZ ITERS REPEATS\n");
    return 2;
}
