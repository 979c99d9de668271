// What the oneDNN tests share (tests/kernels/test_onednn*.cpp): test data in a dtype, the comparison
// of two results within a tolerance relative to the expected result's magnitude, and running one
// computation with oneDNN on and then off while counting the calls oneDNN took (so that an agreement
// cannot come from running the native kernel twice).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "kernels/cpu/onednn/onednn.h"
#include "tessera/tessera.h"

namespace onednn_compare {

namespace ts = tessera;
using ts::cpu::onednn::ScopedOnednn;

inline ts::Tensor data(const ts::Shape& s, ts::DType dt, uint64_t seed) {
  return ts::testing::test_data(s, ts::kFloat32, seed).to(dt);
}

// |a - e| <= tol * max|e| elementwise: the two sides sum the same products in other orders (and in
// bfloat16 each rounds its float32 sum once), so the error scales with the result's magnitude.
inline ::testing::AssertionResult agree(const ts::Tensor& a, const ts::Tensor& e, double tol) {
  if (a.sizes() != e.sizes()) return ::testing::AssertionFailure() << "sizes differ";
  const std::vector<double> av = a.to(ts::kFloat64).flatten().tolist<double>();
  const std::vector<double> ev = e.to(ts::kFloat64).flatten().tolist<double>();
  double scale = 0;
  for (double v : ev) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < av.size(); ++i)
    if (!(std::abs(av[i] - ev[i]) <= tol * scale + 1e-30))
      return ::testing::AssertionFailure() << "element " << i << ": " << av[i] << " vs " << ev[i] << " (scale " << scale
                                           << ")";
  return ::testing::AssertionSuccess();
}

inline double tol_for(ts::DType dt) { return dt == ts::kBFloat16 ? 1.6e-2 : 2e-5; }

// How many calls oneDNN took while f ran (under whatever mode the caller set).
inline int64_t calls_taken_by(const std::function<void()>& f) {
  const int64_t before = ts::cpu::onednn::calls_taken();
  f();
  return ts::cpu::onednn::calls_taken() - before;
}

// Runs f with oneDNN on, then off; returns both results and whether the "on" run went through oneDNN.
struct Both {
  std::vector<ts::Tensor> on, off;
  int64_t taken;
};
inline Both run_both(const std::function<std::vector<ts::Tensor>()>& f) {
  Both b;
  {
    ScopedOnednn s(true);
    const int64_t before = ts::cpu::onednn::calls_taken();
    b.on = f();
    b.taken = ts::cpu::onednn::calls_taken() - before;
  }
  {
    ScopedOnednn s(false);
    const int64_t before = ts::cpu::onednn::calls_taken();
    b.off = f();
    EXPECT_EQ(ts::cpu::onednn::calls_taken(), before) << "oneDNN ran while switched off";
  }
  return b;
}

// An op's errors are raised before any kernel runs, so they are the same with oneDNN on and off:
// messages() gives each error's message (ts::testing::message_of), run once each way.
inline void expect_same_errors_either_way(const std::function<std::vector<std::string>()>& messages) {
  std::vector<std::string> on, off;
  {
    ScopedOnednn s(true);
    on = messages();
  }
  {
    ScopedOnednn s(false);
    off = messages();
  }
  EXPECT_EQ(on, off);
  for (const std::string& m : on) EXPECT_FALSE(m.empty()) << "an expected error was not raised";
}

// Sets TESSERA_ONEDNN=all's mode for a scope.
struct ScopedEverywhere {
  explicit ScopedEverywhere(bool on) : saved(ts::cpu::onednn::set_everywhere(on)) {}
  ~ScopedEverywhere() { ts::cpu::onednn::set_everywhere(saved); }
  bool saved;
};

}  // namespace onednn_compare
