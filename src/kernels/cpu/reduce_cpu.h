// Registration of the reduction family's CPU kernels, split over several files; register_reduce()
// (reduce.cpp) calls the others.
#pragma once
#include "kernels/cpu/isa_namespace.h"

namespace tessera::cpu {
TS_CPU_ISA_BEGIN  // Note [ISA namespaces] in kernels/cpu/isa_namespace.h

void register_reduce_rows();  // reduce_rows.cpp: arg-reductions, var, logsumexp
void register_scan();         // scan.cpp: cumsum, cumprod

TS_CPU_ISA_END
}  // namespace tessera::cpu
