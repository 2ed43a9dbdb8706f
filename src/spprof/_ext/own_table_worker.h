// own_table_worker.h: a thread of spprof's, in a descriptor table of its own, that runs calls
// for the thread that owns it, one at a time, the caller waiting.
//
// The drain thread shares the program's descriptor table (it serves the control socket, which
// is the program's table's), so a /proc file it opens takes the program's lowest free number
// for a moment: a C library that closes fd 2 and reopens it at that moment gets 3. Its /proc
// reads go to this worker instead (session/proc_reads.h). own_thread_run_apart makes a thread
// per call; the worker is made once and kept while its owner runs (a hand-off per call, a few
// microseconds), since the scan reads on every pass. Normal context, no GIL needed: the calls
// must not touch Python.
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <mutex>

namespace spprof {

class OwnTableWorker {
public:
    OwnTableWorker() = default;
    ~OwnTableWorker() { stop(); }
    OwnTableWorker(const OwnTableWorker&) = delete;
    OwnTableWorker& operator=(const OwnTableWorker&) = delete;

    // Starts the worker (else the first run() does) and returns once it runs. Its owner's
    // starter starts it with the owner, so that the process's thread count does not change
    // while the owner runs.
    void start();
    // Runs fn(arg) on the worker and returns when it has run.
    // Where no thread can be made, fn runs on the caller's thread (in the program's table, as
    // it would without the worker). One caller at a time: the owner.
    void run(void (*fn)(void*), void* arg);
    // Ends the worker and joins it; the next run() starts another. The owner, before it ends.
    void stop();
    // In a forked child: the worker was not copied, and its mutex may be held: touch neither.
    void abandon() { started_ = false; }

private:
    static void* main(void* self);

    std::mutex mutex_;
    std::condition_variable cv_;
    pthread_t thread_{};
    bool started_ = false;
    bool failed_ = false;  // no thread could be made: run on the caller from now on
    bool stop_ = false;
    void (*fn_)(void*) = nullptr;  // the call waiting to run; nullptr once it has
    void* arg_ = nullptr;
};

}  // namespace spprof
