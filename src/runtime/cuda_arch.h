// Which GPUs a build can run on: the architectures compiled in (CMAKE_CUDA_ARCHITECTURES, passed to
// runtime/cuda as TESSERA_CUDA_ARCHS) against a GPU's compute capability. CUDA-free, so tests check the
// rules without a GPU.
//
// CMake's list "70-real;80;90a" (commas accepted too) means SASS for sm_70, SASS and PTX for sm_80, and
// arch-specific SASS and PTX for sm_90a. A GPU sm_XY runs SASS built for sm_XY' with the same major and
// Y' <= Y, or JIT-compiles PTX built for any compute_AB <= XY; arch-specific code ("a") runs only on
// exactly that architecture, family code ("f") on the same major with an equal or higher minor.
// "native", "all", "all-major" (and an empty list) are not checked: the build chose for the machine.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace tessera::cuda_arch {

struct Arch {
  int number = 0;     // 90 for sm_90, 100 for sm_100
  char suffix = 0;    // 0, 'a' (arch-specific) or 'f' (family)
  bool sass = false;  // real
  bool ptx = false;   // virtual
};

struct ArchList {
  std::vector<Arch> archs;
  bool unchecked = false;  // native / all / all-major / empty / unparsable
};

ArchList parse(std::string_view cmake_list);
// Whether a GPU of compute capability major.minor can run the build.
bool supports(const ArchList& list, int major, int minor);
// "sm_70, sm_80, compute_80 (PTX)" for messages.
std::string describe(const ArchList& list);
// The SASS and PTX architecture numbers (without suffixes), in list order, without repeats.
std::vector<int> sass_numbers(const ArchList& list);
std::vector<int> ptx_numbers(const ArchList& list);

}  // namespace tessera::cuda_arch
