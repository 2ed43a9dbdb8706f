// sampler_round.h: a hook the sampler threads run after each round (Linux wall mode's census
// thread, wall/wall_sampler.h; macOS's Mach sampler, platform/darwin_mach.h).
//
// Those threads wake every interval and never wait for the GIL, so they can queue work that
// must not wait behind it (the asyncio census, session/python_tick.h) where the drain thread,
// which takes the GIL, could be kept from it for seconds. The hook runs outside the capture
// gate and any suspended window: it may lock (Py_AddPendingCall does), never take the GIL.
#pragma once

namespace spprof {

using SamplerRoundHook = void (*)();

// Any thread. nullptr: none.
void sampler_round_set_hook(SamplerRoundHook hook);

// A sampler thread, after a round.
void sampler_round_done();

}  // namespace spprof
