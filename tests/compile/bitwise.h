// The compiler's tests compare compiled with eager bitwise (the graph replays the same kernels in the
// same order): this says how two tensors differ when they do.
#pragma once
#include <gtest/gtest.h>

#include "tessera/tessera.h"

namespace tessera::testing {

inline ::testing::AssertionResult bitwise(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << "shape or dtype differ: " << dtype_name(a.dtype()) << " vs "
                                         << dtype_name(b.dtype());
  if (!equal(a, b))
    return ::testing::AssertionFailure() << "values differ; max |a-b| = "
                                         << (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::testing
