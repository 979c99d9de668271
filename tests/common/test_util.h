// Shared test helpers: per-dtype tolerances (DESIGN.md "Testing"), comparison against a float64
// reference, and the input layouts every op is tested on (contiguous, transposed, sliced with a step,
// broadcast, zero-size, scalar).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tessera/cuda.h"
#include "tessera/tessera.h"

// GPU tests start with TS_REQUIRE_GPU(): without a CUDA GPU (or a CUDA build) they skip, saying why.
#define TS_REQUIRE_GPU()                                                                              \
  do {                                                                                                \
    if (!::tessera::cuda::is_available())                                                             \
      GTEST_SKIP() << (::tessera::cuda::is_built() ? "no CUDA GPU found" : "tessera built without CUDA"); \
  } while (0)

namespace tessera::testing {

struct Tolerance {
  double rtol, atol;
};
// float32 1.3e-6/1e-5, float16 1e-3/1e-5, bfloat16 1.6e-2/1e-5, float64 1e-7/1e-7, integers exact.
Tolerance tolerance_for(DType t);

// Asserts that `actual` equals `expected` (any dtype, converted to float64) elementwise within `tol`
// (|a - e| <= atol + rtol * |e|), with NaNs equal to NaNs and infinities equal to the same infinity.
// Sizes must match exactly. Reports the first few mismatches with their index.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol);
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected);  // tol of actual's dtype

// Deterministic random test data (float64 values, then cast): normal(0, 1) floats, or integers in
// [lo, hi) for integral dtypes; bool alternates by a hash.
Tensor test_data(const Shape& sizes, DType dtype, uint64_t seed = 1, double lo = -5, double hi = 5);

// A layout variant of a tensor with the same values as `contiguous_value` (which must be contiguous):
struct Layout {
  std::string name;
  // Makes a tensor with `sizes` filled from `make(sizes)` but stored in this layout.
  std::function<Tensor(const Tensor& contiguous_value)> apply;
};
// contiguous; transposed (last two dims swapped in memory); sliced with step 2 from a larger buffer.
std::vector<Layout> layouts();

// The dtypes of each family, for parameterized loops.
std::vector<DType> float_dtypes();       // float16, bfloat16, float32, float64
std::vector<DType> all_dtypes();         // all nine
std::vector<DType> integral_dtypes();    // uint8, int8, int32, int64

// The message of the error of class E that `f` raises; empty if it raises nothing (another class
// propagates), so that a test looking for a phrase in it fails.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// A file or folder of the source tree, `rel` relative to its root ("tests/io/corpus"): under
// $TESSERA_SOURCE_DIR (ctest sets it); run by hand, in the tree this file was compiled from, else in a
// folder above the executable (a build folder inside the tree). Throws std::runtime_error naming `rel`
// and TESSERA_SOURCE_DIR when none has it.
std::string source_path(const std::string& rel);

}  // namespace tessera::testing
