# Warning and optimization flags shared by every tessera target.
add_library(tessera_flags INTERFACE)
target_compile_options(tessera_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers>)
# Kernels need the vectorizer and may assume no errno from math functions; NaN/Inf semantics stay.
# No -march here: the library runs on any x86-64 CPU, and the dispatched CPU kernels get their level's
# -march from src/CMakeLists.txt (Note [CPU ISA dispatch] in src/runtime/cpu_isa.h).
add_library(tessera_kernel_flags INTERFACE)
target_compile_options(tessera_kernel_flags INTERFACE
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release,RelWithDebInfo>>:-O3 -fno-math-errno -fno-trapping-math -mtune=generic>)
# CUDA sources: host-side warnings as for C++, device code at -O3, constexpr host functions usable in
# kernels, and lambdas with __device__ annotations for the elementwise launchers.
add_library(tessera_cuda_flags INTERFACE)
target_compile_options(tessera_cuda_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr --extended-lambda -Xcompiler=-Wall,-Wno-unused-parameter,-Wno-sign-compare
  -Xcudafe=--diag_suppress=186 --threads=1>)
