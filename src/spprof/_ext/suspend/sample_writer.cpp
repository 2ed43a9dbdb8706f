// suspend/sample_writer.cpp: write_sample_record (see sample_writer.h).
#include "sample_writer.h"

#include <cstring>

namespace spprof {

bool write_sample_record(RingBuffer& ring, const RawSampleHeader& header, const RawFrame* frames,
                         const uint64_t* native_pcs) {
    const uint32_t depth = header.depth <= kMaxPythonFrames ? header.depth : kMaxPythonFrames;
    const uint32_t native = header.native_depth <= kMaxNativeFrames ? header.native_depth
                                                                    : kMaxNativeFrames;
    const size_t bytes = sample_record_bytes(depth, native);
    auto* p = static_cast<unsigned char*>(ring.reserve(bytes));
    if (p == nullptr) return false;
    RawSampleHeader h = header;
    h.depth = static_cast<uint16_t>(depth);
    h.native_depth = static_cast<uint16_t>(native);
    std::memcpy(p, &h, sizeof h);
    size_t off = sizeof h;
    if (depth != 0) {
        std::memcpy(p + off, frames, depth * sizeof(RawFrame));
        off += depth * sizeof(RawFrame);
    }
    if (native != 0) std::memcpy(p + off, native_pcs, native * sizeof(uint64_t));
    ring.commit(bytes);
    return true;
}

}  // namespace spprof
