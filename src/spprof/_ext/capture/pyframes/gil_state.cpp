// pyframes/gil_state.cpp: where the GIL's state is (gil_state.h). Normal context.
#include "gil_state.h"

#if PY_VERSION_HEX < 0x030C0000
// The runtime state every interpreter shares, exported by libpython (PyAPI_DATA) on every
// version. Its type is internal: only its address is taken (an array of unknown bound, so that
// the offset into it is not taken for an overrun).
extern "C" unsigned char _PyRuntime[];
#endif

namespace spprof {

const unsigned char* gil_state_of(PyInterpreterState* interp) {
#if PY_VERSION_HEX >= 0x030C0000
    if (interp == nullptr) return nullptr;
    return *reinterpret_cast<unsigned char* const*>(reinterpret_cast<const unsigned char*>(interp) +
                                                     kInterpGilPointerOffset);
#else
    (void)interp;
    return _PyRuntime + kRuntimeGilOffset;
#endif
}

}  // namespace spprof
