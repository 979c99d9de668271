#include "common/test_util.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "runtime/philox.h"

namespace tessera::testing {

std::string source_path(const std::string& rel) {
  namespace fs = std::filesystem;
  if (const char* src = std::getenv("TESSERA_SOURCE_DIR"); src && *src) return (fs::path(src) / rel).string();
  std::error_code ec;
  // __FILE__ is tests/common/test_util.cpp of the tree; a compiler cache may have made it relative to
  // the build folder, so it is only one of the places looked in.
  const fs::path tree = fs::path(__FILE__).parent_path().parent_path().parent_path();
  if (!tree.empty() && fs::exists(tree / rel, ec)) return (tree / rel).string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = exe.parent_path(); !ec && !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
    if (fs::exists(dir / rel, ec)) return (dir / rel).string();
  throw std::runtime_error("cannot find " + rel + " of the source tree; set TESSERA_SOURCE_DIR to the tree's root (ctest sets it)");
}

Tolerance tolerance_for(DType t) {
  switch (t) {
    case DType::Float32: return {1.3e-6, 1e-5};
    case DType::Float16: return {1e-3, 1e-5};
    case DType::BFloat16: return {1.6e-2, 1e-5};
    case DType::Float64: return {1e-7, 1e-7};
    default: return {0, 0};
  }
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected) {
  return all_close(actual, expected, tolerance_for(actual.dtype()));
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol) {
  if (!actual.defined() || !expected.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (actual.sizes() != expected.sizes()) {
    std::ostringstream os;
    os << "sizes differ: actual " << actual.sizes() << " expected " << expected.sizes();
    return ::testing::AssertionFailure() << os.str();
  }
  std::vector<double> a = actual.tolist<double>(), e = expected.tolist<double>();
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < a.size(); ++i) {
    double x = a[i], y = e[i];
    bool ok;
    if (std::isnan(y)) ok = std::isnan(x);
    else if (std::isinf(y)) ok = x == y;
    else ok = std::fabs(x - y) <= tol.atol + tol.rtol * std::fabs(y);
    if (!ok) {
      if (bad < 5) os << "\n  at flat index " << i << ": actual " << x << " expected " << y << " (diff " << (x - y) << ")";
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " elements differ (rtol " << tol.rtol
                                       << ", atol " << tol.atol << ", dtype " << dtype_name(actual.dtype()) << "):"
                                       << os.str();
}

Tensor test_data(const Shape& sizes, DType dtype, uint64_t seed, double lo, double hi) {
  int64_t n = numel_of(sizes);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    PhiloxBlock b = philox4x32_10(seed * 7919 + 17, static_cast<uint64_t>(i));
    double u1 = (b.x[0] + 1.0) / 4294967297.0, u2 = b.x[1] / 4294967296.0;
    if (is_floating_point(dtype)) {
      v[i] = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
    } else if (dtype == DType::Bool) {
      v[i] = (b.x[2] & 1) ? 1 : 0;
    } else {
      double l = lo, h = hi;
      if (dtype == DType::UInt8 && l < 0) l = 0;
      v[i] = std::floor(l + (h - l) * u2);
    }
  }
  // tensor() reads empty sizes as "one dim of all the values": reshape, so that {} gives a 0-d tensor.
  return tensor(v, sizes, TensorOptions(kFloat64)).reshape(sizes).to(dtype);
}

std::vector<Layout> layouts() {
  return {
      {"contiguous", [](const Tensor& t) { return t.clone(); }},
      {"transposed",
       [](const Tensor& t) {
         if (t.dim() < 2) return t.clone();
         // Store the transpose contiguously, then view it back: same values, swapped strides.
         return t.transpose(-1, -2).contiguous().transpose(-1, -2);
       }},
      {"sliced_step2",
       [](const Tensor& t) {
         if (t.dim() == 0) return t.clone();
         Shape big = t.sizes();
         big.back() = big.back() * 2;
         Tensor buf = zeros(big, TensorOptions(t.dtype(), t.device()));
         Tensor view = buf.slice(-1, 0, std::nullopt, 2);
         view.copy_(t);
         return view;
       }},
  };
}

std::vector<DType> float_dtypes() { return {kFloat16, kBFloat16, kFloat32, kFloat64}; }
std::vector<DType> all_dtypes() { return {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}; }
std::vector<DType> integral_dtypes() { return {kUInt8, kInt8, kInt32, kInt64}; }

}  // namespace tessera::testing
