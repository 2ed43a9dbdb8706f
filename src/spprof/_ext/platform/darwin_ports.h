// platform/darwin_ports.h: the Mach thread list of this task as a RAII owner
// (suspend/port_list.h over task_threads, mach_port_deallocate and vm_deallocate), and the
// one fact every user of such a list reads first: a thread port's system-wide thread id.
// Shared by the Mach sampler (darwin_mach.cpp) and the OS thread list (os_threads_darwin.cpp).
// Normal context only. macOS only.
#pragma once

#if defined(__APPLE__)

#include <mach/mach.h>

#include <cstdint>

#include "../suspend/port_list.h"

namespace spprof {

struct MachThreadListOps {
    using Handle = thread_act_t;
    bool load(Handle** list, uint32_t* count) {
        thread_act_array_t threads = nullptr;
        mach_msg_type_number_t n = 0;
        if (task_threads(mach_task_self(), &threads, &n) != KERN_SUCCESS) return false;
        *list = threads;
        *count = n;
        return true;
    }
    // A dead name (the thread exited since) is released the same way.
    void release(Handle h) {
        if (MACH_PORT_VALID(h)) mach_port_deallocate(mach_task_self(), h);
    }
    void release_list(Handle* list, uint32_t count) {
        vm_deallocate(mach_task_self(), reinterpret_cast<vm_address_t>(list), count * sizeof(thread_act_t));
    }
};

// Every thread of this task: one send right each, all released with the array unless taken.
using MachThreadList = PortList<MachThreadListOps>;

// The 64-bit id pthread_threadid_np gives (THREAD_IDENTIFIER_INFO): system-wide, never reused.
// False when the thread exited meanwhile.
inline bool mach_thread_id_of(thread_act_t t, uint64_t* out) {
    thread_identifier_info_data_t info{};
    mach_msg_type_number_t count = THREAD_IDENTIFIER_INFO_COUNT;
    if (thread_info(t, THREAD_IDENTIFIER_INFO, reinterpret_cast<thread_info_t>(&info), &count) != KERN_SUCCESS)
        return false;
    *out = info.thread_id;
    return true;
}

}  // namespace spprof

#endif  // __APPLE__
