// Correctly rounded arithmetic that no compiler may contract into fused multiply-adds, for kernels
// whose results must equal the CPU's bit for bit (Note [Random rounding] in random_transforms.cuh, the
// fused optimizers in optim_math.cuh). On the device the _rn intrinsics; on the host (where the same
// formulas are compiled for tests) plain IEEE operations and std::fma.
#pragma once
#include <cmath>

#include "runtime/philox.h"  // TS_HOST_DEVICE

namespace tessera::cuda::exact {

#if defined(__CUDA_ARCH__)
#define TS_EXACT(dev, host) return dev;
#else
#define TS_EXACT(dev, host) return host;
#endif

TS_HOST_DEVICE float fma_rn(float a, float b, float c) { TS_EXACT(__fmaf_rn(a, b, c), std::fma(a, b, c)) }
TS_HOST_DEVICE double fma_rn(double a, double b, double c) { TS_EXACT(__fma_rn(a, b, c), std::fma(a, b, c)) }
TS_HOST_DEVICE float mul_rn(float a, float b) { TS_EXACT(__fmul_rn(a, b), a * b) }
TS_HOST_DEVICE double mul_rn(double a, double b) { TS_EXACT(__dmul_rn(a, b), a * b) }
TS_HOST_DEVICE float add_rn(float a, float b) { TS_EXACT(__fadd_rn(a, b), a + b) }
TS_HOST_DEVICE double add_rn(double a, double b) { TS_EXACT(__dadd_rn(a, b), a + b) }
TS_HOST_DEVICE float div_rn(float a, float b) { TS_EXACT(__fdiv_rn(a, b), a / b) }
TS_HOST_DEVICE double div_rn(double a, double b) { TS_EXACT(__ddiv_rn(a, b), a / b) }
TS_HOST_DEVICE float sqrt_rn(float a) { TS_EXACT(__fsqrt_rn(a), std::sqrt(a)) }
TS_HOST_DEVICE double sqrt_rn(double a) { TS_EXACT(__dsqrt_rn(a), std::sqrt(a)) }

#undef TS_EXACT

}  // namespace tessera::cuda::exact
