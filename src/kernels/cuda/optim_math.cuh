// The per-element arithmetic of the fused optimizers (ops/optim_kernel.h), shared by the CUDA kernels
// in optim.cu and written as host/device functions so that a host build can check it against
// kernels/cpu/optim.cpp. No kernels here.
//
// Note [Optimizer rounding]: the CPU kernels compute in the parameter's dtype with floating-point
// contraction off, except PyTorch's add(alpha=) and addcmul, which they write as std::fma. Every
// operation below is an explicit correctly rounded intrinsic (__fmaf_rn, __fmul_rn, __fadd_rn,
// __fdiv_rn, __fsqrt_rn and the double forms), in the CPU's order, so nvcc cannot fuse or reorder:
// float32 and float64 results equal the CPU's bit for bit. 16-bit parameters (which the CPU kernels
// do not take) are computed in float from their 16-bit values and rounded once when stored, the
// hyperparameters rounded to float: the float32 kernel applied to the widened values.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/cuda/exact_arith.cuh"

#if defined(__CUDACC__)
#define TS_OPTIM_HD __host__ __device__ __forceinline__
#else
#define TS_OPTIM_HD inline
#endif

namespace tessera::cuda::optim_math {

using namespace exact;  // fma_rn, mul_rn, add_rn, div_rn, sqrt_rn (exact_arith.cuh)

// ---- SGD ------------------------------------------------------------------------------------------
// Hyperparameters rounded to the compute type C (float or double) as the CPU rounds them.
template <class C>
struct SgdScalars {
  C weight_decay, momentum, one_minus_dampening, neg_lr;
  bool use_weight_decay, maximize, nesterov;
};

// d = (maximize ? -g : g) + wd * p; buf = fresh ? d : momentum * buf + (1 - dampening) * d;
// d = nesterov ? d + momentum * buf : buf; p -= lr * d. `buf` is neither read nor written without
// momentum, and not read when fresh.
template <class C, bool kMomentum>
TS_OPTIM_HD void sgd_element(C& p, C g, C& buf, bool fresh, const SgdScalars<C>& s) {
  C d = s.maximize ? -g : g;
  if (s.use_weight_decay) d = fma_rn(p, s.weight_decay, d);
  if constexpr (kMomentum) {
    buf = fresh ? d : fma_rn(d, s.one_minus_dampening, mul_rn(buf, s.momentum));
    d = s.nesterov ? fma_rn(buf, s.momentum, d) : buf;
  }
  p = fma_rn(d, s.neg_lr, p);
}

// ---- Adam / AdamW ---------------------------------------------------------------------------------
template <class C>
struct AdamScalars {
  C beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decay;  // decay = 1 - lr * wd
  bool l2, decoupled, maximize;  // l2: Adam's weight decay added to the gradient
};

// The step-dependent scalars of one parameter, as the CPU computes them in float64 before rounding
// to C: -lr / (1 - beta1^step) and sqrt(1 - beta2^step).
struct AdamStepScalars {
  double neg_step_size, bias_correction2_sqrt;
};
inline AdamStepScalars adam_step_scalars(double lr, double beta1, double beta2, int64_t step) {
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  return {-(lr / bias_correction1), std::sqrt(bias_correction2)};
}

// g = maximize ? -g : g; AdamW: p *= decay; Adam: g += wd * p; m = beta1 m + (1 - beta1) g;
// v = beta2 v + ((1 - beta2) g) g; amsgrad: vmax = max(vmax, v) (nan wins) replaces v below;
// p += neg_step_size * m / (sqrt(v) / bc2_sqrt + eps). `vmax` is untouched without amsgrad.
template <class C, bool kAmsgrad>
TS_OPTIM_HD void adam_element(C& p, C g, C& m, C& v, C& vmax, C neg_step_size, C bc2_sqrt, const AdamScalars<C>& s) {
  C pi = p;
  C gi = s.maximize ? -g : g;
  if (s.decoupled) pi = mul_rn(pi, s.decay);
  if (s.l2) gi = fma_rn(pi, s.weight_decay, gi);
  const C mi = fma_rn(gi, s.one_minus_beta1, mul_rn(m, s.beta1));
  const C vi = fma_rn(mul_rn(s.one_minus_beta2, gi), gi, mul_rn(v, s.beta2));
  m = mi;
  v = vi;
  C sq = vi;
  if constexpr (kAmsgrad) {
    const C prev = vmax;
    sq = (vi > prev || vi != vi) ? vi : prev;
    vmax = sq;
  }
  const C denom = add_rn(div_rn(sqrt_rn(sq), bc2_sqrt), s.eps);
  p = add_rn(pi, div_rn(mul_rn(neg_step_size, mi), denom));
}

}  // namespace tessera::cuda::optim_math
