// Fills the op table's CPU slots, once, at library start-up (tessera_init.cpp): the families built
// once, and the dispatched families at the level chosen for this CPU (Note [CPU ISA dispatch] in
// runtime/cpu_isa.h).
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/cpu_isa.h"
#include "tessera/error.h"

namespace tessera::cpu {

bool isa_level_built(IsaLevel level) {
  switch (level) {
    case IsaLevel::baseline: return true;
    case IsaLevel::avx2:
#if defined(TESSERA_CPU_ISA_AVX2)
      return true;
#else
      return false;
#endif
    case IsaLevel::avx512:
#if defined(TESSERA_CPU_ISA_AVX512)
      return true;
#else
      return false;
#endif
  }
  return false;
}

void register_dispatched_kernels(IsaLevel level) {
  const CpuInfo& info = cpu_info();
  TS_CHECK(level <= info.supported, ValueError, "register_dispatched_kernels: this CPU (", info.name,
           ") supports the CPU kernels up to level ", isa_level_name(info.supported), ", got level ",
           isa_level_name(level));
  TS_CHECK(isa_level_built(level), ValueError, "register_dispatched_kernels: this build holds no ",
           isa_level_name(level), " kernels (they are built on x86-64 only)");
  switch (level) {
    case IsaLevel::baseline: baseline::register_dispatched(); break;
    case IsaLevel::avx2:
#if defined(TESSERA_CPU_ISA_AVX2)
      avx2::register_dispatched();
#endif
      break;
    case IsaLevel::avx512:
#if defined(TESSERA_CPU_ISA_AVX512)
      avx512::register_dispatched();
#endif
      break;
  }
}

void register_cpu_kernels() {
  register_threads();
  IsaLevel level = cpu_info().level;
  while (!isa_level_built(level)) level = IsaLevel(int(level) - 1);
  register_dispatched_kernels(level);

  // family index: call register_index() on the next line
  register_index();
  // family shape_ops: call register_shape_ops() on the next line
  register_shape_ops();
  register_range();
  register_attention();
}

}  // namespace tessera::cpu
