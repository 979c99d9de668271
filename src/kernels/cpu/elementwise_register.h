// Registration of the elementwise family's CPU kernel files; register_elementwise() calls them all.
#pragma once
#include "kernels/cpu/isa_namespace.h"

namespace tessera::cpu {
TS_CPU_ISA_BEGIN  // Note [ISA namespaces] in kernels/cpu/isa_namespace.h

void register_unary();
void register_binary();
void register_ternary();
void register_softmax();

TS_CPU_ISA_END
}  // namespace tessera::cpu
