// Normalization layers against PyTorch (values from tests/nn/torch_reference.py) and against a
// float64 reference written here; BatchNorm's running statistics in training and evaluation.
#include "nn/nn_test_util.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using namespace tessera::nn_testing;

TEST(NNNormalization, LayerNormMatchesTorch) {
  nn::LayerNorm m(ts::Shape{4, 5});
  EXPECT_TRUE(ts::equal(m.weight, ts::ones({4, 5})));
  EXPECT_TRUE(ts::equal(m.bias, ts::zeros({4, 5})));
  m.to(ts::kFloat64);
  m.load_state_dict(state("layer_norm"));
  EXPECT_TRUE(close64(m(in("layer_norm", "x")), out("layer_norm", "y")));
  // float32 in, float32 out, at float32 tolerance.
  nn::LayerNorm m32(ts::Shape{6}, 1e-3);
  m32.load_state_dict(state("layer_norm32"));
  ts::Tensor y32 = m32(in("layer_norm32", "x"));
  EXPECT_EQ(y32.dtype(), ts::kFloat32);
  EXPECT_TRUE(ts::testing::all_close(y32, out("layer_norm32", "y"), {1e-5, 1e-5}));
  EXPECT_THROW(m(ts::zeros({2, 5, 4}, ts::kFloat64)), ts::ShapeError);
  nn::LayerNorm plain(ts::Shape{3}, 1e-5, /*elementwise_affine=*/false);
  EXPECT_TRUE(plain.parameters().empty());
}

// (x - mean) / sqrt(var + eps) over the rows of a 2-D tensor, in float64 on the host.
ts::Tensor layer_norm_ref(const ts::Tensor& x, double eps) {
  const int64_t rows = x.size(0), cols = x.size(1);
  std::vector<double> v = x.to(ts::kFloat64).contiguous().tolist<double>(), want(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mu += v[r * cols + c] / cols;
    for (int64_t c = 0; c < cols; ++c) var += (v[r * cols + c] - mu) * (v[r * cols + c] - mu) / cols;
    for (int64_t c = 0; c < cols; ++c) want[r * cols + c] = (v[r * cols + c] - mu) / std::sqrt(var + eps);
  }
  return ts::tensor(want, {rows, cols}, ts::kFloat64);
}

TEST(NNNormalization, LayerNormAgainstFloat64ReferenceOnStridedAndHalfInputs) {
  ts::Tensor base = ts::testing::test_data({6, 8}, ts::kFloat64, 3) * 4.0 + 100.0;  // offset: tests cancellation
  ts::Tensor x = base.t();                                                          // (8, 6), strided
  ASSERT_FALSE(x.is_contiguous());
  EXPECT_TRUE(close64(nn::F::layer_norm(x, {6}), layer_norm_ref(x, 1e-5), 1e-9));
  ts::Tensor xf = base.to(ts::kFloat32).t();
  EXPECT_TRUE(ts::testing::all_close(nn::F::layer_norm(xf, {6}), layer_norm_ref(xf, 1e-5), {1e-4, 1e-4}));
  // 16-bit inputs are normalized in float32: only the output's rounding remains.
  ts::Tensor xh = (base - 100.0).to(ts::kBFloat16).t();
  ts::Tensor h = nn::F::layer_norm(xh, {6});
  EXPECT_EQ(h.dtype(), ts::kBFloat16);
  EXPECT_TRUE(ts::testing::all_close(h, layer_norm_ref(xh, 1e-5), {8e-3, 1e-2}));
}

TEST(NNNormalization, GroupNormMatchesTorch) {
  nn::GroupNorm m(2, 6);
  m.to(ts::kFloat64);
  m.load_state_dict(state("group_norm"));
  EXPECT_TRUE(close64(m(in("group_norm", "x")), out("group_norm", "y")));
  EXPECT_THROW(nn::GroupNorm(4, 6), ts::ValueError);
  EXPECT_THROW(m(ts::zeros({2, 4, 3}, ts::kFloat64)), ts::ShapeError);
}

TEST(NNNormalization, RMSNormMatchesDefinition) {
  nn::RMSNorm m(ts::Shape{8});
  m.to(ts::kFloat64);
  m.load_state_dict(state("rms_norm"));
  ts::Tensor x = in("rms_norm", "x");
  EXPECT_TRUE(close64(m(x), out("rms_norm", "y")));
  nn::RMSNorm e(ts::Shape{8}, 0.5);
  e.to(ts::kFloat64);
  e.load_state_dict(state("rms_norm"));
  EXPECT_TRUE(close64(e(x), out("rms_norm", "y_eps")));
  EXPECT_TRUE(close64(nn::F::rms_norm(x, {2, 8}, in("rms_norm", "w2"), 1e-5), out("rms_norm", "y2")));
}

TEST(NNNormalization, BatchNorm1dTrainingUpdatesRunningStatsAsTorch) {
  nn::BatchNorm1d m(4);
  EXPECT_EQ(m.num_batches_tracked.dtype(), ts::kInt64);
  EXPECT_EQ(m.num_batches_tracked.dim(), 0);
  m.to(ts::kFloat64);
  EXPECT_EQ(m.num_batches_tracked.dtype(), ts::kInt64);  // to(dtype) leaves integer buffers alone
  m.load_state_dict(state("bn1d"));
  for (int i = 0; i < 2; ++i) {
    std::string k = "train" + std::to_string(i);
    EXPECT_TRUE(close64(m(in("bn1d", k)), out("bn1d", k))) << k;
  }
  m.eval();
  EXPECT_TRUE(close64(m(in("bn1d", "eval")), out("bn1d", "eval")));
  EXPECT_TRUE(close64(m.running_mean, out("bn1d", "sd.running_mean")));
  EXPECT_TRUE(close64(m.running_var, out("bn1d", "sd.running_var")));  // unbiased variance
  EXPECT_EQ(m.num_batches_tracked.item<int64_t>(), 2);
  // Evaluation does not move the statistics.
  m(in("bn1d", "eval"));
  EXPECT_EQ(m.num_batches_tracked.item<int64_t>(), 2);
  EXPECT_THROW(m(ts::zeros({2, 4, 3, 3}, ts::kFloat64)), ts::ShapeError);
  m.train();
  EXPECT_THROW(m(ts::zeros({1, 4}, ts::kFloat64)), ts::ValueError);  // one value per channel
}

TEST(NNNormalization, BatchNorm2dCumulativeMomentumMatchesTorch) {
  nn::BatchNorm2d m(3, 1e-5, /*momentum=*/std::nullopt);
  m.to(ts::kFloat64);
  m.load_state_dict(state("bn2d"));
  for (int i = 0; i < 2; ++i) {
    std::string k = "train" + std::to_string(i);
    EXPECT_TRUE(close64(m(in("bn2d", k)), out("bn2d", k))) << k;
  }
  m.eval();
  EXPECT_TRUE(close64(m(in("bn2d", "eval")), out("bn2d", "eval")));
  EXPECT_TRUE(close64(m.running_var, out("bn2d", "sd.running_var")));
}

TEST(NNNormalization, BatchNormWithoutRunningStatsAlwaysUsesBatchStats) {
  nn::BatchNorm1d m(3, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  EXPECT_TRUE(m.buffers().empty());
  EXPECT_TRUE(m.state_dict().empty());
  ts::Tensor x = ts::testing::test_data({5, 3}, ts::kFloat64, 2);
  ts::Tensor train_y = m(x);
  m.eval();
  EXPECT_TRUE(close64(m(x), train_y));
  EXPECT_TRUE(close64(train_y.mean(0), ts::zeros({3}, ts::kFloat64), 1e-12));
}

TEST(NNNormalization, BatchNormReset) {
  nn::BatchNorm1d m(2);
  m(ts::randn({4, 2}) * 3.0);
  EXPECT_EQ(m.num_batches_tracked.item<int64_t>(), 1);
  m.reset_running_stats();
  EXPECT_TRUE(ts::equal(m.running_var, ts::ones({2})));
  EXPECT_EQ(m.num_batches_tracked.item<int64_t>(), 0);
}
