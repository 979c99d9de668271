// Helpers shared by the derivative tests of the reduction and matrix-product families: float64
// leaves in every layout, and gradcheck + gradgradcheck with the report printed on failure.
//
// gradgradcheck differentiates the derivative itself, so it needs the derivatives of the ops the
// derivative is written with. Where one of those (named in `backward_ops`) is not differentiable in
// this build, the second-order check is skipped and the skip is reported on stdout; the first-order
// check always runs.
#pragma once
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace tessera::testing {

inline Tensor leaf(const Shape& s, uint64_t seed = 1) { return test_data(s, kFloat64, seed).requires_grad_(); }

// A leaf holding `value` (contiguous, float64) in the given layout.
inline Tensor leaf_in(const Layout& l, const Tensor& value) { return l.apply(value.detach()).requires_grad_(); }

// Whether `op`'s result carries a gradient (it records itself and its derivative is registered).
inline bool differentiable(const std::string& op) {
  static std::map<std::string, bool> cache;
  auto it = cache.find(op);
  if (it != cache.end()) return it->second;
  static const std::map<std::string, std::function<Tensor(const Tensor&)>> probes = {
      {"add", [](const Tensor& x) { return add(x, x); }},
      {"sub", [](const Tensor& x) { return sub(x, 1.0); }},
      {"mul", [](const Tensor& x) { return mul(x, x); }},
      {"div", [](const Tensor& x) { return div(x, 2.0); }},
      {"pow", [](const Tensor& x) { return pow(x, 2.0); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"sign", [](const Tensor& x) { return sign(x); }},
      {"where", [](const Tensor& x) { return where(gt(x, 0), x, Scalar(0.0)); }},
      {"cat", [](const Tensor& x) { return cat({x, x}, 0); }},
      {"flip", [](const Tensor& x) { return x.flip({0}); }},
      {"scatter",
       [](const Tensor& x) { return zeros({2, 2}, kFloat64).scatter(0, zeros({2, 2}, kInt64), x); }},
  };
  bool ok = false;
  EnableGradGuard grad_on;
  try {
    ok = probes.at(op)(leaf({2, 2}, 99)).requires_grad();
  } catch (const NotImplementedError&) {
    ok = false;
  }
  cache[op] = ok;
  return ok;
}

// The ops of `ops` that are not differentiable here, comma-separated ("" when all are).
inline std::string missing_derivatives(const std::vector<std::string>& ops) {
  std::string m;
  for (const std::string& op : ops)
    if (!differentiable(op)) {
      if (!m.empty()) m += ", ";
      m += op;
    }
  return m;
}

// gradcheck, then (when `second_order`) gradgradcheck unless the backward needs an op without a
// derivative here.
inline void check_grads(const std::string& what, const autograd::GradcheckFn& fn, const std::vector<Tensor>& inputs,
                        const std::vector<std::string>& backward_ops = {}, bool second_order = true) {
  SCOPED_TRACE(what);
  std::string report;
  EXPECT_TRUE(autograd::gradcheck(fn, inputs, {}, &report)) << report;
  if (!second_order) return;
  const std::string miss = missing_derivatives(backward_ops);
  if (!miss.empty()) {
    static std::set<std::string> told;
    if (told.insert(miss).second)
      std::cout << "[ note     ] gradgradcheck skipped where the backward uses " << miss
                << " (no derivative in this build)\n";
    return;
  }
  report.clear();
  EXPECT_TRUE(autograd::gradgradcheck(fn, inputs, {}, &report)) << report;
}

// Asserts exact-enough equality of a gradient with expected values (row-major).
inline ::testing::AssertionResult grad_is(const Tensor& g, const std::vector<double>& want, double tol = 1e-12) {
  if (!g.defined()) return ::testing::AssertionFailure() << "gradient is undefined";
  std::vector<double> got = g.to(kFloat64).contiguous().tolist<double>();
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "gradient has " << got.size() << " elements, expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", expected " << want[i];
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::testing
