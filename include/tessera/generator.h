// Random number generators. tessera draws every random number from a counter-based Philox4x32-10
// stream: element i of a random op takes its bits from counter block (offset + i / E), E elements per
// block, so the numbers depend on the seed and the offset only, never on thread count, chunking or
// device (Note [Philox stream] in src/runtime/philox.h).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>

#include "tessera/device.h"

namespace tessera {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> g(mu_);
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) {
    std::lock_guard<std::mutex> g(mu_);
    offset_ = offset;
  }
  // Reserves `n` Philox counters (each yields four 32-bit words) and returns (seed, first counter).
  std::pair<uint64_t, uint64_t> reserve(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    uint64_t start = offset_;
    offset_ += n;
    return {seed_, start};
  }

 private:
  std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator of a device type (one per device index for CUDA, later).
Generator& default_generator(Device device = kCPU);
// Seeds every default generator, as torch.manual_seed does.
void manual_seed(uint64_t seed);

}  // namespace tessera
