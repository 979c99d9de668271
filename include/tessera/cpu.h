// The CPU tessera runs on: its name, the instruction-set extensions it and the OS support, and the
// level of the CPU kernels chosen for it at start-up (Note [CPU ISA dispatch] in src/runtime/cpu_isa.h).
//
// The level is the highest of baseline (x86-64: SSE2), avx2 (x86-64-v3: AVX2, FMA, F16C, BMI2) and
// avx512 (x86-64-v4: AVX-512 F, CD, BW, DQ, VL) that the CPU supports and the OS saves the registers
// of, capped by the environment variable TESSERA_CPU_ISA=baseline|avx2|avx512 read once at start-up.
#pragma once
#include <string>
#include <vector>

namespace tessera::cpu {

enum class IsaLevel { baseline = 0, avx2 = 1, avx512 = 2 };

// "baseline", "avx2", "avx512".
const char* isa_level_name(IsaLevel level);

struct CpuInfo {
  std::string name;                   // the brand string ("AMD EPYC 9654 96-Core Processor")
  std::string vendor;                 // "GenuineIntel", "AuthenticAMD", ...
  std::vector<std::string> features;  // extensions usable here, by /proc/cpuinfo's names ("avx2", "avx512_bf16", "amx_tile")
  IsaLevel supported = IsaLevel::baseline;  // the highest level this CPU and OS support
  IsaLevel level = IsaLevel::baseline;      // the level the CPU kernels run at (supported, capped)
  std::string cap;                          // TESSERA_CPU_ISA as given ("" when unset)
};

// Detected once; the same object for the life of the process.
const CpuInfo& cpu_info();

// Whether the CPU (and the OS) support a feature by its /proc/cpuinfo name, e.g. "avx512_bf16".
bool has_feature(const std::string& name);

// oneDNN behind the CPU convolution and matrix-product kernels, for the shapes where it measured faster
// (Note [oneDNN where it wins] in src/kernels/cpu/onednn/onednn.h). Built in when the build found it
// (CMake option TESSERA_ONEDNN); on unless the environment variable TESSERA_ONEDNN=0 at start-up.
bool onednn_built();
// Built in and not switched off.
bool onednn_enabled();
// Switches oneDNN on or off for the whole process (tests and comparisons); returns the previous
// setting. Switching on in a build without it is a no-op that returns false.
bool set_onednn_enabled(bool on);
// "2.6.3", or "" when not built in.
std::string onednn_version();

}  // namespace tessera::cpu
