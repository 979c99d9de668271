// One level's registration of the dispatched CPU kernel families (Note [CPU ISA dispatch] in
// runtime/cpu_isa.h): compiled once per level, like the families themselves.
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]

void register_dispatched() {
  register_copy();
  register_elementwise();
  register_reduce();
  register_linalg();
  register_random();
  register_optim();
  register_conv();
  register_pool();
  register_norm();
  register_batch_norm();
  register_loss();
  register_amp();
  register_foreach();
}

}  // namespace tessera::cpu::TS_CPU_ISA
