// sampler_round.cpp: see sampler_round.h.
#include "sampler_round.h"

#include <atomic>

namespace spprof {

namespace {
std::atomic<SamplerRoundHook> g_hook{nullptr};
}  // namespace

void sampler_round_set_hook(SamplerRoundHook hook) { g_hook.store(hook, std::memory_order_release); }

void sampler_round_done() {
    const SamplerRoundHook hook = g_hook.load(std::memory_order_acquire);
    if (hook != nullptr) hook();
}

}  // namespace spprof
