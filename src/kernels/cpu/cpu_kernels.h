// Registration entry points of the CPU kernel families. Each family file defines its register_*()
// and fills the slots of ops/<family>_kernel.h for DeviceType::CPU.
//
// The dispatched families (Note [CPU ISA dispatch] in runtime/cpu_isa.h) are built once per
// instruction-set level: their register_*() live in the level's namespace (Note [ISA namespaces] in
// isa_namespace.h) and are reached through that level's register_dispatched() (isa_register.cpp).
#pragma once
#include "kernels/cpu/isa_namespace.h"
#include "tessera/cpu.h"

namespace tessera::cpu {

// Built once, for plain x86-64.
void register_threads();
// family index: declare register_index() on the next line
void register_index();
// family shape_ops: declare register_shape_ops() on the next line
void register_shape_ops();
void register_range();      // range.cpp: arange
void register_attention();  // attention.cpp: flash attention (reference for the GPU kernels)

#if defined(TS_CPU_ISA)
TS_CPU_ISA_BEGIN
void register_copy();
// family elementwise: declare register_elementwise() on the next line
void register_elementwise();
// family reduce: declare register_reduce() on the next line
void register_reduce();
// family linalg: declare register_linalg() on the next line
void register_linalg();
// family random: declare register_random() on the next line
void register_random();
// family optim: declare register_optim() on the next line
void register_optim();
// family conv: declare register_conv() (and register_pool()) on the next line
void register_conv();
void register_pool();
void register_loss();  // loss.cpp: cross-entropy fused with log_softmax
// family norm: layer norm and RMS norm (norm.cpp)
void register_norm();
// batch_norm.cpp: native_batch_norm
void register_batch_norm();
void register_amp();      // amp.cpp: the gradient scaler's unscale and scale update
void register_foreach();  // foreach.cpp: per-tensor norms of a list, in-place multiply of a list
TS_CPU_ISA_END
#endif

// Each level's build of the dispatched families (isa_register.cpp); the levels compiled in are those
// with TESSERA_CPU_ISA_<LEVEL> defined.
namespace baseline {
void register_dispatched();
}
namespace avx2 {
void register_dispatched();
}
namespace avx512 {
void register_dispatched();
}

// Fills the dispatched families' slots with `level`'s kernels. Start-up calls it with
// cpu_info().level; tests call it to compare the levels. Raises ValueError for a level this CPU does
// not support or this build does not hold.
void register_dispatched_kernels(IsaLevel level);

// Whether this build holds `level`'s kernels (avx2 and avx512 only on x86-64).
bool isa_level_built(IsaLevel level);

void register_cpu_kernels();  // all of the above at cpu_info().level; called once at library start-up

}  // namespace tessera::cpu
