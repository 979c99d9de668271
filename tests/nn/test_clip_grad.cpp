// clip_grad_norm_ on the foreach ops against the composite formula it replaced (per-tensor norms in
// the accumulation dtype, stacked, their norm, one mul_ per gradient by the coefficient in the
// gradient's dtype): float32, float64, bfloat16/float16 and mixed lists, ord 2, 1, inf, -inf and 3,
// clipping and not clipping, a strided gradient, a multi-item gradient, error_if_nonfinite.
#include <cmath>
#include <limits>

#include "nn/nn_test_util.h"

namespace ts = tessera;
namespace nn = tessera::nn;
using namespace tessera::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The composite clip_grad_norm_, on copies of the gradients: returns (total, clipped gradients).
std::pair<ts::Tensor, std::vector<ts::Tensor>> composite_clip(const std::vector<ts::Tensor>& params, double max_norm,
                                                              double norm_type) {
  ts::NoGradGuard no_grad;
  std::vector<ts::Tensor> grads;
  for (const ts::Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad().clone());
  ts::DType acc = ts::kFloat32;
  for (const ts::Tensor& g : grads)
    if (g.dtype() == ts::kFloat64) acc = ts::kFloat64;
  std::vector<ts::Tensor> norms;
  for (const ts::Tensor& g : grads) {
    ts::Tensor ga = g.to(acc);
    // An empty gradient's inf norm is 0 (as _foreach_norm's); -inf is min |g| (PyTorch's vector_norm).
    if (norm_type > 0 && std::isinf(norm_type) && ga.numel() == 0) norms.push_back(ts::zeros({}, acc));
    else norms.push_back(ts::norm(ga, norm_type));
  }
  ts::Tensor all = ts::stack(norms);
  ts::Tensor total = ts::norm(all, norm_type);
  ts::Tensor coef = ts::clamp(max_norm / (total + 1e-6), std::nullopt, ts::Scalar(1.0));
  for (ts::Tensor& g : grads) g.mul_(coef.to(g.dtype()));
  return {total, grads};
}

ts::Tensor param_with_grad(const ts::Shape& shape, ts::DType dt, uint64_t seed) {
  ts::Tensor p = ts::zeros(shape, dt).requires_grad_();
  p.set_grad(test_data(shape, dt, seed, -2, 2));
  return p;
}

// Runs both on equal parameter sets and compares the totals and the clipped gradients.
void expect_matches_composite(const std::vector<ts::Tensor>& params, double max_norm, double norm_type) {
  auto [total_ref, grads_ref] = composite_clip(params, max_norm, norm_type);
  ts::Tensor total = nn::utils::clip_grad_norm_(params, max_norm, norm_type);
  EXPECT_EQ(total.dtype(), total_ref.dtype());
  EXPECT_EQ(total.dim(), 0);
  // The composite took every norm in float64 when one gradient was float64; the non-float64 gradients'
  // norms are float32 now (PyTorch's grouping), so a mixed list agrees to float32 rounding only.
  bool all_f64 = true;
  for (const ts::Tensor& p : params)
    if (p.grad().defined() && p.dtype() != ts::kFloat64) all_f64 = false;
  const Tolerance ttol = all_f64 ? Tolerance{1e-12, 0} : Tolerance{1e-5, 0};
  EXPECT_TRUE(all_close(total, total_ref, ttol)) << "norm_type " << norm_type;
  size_t k = 0;
  for (const ts::Tensor& p : params) {
    if (!p.grad().defined()) continue;
    // float64 gradients: bit-near; the others: the coefficient is applied in float32 instead of being
    // rounded to the gradient's dtype first, one rounding of the gradient's dtype apart at most.
    Tolerance tol = all_f64 ? Tolerance{1e-12, 1e-15} : tolerance_for(p.dtype());
    if (p.dtype() == ts::kFloat32 || (p.dtype() == ts::kFloat64 && !all_f64)) tol = {1e-5, 1e-7};
    EXPECT_TRUE(all_close(p.grad(), grads_ref[k++], tol))
        << "norm_type " << norm_type << ", max_norm " << max_norm << ", " << ts::dtype_name(p.dtype());
  }
}

std::vector<ts::Tensor> params_of(const std::vector<ts::DType>& dtypes, uint64_t seed) {
  const std::vector<ts::Shape> shapes = {{7, 5}, {70001}, {3}, {1}, {64, 64}, {0}, {200}};
  std::vector<ts::Tensor> ps;
  for (size_t i = 0; i < shapes.size(); ++i) ps.push_back(param_with_grad(shapes[i], dtypes[i % dtypes.size()], seed + i));
  return ps;
}

TEST(NNClipGradForeach, MatchesCompositeFormula) {
  const std::vector<std::vector<ts::DType>> lists = {{ts::kFloat32},
                                                     {ts::kFloat64},
                                                     {ts::kBFloat16, ts::kFloat16},
                                                     {ts::kFloat32, ts::kBFloat16, ts::kFloat64, ts::kFloat16}};
  uint64_t seed = 1;
  for (const auto& dtypes : lists) {
    for (double norm_type : {2.0, 1.0, kInf, -kInf, 3.0}) {
      for (double max_norm : {0.5, 1e9}) {  // clipping, and a coefficient clamped to 1
        SCOPED_TRACE(::testing::Message() << "dtypes[0] " << ts::dtype_name(dtypes[0]) << ", " << dtypes.size()
                                          << " dtypes");
        expect_matches_composite(params_of(dtypes, seed), max_norm, norm_type);
        seed += 10;
      }
    }
  }
}

TEST(NNClipGradForeach, ParametersWithoutGradAndStridedGrad) {
  ts::Tensor a = ts::zeros({6, 4}).requires_grad_();
  a.set_grad(test_data({4, 6}, ts::kFloat32, 3).t());  // non-contiguous gradient
  ASSERT_FALSE(a.grad().is_contiguous());
  ts::Tensor b = ts::zeros({3}).requires_grad_();  // no gradient: skipped
  ts::Tensor c = param_with_grad({100}, ts::kFloat32, 4);
  expect_matches_composite({a, b, c}, 0.1, 2.0);
  EXPECT_FALSE(b.grad().defined());
}

TEST(NNClipGradForeach, CoefficientAndReturnedTotal) {
  ts::Tensor a = param_with_grad({1000}, ts::kFloat32, 5);
  ts::Tensor b = param_with_grad({70000}, ts::kFloat32, 6);
  const double n = std::sqrt(a.grad().to(ts::kFloat64).pow(2).sum().item<double>() +
                             b.grad().to(ts::kFloat64).pow(2).sum().item<double>());
  ts::Tensor total = nn::utils::clip_grad_norm_({a, b}, 1.0);
  EXPECT_EQ(total.dtype(), ts::kFloat32);
  EXPECT_NEAR(total.item<double>(), n, 1e-5 * n);
  const double after = std::sqrt(a.grad().to(ts::kFloat64).pow(2).sum().item<double>() +
                                 b.grad().to(ts::kFloat64).pow(2).sum().item<double>());
  EXPECT_NEAR(after, 1.0, 1e-5);
}

TEST(NNClipGradForeach, ErrorIfNonfinite) {
  for (double bad : {std::nan(""), kInf}) {
    ts::Tensor a = param_with_grad({5}, ts::kFloat32, 7);
    ts::Tensor b = param_with_grad({70000}, ts::kBFloat16, 8);
    b.grad().narrow(0, 65540, 1).fill_(bad);
    ts::Tensor ga = a.grad().clone();
    const std::string m =
        message_of<ts::ValueError>([&] { nn::utils::clip_grad_norm_({a, b}, 1.0, 2.0, /*error_if_nonfinite=*/true); });
    EXPECT_NE(m.find("non-finite"), std::string::npos) << m;
    EXPECT_TRUE(ts::equal(a.grad(), ga));  // nothing scaled
    // Without the check: scaled by the non-finite norm, as PyTorch does.
    ts::Tensor total = nn::utils::clip_grad_norm_({a, b}, 1.0);
    EXPECT_FALSE(std::isfinite(total.item<double>()));
  }
  ts::Tensor c = ts::zeros({2}).requires_grad_();
  EXPECT_EQ(nn::utils::clip_grad_norm_({c}, 1.0).item<double>(), 0.0);
  EXPECT_THROW(nn::utils::clip_grad_norm_({c}, 1.0, 0.0), ts::ValueError);
}

}  // namespace
