// Fills the op table's CPU slots, once, at library start-up (tessera_init.cpp).
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

void register_cpu_kernels() {
  register_copy();
  register_threads();
}

}  // namespace tessera::cpu
