// oneDNN against the native CPU kernels it stands in front of (Note [oneDNN where it wins] in
// kernels/cpu/onednn/onednn.h): the same calls with oneDNN switched on and off must agree within
// tolerance, forward and backward (input, weight and bias gradients), for a table of convolution
// shapes (strides, padding, dilation, groups, channels-last, odd sizes, trailing rows no window
// reaches) and of products (transposed and sliced operands, broadcast batches, alpha and beta, a
// bias), in float32 and bfloat16. Each comparison also checks that the "on" side did run through
// oneDNN where the rule says it should, so the agreement cannot come from running the native kernel
// twice. In a build without oneDNN the tests skip.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "kernels/onednn_compare.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using namespace onednn_compare;

namespace {

struct ConvCase {
  int64_t n, c, h, w, co, kh, kw, stride, pad, dil, groups;
  bool bias, channels_last;
};

std::string name(const ConvCase& k, ts::DType dt) {
  return std::string(ts::dtype_name(dt)) + " n" + std::to_string(k.n) + " c" + std::to_string(k.c) + " " +
         std::to_string(k.h) + "x" + std::to_string(k.w) + " co" + std::to_string(k.co) + " k" + std::to_string(k.kh) +
         "x" + std::to_string(k.kw) + " s" + std::to_string(k.stride) + " p" + std::to_string(k.pad) + " d" +
         std::to_string(k.dil) + " g" + std::to_string(k.groups) + (k.bias ? " bias" : "") +
         (k.channels_last ? " channels-last" : "");
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {4, 1, 28, 28, 8, 3, 3, 1, 0, 1, 1, true, false},    // the Fashion-MNIST CNN's first layer, narrower
      {3, 16, 13, 13, 32, 3, 3, 1, 1, 1, 1, true, false},  // padded, odd image
      {2, 5, 17, 11, 7, 3, 5, 2, 1, 1, 1, false, false},   // odd channels, non-square kernel, stride 2
      {2, 6, 12, 12, 6, 3, 3, 2, 0, 1, 1, true, false},    // trailing row and column no window reaches
      {2, 8, 15, 15, 12, 3, 3, 1, 2, 2, 1, true, false},   // dilation 2
      {3, 32, 7, 7, 16, 1, 1, 1, 0, 1, 1, false, false},   // 1x1: float32 native, bfloat16 oneDNN (the rule)
      {2, 16, 9, 9, 8, 1, 1, 2, 0, 1, 1, true, true},      // 1x1 stride 2, channels-last: oneDNN in both
      {2, 8, 10, 9, 12, 3, 3, 1, 1, 1, 4, true, false},    // groups: float32 native, bfloat16 oneDNN (the rule)
      {2, 8, 9, 9, 8, 3, 3, 1, 1, 1, 8, false, true},      // depthwise, channels-last: likewise
      {2, 16, 11, 13, 24, 3, 3, 1, 1, 1, 1, true, true},   // channels-last
      {2, 12, 9, 9, 20, 3, 3, 2, 1, 1, 1, false, true},    // channels-last, stride 2
  };
  return cases;
}

// The rule of Note [oneDNN where it wins]; with `everywhere` (TESSERA_ONEDNN=all) every case.
bool onednn_expected(const ConvCase& k, ts::DType dt, bool everywhere) {
  if (dt != ts::kFloat32 && dt != ts::kBFloat16) return false;
  if (everywhere) return true;
  if (dt == ts::kBFloat16 && k.groups > 1) return true;  // grouped and depthwise bfloat16
  if (dt == ts::kFloat32 && k.groups == 1 && k.kh == 1 && k.kw == 1 && k.stride == 1 && k.pad == 0) return false;
  return k.c / k.groups >= 4;
}

void check_convolutions(bool everywhere) {
  ScopedEverywhere mode(everywhere);
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16})
    for (const ConvCase& k : conv_cases()) {
      SCOPED_TRACE(name(k, dt));
      ts::Tensor x = data({k.n, k.c, k.h, k.w}, dt, 1);
      if (k.channels_last) x = x.contiguous(ts::MemoryFormat::ChannelsLast);
      x.requires_grad_();
      ts::Tensor w = data({k.co, k.c / k.groups, k.kh, k.kw}, dt, 2).requires_grad_();
      ts::Tensor b = data({k.co}, dt, 3).requires_grad_();
      auto f = [&] {
        ts::Tensor y = ts::conv2d(x, w, k.bias ? std::optional<ts::Tensor>(b) : std::nullopt, k.stride, k.pad, k.dil,
                                  k.groups);
        ts::Tensor gy = data(y.sizes(), dt, 4);
        std::vector<ts::Tensor> inputs = {x, w};
        if (k.bias) inputs.push_back(b);
        std::vector<ts::Tensor> r = ts::autograd::grad({y}, inputs, {gy});
        r.insert(r.begin(), y.detach());
        return r;
      };
      Both both = run_both(f);
      if (onednn_expected(k, dt, everywhere)) {
        EXPECT_EQ(both.taken, 3) << "forward, input and weight gradients through oneDNN";
      } else {
        EXPECT_EQ(both.taken, 0);
      }
      EXPECT_EQ(both.on[0].is_contiguous(ts::MemoryFormat::ChannelsLast) && !both.on[0].is_contiguous(),
                both.off[0].is_contiguous(ts::MemoryFormat::ChannelsLast) && !both.off[0].is_contiguous())
          << "the output layout does not depend on oneDNN";
      const char* what[] = {"output", "input gradient", "weight gradient", "bias gradient"};
      for (size_t i = 0; i < both.on.size(); ++i) EXPECT_TRUE(agree(both.on[i], both.off[i], tol_for(dt))) << what[i];
    }
}

TEST(Onednn, ConvolutionForwardAndBackwardAgreeWithNative) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  check_convolutions(false);
}

// Every shape of the table through oneDNN (the classes the rule sends native included: strides,
// trailing rows no window reaches, groups, 1x1, one input channel), so that the geometry mapping is
// checked on all of them.
TEST(Onednn, EveryConvolutionThroughOnednnAgreesWithNative) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  check_convolutions(true);
}

TEST(Onednn, ConvTransposeAndStridedInputsAgreeWithNative) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);  // as the rule would, and the sliced input too
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16}) {
    SCOPED_TRACE(ts::dtype_name(dt));
    // conv_transpose2d without a bias is conv2d's input gradient (oneDNN); with one it stays native.
    ts::Tensor x = data({2, 8, 7, 7}, dt, 5), w = data({8, 6, 3, 3}, dt, 6), b = data({6}, dt, 7);
    Both t = run_both([&] {
      return std::vector<ts::Tensor>{ts::conv_transpose2d(x, w, std::nullopt, 2, 1, 1),
                                     ts::conv_transpose2d(x, w, b, 2, 1, 1)};
    });
    EXPECT_EQ(t.taken, 1);
    for (size_t i = 0; i < t.on.size(); ++i) EXPECT_TRUE(agree(t.on[i], t.off[i], tol_for(dt))) << "result " << i;
    // An input that is a strided view (every other column of a wider image) and a transposed weight.
    ts::Tensor wide = data({2, 4, 9, 18}, dt, 8);
    ts::Tensor xs = wide.slice(3, 0, 18, 2);
    ts::Tensor wt = data({3, 3, 4, 5}, dt, 9).permute({3, 2, 0, 1});  // (5, 4, 3, 3), not contiguous
    Both s = run_both([&] { return std::vector<ts::Tensor>{ts::conv2d(xs, wt, std::nullopt, 1, 1)}; });
    EXPECT_EQ(s.taken, 1);
    EXPECT_TRUE(agree(s.on[0], s.off[0], tol_for(dt)));
  }
}

// Small products go native under the rule: these run with every product through oneDNN.
TEST(Onednn, MatmulLayoutsAgreeWithNative) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16}) {
    SCOPED_TRACE(ts::dtype_name(dt));
    ts::Tensor a = data({37, 53}, dt, 10), b = data({53, 29}, dt, 11), c = data({37, 29}, dt, 12);
    ts::Tensor bias = data({29}, dt, 13);
    ts::Tensor ba = data({3, 37, 53}, dt, 14), bb = data({3, 53, 29}, dt, 15);
    ts::Tensor x = data({16, 53}, dt, 16).requires_grad_(), lw = data({29, 53}, dt, 17).requires_grad_();
    ts::Tensor lb = data({29}, dt, 18).requires_grad_();
    auto f = [&] {
      ts::Tensor y = ts::nn::functional::linear(x, lw, lb);
      std::vector<ts::Tensor> g = ts::autograd::grad({y}, {x, lw, lb}, {data(y.sizes(), dt, 19)});
      return std::vector<ts::Tensor>{
          ts::mm(a, b),
          ts::mm(data({53, 37}, dt, 20).t(), data({29, 53}, dt, 21).t()),  // both operands transposed
          ts::mm(a.slice(0, 0, 37, 2), b),                                  // rows with a step
          ts::addmm(c, a, b, 0.5, 2.0),                                     // beta 0.5, alpha 2
          ts::bmm(ba, bb),
          ts::matmul(ba, b),  // a broadcast batch of b
          ts::add(ts::mm(a, b), bias),
          y.detach(),
          g[0],
          g[1],
          g[2],
      };
    };
    Both both = run_both(f);
    EXPECT_GE(both.taken, 10) << "the products through oneDNN";
    for (size_t i = 0; i < both.on.size(); ++i) EXPECT_TRUE(agree(both.on[i], both.off[i], tol_for(dt))) << "result " << i;
  }
}

// Under the rule: a product of 2^20 multiply-adds goes to oneDNN, a smaller one stays native.
TEST(Onednn, MatmulRuleBySize) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16}) {
    SCOPED_TRACE(ts::dtype_name(dt));
    ts::Tensor a = data({128, 128}, dt, 24), b = data({128, 64}, dt, 25);
    Both big = run_both([&] { return std::vector<ts::Tensor>{ts::mm(a, b)}; });
    EXPECT_EQ(big.taken, 1);
    EXPECT_TRUE(agree(big.on[0], big.off[0], tol_for(dt)));
    Both small = run_both([&] { return std::vector<ts::Tensor>{ts::mm(a.slice(0, 0, 64), b)}; });
    EXPECT_EQ(small.taken, 0);
  }
}

TEST(Onednn, MatmulBetaZeroIgnoresNaNInTheOutput) {
  if (!ts::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  ScopedEverywhere all(true);
  ScopedOnednn on(true);
  ts::Tensor a = data({8, 16}, ts::kBFloat16, 22), b = data({16, 8}, ts::kBFloat16, 23);
  ts::Tensor c = ts::full({8, 8}, std::nan(""), ts::kBFloat16);
  ts::Tensor r = ts::addmm(c, a, b, 0.0, 1.0);
  ScopedOnednn off(false);
  EXPECT_TRUE(agree(r, ts::mm(a, b), 1.6e-2));
}

TEST(Onednn, SwitchOffAndOn) {
  const bool built = ts::cpu::onednn_built();
  {
    ScopedOnednn off(false);
    EXPECT_FALSE(ts::cpu::onednn_enabled());
  }
  {
    ScopedOnednn on(true);
    EXPECT_EQ(ts::cpu::onednn_enabled(), built);  // a build without it stays off
  }
  EXPECT_EQ(ts::cpu::onednn_version().empty(), !built);
}

}  // namespace
