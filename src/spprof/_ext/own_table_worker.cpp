// own_table_worker.cpp: see own_table_worker.h.
#include "own_table_worker.h"

#include "own_threads.h"

namespace spprof {

void* OwnTableWorker::main(void* p) {
    auto* self = static_cast<OwnTableWorker*>(p);
    OwnThreadScope own;  // never sampled; its CPU time is spprof's in the balance
    OwnFdTableScope table;
    std::unique_lock<std::mutex> lock(self->mutex_);
    for (;;) {
        self->cv_.wait(lock, [self] { return self->stop_ || self->fn_ != nullptr; });
        if (self->fn_ != nullptr) {
            self->fn_(self->arg_);  // the owner waits: nothing else touches the state meanwhile
            self->fn_ = nullptr;
            self->cv_.notify_all();
            continue;
        }
        return nullptr;  // stop_, and no call left
    }
}

void OwnTableWorker::start() {
    if (started_ || failed_) return;
    stop_ = false;
    fn_ = nullptr;
    if (own_thread_create(&thread_, &OwnTableWorker::main, this) != 0) {
        failed_ = true;
        return;
    }
    started_ = true;
}

void OwnTableWorker::run(void (*fn)(void*), void* arg) {
    start();
    if (failed_) {
        fn(arg);
        return;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    fn_ = fn;
    arg_ = arg;
    cv_.notify_all();
    cv_.wait(lock, [this] { return fn_ == nullptr; });
}

void OwnTableWorker::stop() {
    if (!started_) return;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    pthread_join(thread_, nullptr);
    started_ = false;
}

}  // namespace spprof
