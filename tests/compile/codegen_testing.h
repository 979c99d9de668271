// Helpers of the code generation tests, shared by the CPU suite (tests/compile/) and the GPU one
// (tests/cuda/test_compile.cpp): the backend's options, the dtypes' tolerance of generated math
// against the eager kernels, and the programs both suites compile.
#pragma once
#include <gtest/gtest.h>

#include "tessera/compile.h"
#include "tessera/functions.h"
#include "tessera/nn/functional.h"

namespace tessera::testing {

inline CompileOptions codegen_options() {
  CompileOptions o;
  o.backend = "codegen";
  return o;
}

// |a - b| <= tol (1 + max |b|), NaN where the other has NaN; the dtypes' tolerances of generated math
// against the eager kernels (the same formulas; a float differs by rounding only). Any device.
inline ::testing::AssertionResult close(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return ::testing::AssertionFailure() << "sizes or dtype differ";
  if (!a.is_floating_point()) {
    if (equal(a.cpu(), b.cpu())) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "integral values differ";
  }
  const double tol = a.dtype() == kFloat64 ? 1e-12 : a.dtype() == kFloat32 ? 1e-5 : 2e-2;
  Tensor a64 = a.detach().to(kFloat64).cpu(), b64 = b.detach().to(kFloat64).cpu();
  const double scale = nan_to_num(b64.abs(), 0.0, 0.0, 0.0).max().item<double>();
  if (allclose(a64, b64, 0.0, tol * (1 + scale), /*equal_nan=*/true)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |a - b| = " << nan_to_num((a64 - b64).abs(), 0.0, 0.0, 0.0).max().item<double>()
                                       << ", allowed " << tol * (1 + scale);
}

// A pointwise chain with broadcasts over two inputs.
inline Tensor pointwise_chain(const Tensor& x, const Tensor& y) {
  Tensor t = relu(x * 2.0 + y);
  Tensor u = where(t > 0.5, t, sigmoid(y)).clamp(0.1, 0.9);
  return gelu(u) + tanh(x).exp() - x / 3.0;
}

// The reductions that fuse (Note [Reduction groups]): softmax and log-softmax after a scale, layer
// norm after a residual add, RMS norm, a row sum, amax and amin, over the last dim of x ([.., n]) with
// w of [n].
inline std::vector<Tensor> normalizations(const Tensor& x, const Tensor& r, const Tensor& w) {
  namespace F = nn::functional;
  const int64_t n = x.size(-1);
  std::vector<Tensor> out;
  out.push_back(softmax(x * 0.5, -1));
  out.push_back(log_softmax(x - 1.0, -1));
  out.push_back(F::layer_norm(x + r, {n}, w, w * 0.5, 1e-5));
  out.push_back(F::rms_norm(x, {n}, w, 1e-6));
  out.push_back((x * x).sum({-1}) + x.amax({-1}) - x.amin({-1}));
  out.push_back((x.exp() * w).mean({-1}, true));
  return out;
}

}  // namespace tessera::testing
