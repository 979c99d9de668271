// What activation checkpointing's recomputation must see of its forward (Note [Checkpoint replay]
// in tessera/utils/checkpoint.h), shared by the reentrant (checkpoint.cpp) and the non-reentrant
// (checkpoint_non_reentrant.cpp) forms: the default generators' Philox states and the autocast state,
// captured at the forward and re-entered around the recomputation.
#pragma once
#include <optional>

#include "ops/autocast_hook.h"
#include "tessera/amp.h"
#include "tessera/autograd.h"
#include "tessera/generator.h"

namespace tessera::utils::detail {

struct GeneratorState {
  uint64_t seed = 0, offset = 0;
};

inline GeneratorState state_of(Generator& g) { return {g.seed(), g.offset()}; }
inline void restore(Generator& g, const GeneratorState& s) {
  g.manual_seed(s.seed);
  g.set_offset(s.offset);
}

inline constexpr DeviceType kAutocastTypes[] = {DeviceType::CPU, DeviceType::CUDA};

struct AutocastState {
  bool enabled = false;
  DType dtype = kBFloat16;
};

// The forward's state, captured where the checkpoint is entered.
struct ReplayState {
  bool preserve_rng = true;
  GeneratorState cpu_rng, cuda_rng;
  AutocastState autocast[2];
  bool autocast_cache = true;

  static ReplayState capture(bool preserve_rng_state) {
    ReplayState r;
    r.preserve_rng = preserve_rng_state;
    if (preserve_rng_state) {
      r.cpu_rng = state_of(default_generator(kCPU));
      r.cuda_rng = state_of(default_generator(Device::cuda()));
    }
    for (int k = 0; k < 2; ++k)
      r.autocast[k] = {amp::is_autocast_enabled(kAutocastTypes[k]), amp::get_autocast_dtype(kAutocastTypes[k])};
    r.autocast_cache = amp::is_autocast_cache_enabled();
    return r;
  }
};

// The forward's generator states, set for the recomputation and the caller's put back after.
class ForkRng {
 public:
  explicit ForkRng(const ReplayState& s) : active_(s.preserve_rng) {
    if (!active_) return;
    cpu_ = state_of(default_generator(kCPU));
    cuda_ = state_of(default_generator(Device::cuda()));
    restore(default_generator(kCPU), s.cpu_rng);
    restore(default_generator(Device::cuda()), s.cuda_rng);
  }
  ~ForkRng() {
    if (!active_) return;
    restore(default_generator(kCPU), cpu_);
    restore(default_generator(Device::cuda()), cuda_);
  }
  ForkRng(const ForkRng&) = delete;
  ForkRng& operator=(const ForkRng&) = delete;

 private:
  bool active_;
  GeneratorState cpu_, cuda_;
};

// The scope of a recomputation: the forward's random streams and autocast state, grad mode on, and
// the engine's exclusion of autocast from derivatives lifted (the forward ran under it).
class ReplayScope {
 public:
  explicit ReplayScope(const ReplayState& s) : rng_(s) {
    for (int k = 0; k < 2; ++k) {
      const DeviceType t = kAutocastTypes[k];
      if (s.autocast[k].enabled || amp::is_autocast_enabled(t))
        guards_[k].emplace(Device(t), s.autocast[k].dtype, s.autocast[k].enabled, s.autocast_cache);
    }
  }
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;

 private:
  ForkRng rng_;
  EnableGradGuard grad_on_;
  AutocastIncludeGuard lift_;
  std::optional<amp::autocast> guards_[2];
};

}  // namespace tessera::utils::detail
