// platform/address_space.h: where user-space code addresses end on this OS and architecture,
// and so which high bits of a return address are a pointer-authentication signature.
//
// Header-only constants: the one OS-dependent fact the native walks (unwind/native_stack.h)
// need. Pure; SIGNAL-SAFE.
#pragma once

#include <cstdint>

namespace spprof {

#if defined(__aarch64__) || defined(__arm64__)
// arm64 signs return addresses in the bits above the user virtual-address size, so stripping
// means masking to that size, and the size differs by OS: no single width is right for both.
#if defined(__APPLE__)
// macOS: user space ends below 2^47 (MACH_VM_MAX_ADDRESS 0x00007FFFFE000000 in the SDK;
// platform/darwin_mach.cpp checks it at compile time) and the signature starts at bit 47, so
// a 48-bit mask would leave a signature bit set. (FIELD-NOTES section 5.)
constexpr unsigned kUserAddressBits = 47;
#else
// Linux: 48-bit user space (4 KiB pages, 4 levels; 52-bit addresses are only handed out to an
// mmap that asks above 2^48, which no loader does). PIE executables load near 0xaaaa'aaaa'0000
// and libraries near 0xffff'xxxx'xxxx, both above 2^47: a 47-bit mask would corrupt them.
constexpr unsigned kUserAddressBits = 48;
#endif
constexpr uint64_t kPointerAuthStripMask = (uint64_t{1} << kUserAddressBits) - 1;
#else
// x86_64 has no pointer authentication: return addresses are used as they are.
constexpr uint64_t kPointerAuthStripMask = ~uint64_t{0};
#endif

}  // namespace spprof
