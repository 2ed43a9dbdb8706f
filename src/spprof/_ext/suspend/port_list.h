// suspend/port_list.h: the owner of one thread list the kernel handed us (macOS: task_threads,
// an array of thread ports in our address space with one send right per entry).
//
// Nothing leaks on any path: the destructor releases every right not taken, then the array.
// A caller keeps a right with take(i) (it releases it itself from then on). Written over a
// small kernel interface so that tests/native checks the bookkeeping on Linux with fake ports;
// platform/darwin_ports.h instantiates it over the Mach calls.
//
//   struct Ops {
//       using Handle = ...;                                    // a port name; Handle{} is none
//       bool load(Handle** list, uint32_t* count);             // the kernel's call
//       void release(Handle h);                                // one right
//       void release_list(Handle* list, uint32_t count);       // the array itself
//   };
//
// Normal context only (loading and releasing are kernel calls that may allocate): never inside
// a suspended window. Not thread-safe; one owner at a time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spprof {

template <class Ops>
class PortList {
public:
    using Handle = typename Ops::Handle;

    explicit PortList(Ops ops = Ops()) : ops_(ops) {}
    PortList(const PortList&) = delete;
    PortList& operator=(const PortList&) = delete;
    ~PortList() { clear(); }

    // Ask the kernel for the list (dropping any list held). False when it refused: empty then.
    bool load() {
        clear();
        Handle* list = nullptr;
        uint32_t count = 0;
        if (!ops_.load(&list, &count)) return false;
        list_ = list;
        count_ = list != nullptr ? count : 0;
        return true;
    }
    size_t size() const { return count_; }
    Handle at(size_t i) const { return list_[i]; }
    // The right at i becomes the caller's; the list will not release it.
    Handle take(size_t i) {
        const Handle h = list_[i];
        list_[i] = Handle{};
        return h;
    }

private:
    void clear() {
        if (list_ == nullptr) return;
        for (uint32_t i = 0; i < count_; ++i) {
            if (list_[i] != Handle{}) ops_.release(list_[i]);
        }
        ops_.release_list(list_, count_);
        list_ = nullptr;
        count_ = 0;
    }

    Ops ops_;
    Handle* list_ = nullptr;
    uint32_t count_ = 0;
};

}  // namespace spprof
