// suspend/fp_walk.h: the native frame-pointer walk over a suspended thread's stack.
//
// Given the registers of a suspended thread (read by the platform's thread layer) and the
// bounds of its stack (cached outside the suspended window, on the thread itself when it
// started), walk_stack follows the chain of frame records {saved frame pointer, return
// address} that x86_64 and arm64 code with frame pointers keep, and copies the return
// addresses leaf first into a caller-provided buffer. Every frame pointer is checked before
// it is dereferenced (validate_frame_pointer: inside the stack, aligned, room for a record)
// and each must be strictly above the previous one, so a torn or cyclic chain ends the walk
// instead of looping or faulting; depth is capped by the buffer and the cap is reported.
//
// Pointer authentication (arm64e system libraries, and arm64 processes on Apple silicon run
// them): return addresses carry a signature in their high bits; strip_pac clears them.
//
// Portable and Python-free: the Linux build unit-tests it over fake stacks built in a buffer.
// Everything here is SIGNAL-SAFE and NO-HEAP and runs while the target thread is suspended.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spprof {

// Registers the walk needs, already normalised by the thread layer.
struct RegisterState {
    uint64_t pc = 0;  // instruction pointer (PAC-stripped)
    uint64_t fp = 0;  // frame pointer: rbp / x29
    uint64_t sp = 0;  // stack pointer
    uint64_t lr = 0;  // arm64 link register (PAC-stripped); 0 on x86_64
};

// [lo, hi) of a thread's stack; hi is the address pthread_get_stackaddr_np reports (stacks
// grow down from it). lo == hi == 0 means unknown: only the pc is reported.
struct StackBounds {
    uintptr_t lo = 0;
    uintptr_t hi = 0;
    bool known() const { return lo != 0 && hi > lo; }
};

// Why the walk ended.
enum class WalkStop : uint8_t {
    kBottom,     // frame pointer 0 or return address 0: the outermost frame was reached
    kInvalidFp,  // a frame pointer failed validation (code without frame pointers, e.g. libpython)
    kNotRising,  // a saved frame pointer was not strictly above the current one
    kDepthCap,   // the buffer was full while the chain went on (result.truncated)
    kNoBounds,   // stack bounds unknown: only the pc was recorded
};

struct NativeWalk {
    uint32_t depth = 0;      // return addresses written, leaf first (pc included)
    bool truncated = false;  // the depth cap was hit with frames remaining
    WalkStop stop = WalkStop::kBottom;
};

// Pointer-authentication bits live above the virtual-address size. macOS arm64 user space
// ends below 2^47 (MACH_VM_MAX_ADDRESS 0x00007FFFFE000000 in the SDK; darwin_mach.cpp checks
// this at compile time), and x86_64 user space does too, so masking to 47 bits removes a
// signature and never changes a valid address on either architecture.
constexpr uint64_t kPacStripMask = (uint64_t{1} << 47) - 1;

// Return `addr` with its pointer-authentication bits cleared. Pure; SIGNAL-SAFE.
inline uint64_t strip_pac(uint64_t addr) { return addr & kPacStripMask; }

// Size of one frame record: saved frame pointer then return address.
constexpr uintptr_t kFrameRecordBytes = 16;

// True when a frame record at `fp` lies wholly inside [stack_lo, stack_hi) and is 8-byte
// aligned (both ABIs keep 16-byte aligned records; 8 tolerates hand-written assembly). Pure.
bool validate_frame_pointer(uintptr_t fp, uintptr_t stack_lo, uintptr_t stack_hi);

// Walk from `regs` over the stack in `bounds`, writing at most `max` addresses into `out`
// (out[0] = pc, then each frame's return address, all PAC-stripped).
// Called by the sampler thread while the target is suspended: NO-HEAP, bounded by `max`.
// Reads memory directly, so `bounds` must describe a mapped stack (checked per frame).
NativeWalk walk_stack(const RegisterState& regs, const StackBounds& bounds, uint64_t* out,
                      uint32_t max);

}  // namespace spprof
