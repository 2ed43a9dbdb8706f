/* A thread CPU-clock timer that signals its thread into an empty handler: what the kernel
 * alone costs a workload at a sampling rate (benchmarks/ab.py's "signal" mode loads it with
 * ctypes in place of spprof; no Python, no spprof in the handler).
 *
 *   cc -O2 -shared -fPIC -o empty_signal.so empty_signal.c
 *   es_arm(interval_ns): the calling thread's timer, armed (0, or -1 with errno set)
 *   es_disarm(): deletes it and restores the old handler; returns the signals handled */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_signals;
static timer_t g_timer;
static struct sigaction g_old;

static void on_signal(int sig, siginfo_t *info, void *uc) {
    (void)sig;
    (void)info;
    (void)uc;
    g_signals++;
}

int es_arm(long interval_ns) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGRTMIN + 2, &sa, &g_old) != 0) return -1;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGRTMIN + 2;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &g_timer) != 0) return -1;
    struct itimerspec its;
    its.it_interval.tv_sec = interval_ns / 1000000000L;
    its.it_interval.tv_nsec = interval_ns % 1000000000L;
    its.it_value = its.it_interval;
    g_signals = 0;
    return timer_settime(g_timer, 0, &its, NULL);
}

long es_disarm(void) {
    timer_delete(g_timer);
    sigaction(SIGRTMIN + 2, &g_old, NULL);
    return g_signals;
}
