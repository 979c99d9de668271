// Tensor printing against PyTorch's own output: every expected string below is what
// /usr/bin/python3 -c "import torch; print(torch.tensor(...))" prints for the same values (PyTorch
// 1.13, default print options), with "torch." dropped from the dtype suffix and the suffix's line
// wrapping computed for that shorter suffix, as tessera prints it.
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "common/test_util.h"

namespace ts = tessera;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A float32 tensor whose element i is f(i), computed in float32 as PyTorch computes it.
ts::Tensor host_float(int64_t n, const std::function<float(int64_t)>& f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = f(i);
  return ts::tensor(v);
}

}  // namespace

TEST(Print, IntsAsFloat) {
  EXPECT_EQ(ts::tensor({1., 2., 3.}).str(),
            "tensor([1., 2., 3.])");
}

TEST(Print, Matrix) {
  EXPECT_EQ(ts::tensor({1.0, 2.5, 3.0, 4.0}).view({2, 2}).str(),
            "tensor([[1.0000, 2.5000],\n        [3.0000, 4.0000]])");
}

TEST(Print, Sci) {
  EXPECT_EQ(ts::tensor({1e-5, 1e5}).str(),
            "tensor([1.0000e-05, 1.0000e+05])");
}

TEST(Print, SciBig) {
  EXPECT_EQ(ts::tensor({1e9, 2.0}).str(),
            "tensor([1.0000e+09, 2.0000e+00])");
}

TEST(Print, Small) {
  EXPECT_EQ(ts::tensor({0.00001234, 0.5}).str(),
            "tensor([1.2340e-05, 5.0000e-01])");
}

TEST(Print, NanInf) {
  EXPECT_EQ(ts::tensor({1.5, kNaN, kInf, -kInf}).str(),
            "tensor([1.5000,    nan,    inf,   -inf])");
}

TEST(Print, NanOnly) {
  EXPECT_EQ(ts::tensor({kNaN, kInf}).str(),
            "tensor([nan, inf])");
}

TEST(Print, IntNan) {
  EXPECT_EQ(ts::tensor({1., kNaN, -2.}).str(),
            "tensor([ 1., nan, -2.])");
}

TEST(Print, Zeros) {
  EXPECT_EQ(ts::zeros({3}).str(),
            "tensor([0., 0., 0.])");
}

TEST(Print, Neg) {
  EXPECT_EQ(ts::tensor({-1.5, 2.25, -0.125}).str(),
            "tensor([-1.5000,  2.2500, -0.1250])");
}

TEST(Print, Ints) {
  EXPECT_EQ(ts::tensor(std::vector<int64_t>{1, -20, 300}).str(),
            "tensor([  1, -20, 300])");
}

TEST(Print, Int32) {
  EXPECT_EQ(ts::tensor(std::vector<int32_t>{1, 2}).str(),
            "tensor([1, 2], dtype=int32)");
}

TEST(Print, Uint8) {
  EXPECT_EQ(ts::tensor(std::vector<uint8_t>{0, 255}).str(),
            "tensor([  0, 255], dtype=uint8)");
}

TEST(Print, Bool) {
  EXPECT_EQ(ts::tensor(std::vector<bool>{true, false}).str(),
            "tensor([ True, False])");
}

TEST(Print, F64) {
  EXPECT_EQ(ts::tensor({1.5, 2.0}, ts::kFloat64).str(),
            "tensor([1.5000, 2.0000], dtype=float64)");
}

TEST(Print, F16) {
  EXPECT_EQ(ts::tensor({0.1, 2.0}, ts::kFloat16).str(),
            "tensor([0.1000, 2.0000], dtype=float16)");
}

TEST(Print, Bf16) {
  EXPECT_EQ(ts::tensor({1.0, 3.0, 5.0, 7.0}, ts::kBFloat16).view({2, 2}).str(),
            "tensor([[1., 3.],\n        [5., 7.]], dtype=bfloat16)");
}

TEST(Print, Scalar) {
  EXPECT_EQ(ts::scalar_tensor(3.5, ts::kFloat32).str(),
            "tensor(3.5000)");
}

TEST(Print, ScalarInt) {
  EXPECT_EQ(ts::scalar_tensor(int64_t{7}).str(),
            "tensor(7)");
}

TEST(Print, ScalarF64) {
  EXPECT_EQ(ts::scalar_tensor(2.0, ts::kFloat64).str(),
            "tensor(2., dtype=float64)");
}

TEST(Print, Empty) {
  EXPECT_EQ(ts::empty({0, 3}).str(),
            "tensor([], size=(0, 3))");
}

TEST(Print, Empty1) {
  EXPECT_EQ(ts::empty({0}).str(),
            "tensor([])");
}

TEST(Print, EmptyInt) {
  EXPECT_EQ(ts::empty({0}, ts::kInt64).str(),
            "tensor([], dtype=int64)");
}

TEST(Print, EmptyF643d) {
  EXPECT_EQ(ts::empty({2, 0, 3}, ts::kFloat64).str(),
            "tensor([], size=(2, 0, 3), dtype=float64)");
}

TEST(Print, Meta) {
  EXPECT_EQ(ts::empty({2, 3}, ts::kMeta).str(),
            "tensor(..., device='meta', size=(2, 3))");
}

TEST(Print, MetaInt) {
  EXPECT_EQ(ts::empty({4}, {ts::kInt64, ts::kMeta}).str(),
            "tensor(..., device='meta', size=(4,), dtype=int64)");
}

TEST(Print, Summ1d) {
  EXPECT_EQ(ts::arange(2000).to(ts::kFloat32).str(),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])");
}

TEST(Print, Summ2d) {
  EXPECT_EQ(ts::arange(2000).view({40, 50}).str(),
            "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n        [  50,   51,   52,  ...,   97,   98,   99],\n        [ 100,  101,  102,  ...,  147,  148,  149],\n        ...,\n        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n        [1950, 1951, 1952,  ..., 1997, 1998, 1999]])");
}

TEST(Print, Summ3d) {
  EXPECT_EQ(host_float(1200, [](int64_t i) { return static_cast<float>(i) / 7.0f; }).view({12, 10, 10}).str(),
            "tensor([[[0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 1.0000e+00,\n          1.1429e+00, 1.2857e+00],\n         [1.4286e+00, 1.5714e+00, 1.7143e+00,  ..., 2.4286e+00,\n          2.5714e+00, 2.7143e+00],\n         [2.8571e+00, 3.0000e+00, 3.1429e+00,  ..., 3.8571e+00,\n          4.0000e+00, 4.1429e+00],\n         ...,\n         [1.0000e+01, 1.0143e+01, 1.0286e+01,  ..., 1.1000e+01,\n          1.1143e+01, 1.1286e+01],\n         [1.1429e+01, 1.1571e+01, 1.1714e+01,  ..., 1.2429e+01,\n          1.2571e+01, 1.2714e+01],\n         [1.2857e+01, 1.3000e+01, 1.3143e+01,  ..., 1.3857e+01,\n          1.4000e+01, 1.4143e+01]],\n\n        [[1.4286e+01, 1.4429e+01, 1.4571e+01,  ..., 1.5286e+01,\n          1.5429e+01, 1.5571e+01],\n         [1.5714e+01, 1.5857e+01, 1.6000e+01,  ..., 1.6714e+01,\n          1.6857e+01, 1.7000e+01],\n         [1.7143e+01, 1.7286e+01, 1.7429e+01,  ..., 1.8143e+01,\n          1.8286e+01, 1.8429e+01],\n         ...,\n         [2.4286e+01, 2.4429e+01, 2.4571e+01,  ..., 2.5286e+01,\n          2.5429e+01, 2.5571e+01],\n         [2.5714e+01, 2.5857e+01, 2.6000e+01,  ..., 2.6714e+01,\n          2.6857e+01, 2.7000e+01],\n         [2.7143e+01, 2.7286e+01, 2.7429e+01,  ..., 2.8143e+01,\n          2.8286e+01, 2.8429e+01]],\n\n        [[2.8571e+01, 2.8714e+01, 2.8857e+01,  ..., 2.9571e+01,\n          2.9714e+01, 2.9857e+01],\n         [3.0000e+01, 3.0143e+01, 3.0286e+01,  ..., 3.1000e+01,\n          3.1143e+01, 3.1286e+01],\n         [3.1429e+01, 3.1571e+01, 3.1714e+01,  ..., 3.2429e+01,\n          3.2571e+01, 3.2714e+01],\n         ...,\n         [3.8571e+01, 3.8714e+01, 3.8857e+01,  ..., 3.9571e+01,\n          3.9714e+01, 3.9857e+01],\n         [4.0000e+01, 4.0143e+01, 4.0286e+01,  ..., 4.1000e+01,\n          4.1143e+01, 4.1286e+01],\n         [4.1429e+01, 4.1571e+01, 4.1714e+01,  ..., 4.2429e+01,\n          4.2571e+01, 4.2714e+01]],\n\n        ...,\n\n        [[1.2857e+02, 1.2871e+02, 1.2886e+02,  ..., 1.2957e+02,\n          1.2971e+02, 1.2986e+02],\n         [1.3000e+02, 1.3014e+02, 1.3029e+02,  ..., 1.3100e+02,\n          1.3114e+02, 1.3129e+02],\n         [1.3143e+02, 1.3157e+02, 1.3171e+02,  ..., 1.3243e+02,\n          1.3257e+02, 1.3271e+02],\n         ...,\n         [1.3857e+02, 1.3871e+02, 1.3886e+02,  ..., 1.3957e+02,\n          1.3971e+02, 1.3986e+02],\n         [1.4000e+02, 1.4014e+02, 1.4029e+02,  ..., 1.4100e+02,\n          1.4114e+02, 1.4129e+02],\n         [1.4143e+02, 1.4157e+02, 1.4171e+02,  ..., 1.4243e+02,\n          1.4257e+02, 1.4271e+02]],\n\n        [[1.4286e+02, 1.4300e+02, 1.4314e+02,  ..., 1.4386e+02,\n          1.4400e+02, 1.4414e+02],\n         [1.4429e+02, 1.4443e+02, 1.4457e+02,  ..., 1.4529e+02,\n          1.4543e+02, 1.4557e+02],\n         [1.4571e+02, 1.4586e+02, 1.4600e+02,  ..., 1.4671e+02,\n          1.4686e+02, 1.4700e+02],\n         ...,\n         [1.5286e+02, 1.5300e+02, 1.5314e+02,  ..., 1.5386e+02,\n          1.5400e+02, 1.5414e+02],\n         [1.5429e+02, 1.5443e+02, 1.5457e+02,  ..., 1.5529e+02,\n          1.5543e+02, 1.5557e+02],\n         [1.5571e+02, 1.5586e+02, 1.5600e+02,  ..., 1.5671e+02,\n          1.5686e+02, 1.5700e+02]],\n\n        [[1.5714e+02, 1.5729e+02, 1.5743e+02,  ..., 1.5814e+02,\n          1.5829e+02, 1.5843e+02],\n         [1.5857e+02, 1.5871e+02, 1.5886e+02,  ..., 1.5957e+02,\n          1.5971e+02, 1.5986e+02],\n         [1.6000e+02, 1.6014e+02, 1.6029e+02,  ..., 1.6100e+02,\n          1.6114e+02, 1.6129e+02],\n         ...,\n         [1.6714e+02, 1.6729e+02, 1.6743e+02,  ..., 1.6814e+02,\n          1.6829e+02, 1.6843e+02],\n         [1.6857e+02, 1.6871e+02, 1.6886e+02,  ..., 1.6957e+02,\n          1.6971e+02, 1.6986e+02],\n         [1.7000e+02, 1.7014e+02, 1.7029e+02,  ..., 1.7100e+02,\n          1.7114e+02, 1.7129e+02]]])");
}

TEST(Print, Wrap) {
  EXPECT_EQ(host_float(30, [](int64_t i) { return static_cast<float>(i) * 1.5f; }).str(),
            "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000])");
}

TEST(Print, WrapInts) {
  EXPECT_EQ(ts::arange(40).str(),
            "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n        36, 37, 38, 39])");
}

TEST(Print, Cube) {
  EXPECT_EQ(host_float(12, [](int64_t i) { return static_cast<float>(i) / 4.0f; }).view({2, 3, 2}).str(),
            "tensor([[[0.0000, 0.2500],\n         [0.5000, 0.7500],\n         [1.0000, 1.2500]],\n\n        [[1.5000, 1.7500],\n         [2.0000, 2.2500],\n         [2.5000, 2.7500]]])");
}

TEST(Print, MixedSci) {
  EXPECT_EQ(ts::tensor({1e-8, 1.0, 123456.0, -3.0}).view({2, 2}).str(),
            "tensor([[ 1.0000e-08,  1.0000e+00],\n        [ 1.2346e+05, -3.0000e+00]])");
}

TEST(Print, NegZero) {
  EXPECT_EQ(ts::tensor({-0.0, 1.0}).str(),
            "tensor([-0., 1.])");
}

TEST(Print, BigIntFloat) {
  EXPECT_EQ(ts::tensor({123456789.0, 1.0}).str(),
            "tensor([1.2346e+08, 1.0000e+00])");
}

TEST(Print, WrapFloat64SuffixOnLastLine) {
  std::vector<double> v(25);
  for (int i = 0; i < 25; ++i) v[i] = i / 3.0;
  EXPECT_EQ(ts::tensor(v, {}, ts::kFloat64).str(),
            "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n        3.0000, 3.3333, 3.6667, 4.0000, 4.3333, 4.6667, 5.0000, 5.3333, 5.6667,\n        6.0000, 6.3333, 6.6667, 7.0000, 7.3333, 7.6667, 8.0000], dtype=float64)");
}

TEST(Print, TransposedAndSlicedViewsPrintLogicalOrder) {
  ts::Tensor m = ts::tensor({1., 2., 3., 4.}).view({2, 2});
  EXPECT_EQ(m.t().str(), "tensor([[1., 3.],\n        [2., 4.]])");
  EXPECT_EQ(ts::arange(10).slice(0, 1, 9, 3).str(), "tensor([1, 4, 7])");
}

TEST(Print, StreamOperatorMatchesStr) {
  ts::Tensor t = ts::tensor({0.5, -1.25});
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), t.str());
  EXPECT_EQ(os.str(), "tensor([ 0.5000, -1.2500])");
}

TEST(Print, SummarizesOnlyAboveThreshold) {
  // 1000 elements print in full; 1001 are summarized with "...".
  EXPECT_EQ(ts::arange(1000).str().find("..."), std::string::npos);
  EXPECT_NE(ts::arange(1001).str().find("..."), std::string::npos);
}

TEST(Print, UndefinedTensor) { EXPECT_EQ(ts::Tensor().str(), "tensor(undefined)"); }
