// The default generators (one per device type for now; per CUDA device index with the CUDA backend).
#include "tessera/generator.h"

namespace tessera {

Generator& default_generator(Device device) {
  static Generator cpu_gen;
  static Generator cuda_gen;
  return device.is_cuda() ? cuda_gen : cpu_gen;
}

void manual_seed(uint64_t seed) {
  default_generator(kCPU).manual_seed(seed);
  default_generator(Device::cuda()).manual_seed(seed);
}

}  // namespace tessera
