// Losses against PyTorch (tests/nn/torch_reference.py): every reduction, class weights,
// ignore_index, label smoothing, probability targets, pos_weight, log_target; numerically extreme
// inputs; errors.
#include "nn/nn_test_util.h"

namespace ts = tessera;
namespace nn = tessera::nn;
namespace F = tessera::nn::functional;
using namespace tessera::nn_testing;

namespace {
const std::vector<std::string> kReductions = {"none", "mean", "sum"};
}

TEST(NNLosses, CrossEntropyClassIndices) {
  ts::Tensor x = in("ce", "x"), t = in("ce", "t"), w = in("ce", "w");
  for (const std::string& r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(close64(F::cross_entropy(x, t, std::nullopt, -100, r), out("ce", r)));
    EXPECT_TRUE(close64(F::cross_entropy(x, t, w, -100, r), out("ce", r + "_w")));
    EXPECT_TRUE(close64(F::cross_entropy(x, t, std::nullopt, -100, r, 0.1), out("ce", r + "_ls")));
    EXPECT_TRUE(close64(F::cross_entropy(x, t, w, -100, r, 0.2), out("ce", r + "_w_ls")));
    EXPECT_TRUE(close64(F::cross_entropy(in("ce", "x3"), in("ce", "t3"), w, -100, r), out("ce", r + "_3d")));
    EXPECT_TRUE(close64(F::nll_loss(x.log_softmax(1), t, w, -100, r), out("ce", r + "_nll")));
  }
  EXPECT_TRUE(close64(F::cross_entropy(x, t.clamp(0), std::nullopt, 3), out("ce", "ignore0")));
  EXPECT_TRUE(close64(F::cross_entropy(x[0], t[0]), out("ce", "unbatched")));
  // Module spelling, options as keywords.
  nn::CrossEntropyLoss loss({.weight = w, .label_smoothing = 0.2});
  EXPECT_TRUE(close64(loss(x, t), out("ce", "mean_w_ls")));
  EXPECT_TRUE(loss.state_dict().count("weight"));
}

TEST(NNLosses, CrossEntropyProbabilities) {
  ts::Tensor x = in("ce", "x"), p = in("ce", "p"), w = in("ce", "w");
  for (const std::string& r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(close64(F::cross_entropy(x, p, std::nullopt, -100, r), out("ce", r + "_prob")));
    EXPECT_TRUE(close64(F::cross_entropy(x, p, w, -100, r, 0.3), out("ce", r + "_prob_w_ls")));
  }
}

TEST(NNLosses, CrossEntropyIsStableForLargeLogits) {
  ts::Tensor y = F::cross_entropy(in("ce", "big"), ts::tensor(std::vector<int64_t>{1, 2}), std::nullopt, -100, "none");
  EXPECT_TRUE(ts::isfinite(y).all().item<bool>());
  EXPECT_TRUE(close64(y, out("ce", "big")));
  ts::Tensor y32 = F::cross_entropy(in("ce", "big").to(ts::kFloat32), ts::tensor(std::vector<int64_t>{1, 2}),
                                    std::nullopt, -100, "none");
  EXPECT_TRUE(ts::testing::all_close(y32, out("ce", "big"), {1e-5, 1e-5}));
}

TEST(NNLosses, CrossEntropyErrors) {
  ts::Tensor x = in("ce", "x"), t = in("ce", "t");
  EXPECT_THROW(F::cross_entropy(x, t, std::nullopt, -100, "avg"), ts::ValueError);
  EXPECT_THROW(F::cross_entropy(x, ts::tensor(std::vector<int64_t>{0, 4, 1, 1, 1, 1})), ts::IndexError);
  EXPECT_THROW(F::cross_entropy(x, t.slice(0, 0, 5)), ts::ValueError);  // batch size
  EXPECT_THROW(F::cross_entropy(x, t, ts::ones({3}, ts::kFloat64)), ts::ShapeError);
  EXPECT_THROW(F::cross_entropy(x, t, std::nullopt, -100, "mean", 1.5), ts::ValueError);
  EXPECT_THROW(F::cross_entropy(x, ts::zeros({6, 3}, ts::kFloat64)), ts::ShapeError);
  EXPECT_THROW(F::nll_loss(x, t.to(ts::kFloat64)), ts::DTypeError);
  // Every target ignored: mean is 0 / 0, as PyTorch.
  ts::Tensor all_ignored = ts::full({6}, -100, ts::kInt64);
  EXPECT_TRUE(std::isnan(F::cross_entropy(x, all_ignored).item<double>()));
  EXPECT_EQ(F::cross_entropy(x, all_ignored, std::nullopt, -100, "sum").item<double>(), 0.0);
}

TEST(NNLosses, RegressionLosses) {
  ts::Tensor a = in("reg", "a"), b = in("reg", "b");
  for (const std::string& r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(close64(F::mse_loss(a, b, r), out("reg", "mse_" + r)));
    EXPECT_TRUE(close64(F::l1_loss(a, b, r), out("reg", "l1_" + r)));
    EXPECT_TRUE(close64(F::smooth_l1_loss(a, b, r, 0.5), out("reg", "smooth_l1_" + r)));
    EXPECT_TRUE(close64(F::huber_loss(a, b, r, 0.7), out("reg", "huber_" + r)));
  }
  EXPECT_TRUE(close64(F::smooth_l1_loss(a, b, "mean", 0.0), out("reg", "smooth_l1_beta0")));
  EXPECT_TRUE(close64(nn::MSELoss()(a, b), out("reg", "mse_mean")));
  EXPECT_TRUE(close64(nn::L1Loss("sum")(a, b), out("reg", "l1_sum")));
  EXPECT_TRUE(close64(nn::SmoothL1Loss("none", 0.5)(a, b), out("reg", "smooth_l1_none")));
  EXPECT_TRUE(close64(nn::HuberLoss("mean", 0.7)(a, b), out("reg", "huber_mean")));
  EXPECT_THROW(F::smooth_l1_loss(a, b, "mean", -1.0), ts::ValueError);
  EXPECT_THROW(nn::MSELoss("batchmean"), ts::ValueError);
}

TEST(NNLosses, BinaryCrossEntropy) {
  ts::Tensor p = in("bce", "p"), t = in("bce", "t"), w = in("bce", "w");
  ts::Tensor logits = in("bce", "logits"), pw = in("bce", "pw");
  for (const std::string& r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(close64(F::binary_cross_entropy(p, t, std::nullopt, r), out("bce", "bce_" + r)));
    EXPECT_TRUE(close64(F::binary_cross_entropy(p, t, w, r), out("bce", "bce_w_" + r)));
    EXPECT_TRUE(close64(F::binary_cross_entropy_with_logits(logits, t, std::nullopt, r), out("bce", "bcel_" + r)));
    EXPECT_TRUE(close64(F::binary_cross_entropy_with_logits(logits, t, w, r, pw), out("bce", "bcel_w_pw_" + r)));
  }
  nn::BCEWithLogitsLoss loss({.weight = w, .pos_weight = pw});
  EXPECT_TRUE(close64(loss(logits, t), out("bce", "bcel_w_pw_mean")));
  EXPECT_TRUE(close64(nn::BCELoss({.weight = std::nullopt, .reduction = "sum"})(p, t), out("bce", "bce_sum")));
  // Logits of +-80 in float32: the stable form stays finite and exact.
  ts::Tensor l32 = F::binary_cross_entropy_with_logits(logits.to(ts::kFloat32), t.to(ts::kFloat32), std::nullopt, "none");
  EXPECT_TRUE(ts::isfinite(l32).all().item<bool>());
  EXPECT_TRUE(ts::testing::all_close(l32, out("bce", "bcel_none"), {1e-5, 1e-5}));
  EXPECT_THROW(F::binary_cross_entropy(p * 2.0, t), ts::ValueError);
  EXPECT_THROW(F::binary_cross_entropy(p, t.slice(0, 0, 2)), ts::ShapeError);
}

TEST(NNLosses, KLDivergence) {
  ts::Tensor x = in("kl", "input"), t = in("kl", "target"), lt = in("kl", "log_target");
  for (std::string r : {"none", "mean", "sum", "batchmean"}) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(close64(F::kl_div(x, t, r), out("kl", r)));
    EXPECT_TRUE(close64(F::kl_div(x, lt, r, true), out("kl", std::string("log_") + r)));
  }
  EXPECT_TRUE(close64(nn::KLDivLoss("batchmean")(x, t), out("kl", "batchmean")));
  EXPECT_THROW(F::kl_div(x, t, "avg"), ts::ValueError);
}
