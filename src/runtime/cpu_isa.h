// The CPU's instruction sets and the level of the CPU kernels (tessera/cpu.h), inside the library.
//
// Note [CPU ISA dispatch]: the hot CPU kernels (src/kernels/cpu, the files CMake lists in
// TESSERA_CPU_ISA_SOURCES) are compiled once per level, each time with that level's -march and into
// a namespace of its own (tessera::cpu::baseline, ::avx2, ::avx512: Note [ISA namespaces] in
// kernels/cpu/isa_namespace.h), and the rest of the library for plain x86-64. At start-up
// register_cpu_kernels() fills the kernel slots with the functions of cpu_info().level, chosen once
// here: the highest level whose instructions the CPU has (cpuid) and whose registers the OS saves on a
// context switch (xgetbv: XMM/YMM for avx2, and the opmask and ZMM state for avx512), capped by
// TESSERA_CPU_ISA. So the library loads and runs on any x86-64 CPU, and a run capped at baseline
// executes no AVX instruction in tessera's code (tests/kernels/test_cpu_isa_objects.py checks the
// library's machine code for it).
#pragma once
#include <optional>
#include <string>

#include "tessera/cpu.h"

namespace tessera::cpu {

// "baseline" | "avx2" | "avx512" (case-insensitive) -> the level; anything else -> nullopt.
std::optional<IsaLevel> parse_isa_level(const std::string& s);

// The level for a CPU supporting `supported` under the cap `cap` (TESSERA_CPU_ISA's value, "" for
// none). A cap above what the CPU supports gives the supported level; a cap that is not a level name
// gives `supported` and sets *warning to say so.
IsaLevel choose_isa_level(IsaLevel supported, const std::string& cap, std::string* warning);

}  // namespace tessera::cpu
