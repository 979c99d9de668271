// Custom autograd functions with ts::autograd::Function, as torch.autograd.Function:
//  - Softplus(x, beta): a numerically stable forward, log1p(exp(-beta |x|)) / beta + max(x, 0),
//    with a hand-written backward, sigmoid(beta x) * grad. A non-tensor argument (beta) is kept in
//    ctx.scalars. Checked against finite differences with gradcheck and gradgradcheck (float64):
//    the backward is written with tessera ops, so it is differentiable again.
//  - RoundSTE(x): round() forward with a straight-through gradient (identity) backward, the trick
//    used for quantization-aware training; the true derivative is 0 almost everywhere, so here the
//    custom gradient is the point.
// Exits 1 if a check fails.
#include <cstdio>
#include <iostream>
#include <string>

#include <tessera/tessera.h>

namespace ts = tessera;
using ts::autograd::FunctionContext;

struct Softplus : ts::autograd::Function<Softplus> {
  static ts::Tensor forward(FunctionContext& ctx, const ts::Tensor& x, double beta) {
    ctx.save_for_backward({x});
    ctx.scalars["beta"] = beta;
    return (x.abs() * -beta).exp().log1p() / beta + x.clamp(0.0);
  }
  static std::vector<ts::Tensor> backward(FunctionContext& ctx, const std::vector<ts::Tensor>& grad_outputs) {
    const ts::Tensor x = ctx.saved_tensors()[0];  // a copy: saved_tensors() returns a temporary vector
    return {grad_outputs[0] * (x * ctx.scalars.at("beta")).sigmoid()};
  }
};

struct RoundSTE : ts::autograd::Function<RoundSTE> {
  static constexpr const char* name = "RoundSTEBackward";
  static ts::Tensor forward(FunctionContext&, const ts::Tensor& x) { return x.round(); }
  static std::vector<ts::Tensor> backward(FunctionContext&, const std::vector<ts::Tensor>& grad_outputs) {
    return {grad_outputs[0]};  // pass the gradient straight through
  }
};

int main() {
  ts::manual_seed(0);
  bool ok = true;

  // 1. Softplus: values, node name, gradcheck and gradgradcheck.
  ts::Tensor x = (ts::randn({3, 4}, ts::kFloat64) * 3.0).requires_grad_();
  ts::Tensor y = Softplus::apply(x, 2.0);
  std::printf("Softplus::apply(x, beta=2): grad_fn = %s\n", y.grad_fn()->name().c_str());
  const double value_err = (y - x.detach().softplus(2.0, 100.0)).abs().max().item<double>();
  std::printf("max |custom - built-in softplus| = %.3g\n", value_err);
  ok = ok && value_err < 1e-12;

  ts::autograd::GradcheckFn fn = [](const std::vector<ts::Tensor>& in) {
    return std::vector<ts::Tensor>{Softplus::apply(in[0], 2.0)};
  };
  std::string report;
  const bool g1 = ts::autograd::gradcheck(fn, {x}, {}, &report);
  std::printf("gradcheck:     %s%s\n", g1 ? "passed" : "FAILED\n", report.c_str());
  report.clear();
  const bool g2 = ts::autograd::gradgradcheck(fn, {x}, {}, &report);
  std::printf("gradgradcheck: %s%s\n", g2 ? "passed" : "FAILED\n", report.c_str());
  ok = ok && g1 && g2;

  // 2. RoundSTE: forward rounds, backward is the identity.
  ts::Tensor w = ts::tensor({0.2, 1.7, -0.6, 2.5}).requires_grad_();
  ts::Tensor q = RoundSTE::apply(w);
  (q * ts::tensor({1.0, 2.0, 3.0, 4.0})).sum().backward();
  std::cout << "RoundSTE forward: " << q.detach() << "\n";
  std::cout << "gradient reaching w (straight through): " << w.grad() << "\n";
  ok = ok && w.grad().eq(ts::tensor({1.0, 2.0, 3.0, 4.0})).all().item<bool>();

  // 3. Under no_grad no node is recorded.
  {
    ts::NoGradGuard no_grad;
    ok = ok && Softplus::apply(x, 1.0).grad_fn() == nullptr;
  }

  std::printf("%s\n", ok ? "all checks passed" : "FAILED");
  return ok ? 0 : 1;
}
