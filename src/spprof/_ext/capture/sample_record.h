// sample_record.h: the raw sample as written into a RingBuffer by the capture path.
//
// Raw means unresolved: code-object pointers and instruction offsets, never names. The
// resolver turns records into frames later, GIL held. The layout is shared by the Linux
// signal path and the macOS Mach sampler.
#pragma once

#include <cstdint>

namespace spprof {

// Bounds on one record. kMaxPythonFrames keeps a record well under half of the smallest ring.
constexpr uint32_t kMaxPythonFrames = 256;
constexpr uint32_t kMaxNativeFrames = 128;

// RawFrame.instr carries the offset in code units; its top bit marks an entry frame (the first
// Python frame of a C call into the eval loop), which the native interleaving needs.
constexpr uint32_t kInstrEntryFlag = 0x80000000u;

struct RawFrame {
    uint64_t code;         // PyCodeObject* as an integer: never dereferenced after capture
    uint32_t instr;        // instruction offset in code units | kInstrEntryFlag
    uint32_t fingerprint;  // code_fingerprint() at capture, re-checked at resolution
};
static_assert(sizeof(RawFrame) == 16, "RawFrame is packed into the ring");

// RawFrame.code of a synthetic leaf frame: the thread was running a subinterpreter, whose
// frames are not read (its objects belong to another interpreter, maybe under another GIL);
// RawFrame.fingerprint holds the interpreter's id. No object can live at address 1.
constexpr uint64_t kSubinterpreterFrameCode = 1;
// RawFrame.code of the frame <GC>: the thread was running the cyclic garbage collector inside
// the frame after it (the leaf Python frame); fingerprint and instr are 0.
constexpr uint64_t kGcFrameCode = 2;
// RawFrame.code of the one frame of a sample of a thread with no Python frame, taken on a
// thread found without a Python state (an OpenMP or OpenBLAS worker): the drain names it after
// the thread, <thread "OS name">, a native frame. Its fingerprint is unused (0).
constexpr uint64_t kThreadNameFrameCode = 3;

enum SampleFlags : uint32_t {
    kSampleTruncated = 1u << 0,  // root side lost: more Python frames than kMaxPythonFrames,
                                 // or the walk met a torn link (a bad value or a fault)
    kSampleOnCpu = 1u << 1,      // thread used CPU since its previous sample
    kSampleHasGil = 1u << 2,     // thread held the GIL when sampled
    kSampleIdle = 1u << 3,       // wall mode: the thread was blocked (off CPU, not runnable);
                                 // with depth 0 the drain gives it the thread's last stack
    kSampleGilKnown = 1u << 4,   // kSampleHasGil is meaningful
    kSampleStackOnly = 1u << 5,  // not a sample: the thread's current stack, recorded at
                                 // registration so idle records have a stack to reuse
    kSampleRunnable = 1u << 6,   // wall mode: the thread waited for a CPU (runnable, preempted)
                                 // on this stack; depth 0: its last stack
    kSampleThreadEnd = 1u << 7,  // CPU-timer expiries that fell due in a thread's last stretch
                                 // without a scheduler tick, counted as it ended (never fired
                                 // by the kernel); depth 0: its last stack (or entry stack)
    // Not kept in a row (its flags are the low 8 bits): how the drain places the record.
    kSampleAtWait = 1u << 8,     // wall mode, idle, depth 0: the end of the wait the census last
                                 // found the thread blocked in (it woke and ran since): the
                                 // stack of its latest idle record, not its last stack
};

struct RawSampleHeader {
    uint64_t timestamp_ns;  // monotonic clock
    uint64_t weight_ns;     // sampled time this record stands for (overruns included)
    uint64_t native_tid;    // kernel tid (Linux) / Mach thread id (macOS)
    uint32_t thread_serial; // the thread's slot in the session's ThreadTable
    uint32_t flags;         // SampleFlags
    uint16_t depth;         // RawFrame count that follows, leaf first
    uint16_t native_depth;  // uint64_t return addresses after the frames, leaf first
    uint32_t censuses;      // a wall census's record: the censuses it stands for (0: one)
    uint16_t shared_root;   // root-side frames of the thread's previous record that complete
                            // the stored ones (root_share.h); 0 in a record written whole
    uint16_t reserved16;
    uint32_t reserved32;
};
static_assert(sizeof(RawSampleHeader) == 48, "header layout is part of the ring format");

inline uint32_t code_fingerprint(int firstlineno, uintptr_t name_ptr) {
    // Cheap, stable while the code object lives; a reused address must also reuse the same
    // first line and the same (interned) name object to pass.
    return static_cast<uint32_t>(firstlineno) * 2654435761u ^ static_cast<uint32_t>(name_ptr >> 3);
}

}  // namespace spprof
