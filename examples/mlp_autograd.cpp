// A two-layer MLP written by hand with autograd, no nn modules: the weights are plain tensors with
// requires_grad_(), the forward pass is matmul + relu, the loss is cross-entropy, backward() fills
// .grad(), and the SGD update runs under NoGradGuard (so it is not recorded in the graph).
// Data: two Gaussian blobs in 2-D (class 0 around (-1, -1), class 1 around (+1, +1)), from randn.
// Prints the loss every 50 steps and the final training accuracy; exits 1 if it did not learn.
#include <cmath>
#include <cstdio>

#include <tessera/tessera.h>

namespace ts = tessera;
namespace F = ts::nn::functional;

int main() {
  ts::manual_seed(0);
  const int64_t n = 256, hidden = 16;

  // Synthetic data: half the points per class, shifted by +-1 in both coordinates.
  ts::Tensor labels = ts::cat({ts::zeros({n / 2}, ts::kInt64), ts::ones({n / 2}, ts::kInt64)});
  ts::Tensor centers = labels.to(ts::kFloat32).view({n, 1}) * 2.0 - 1.0;  // -1 or +1
  ts::Tensor x = ts::randn({n, 2}) * 0.7 + centers;
  std::printf("data: %lld points in 2-D, two Gaussian blobs, labels 0/1\n", (long long)n);

  // Parameters: leaves that require grad, scaled like PyTorch's default (1/sqrt(fan_in)).
  ts::Tensor w1 = (ts::randn({2, hidden}) * (1.0 / std::sqrt(2.0))).requires_grad_();
  ts::Tensor b1 = ts::zeros({hidden}).requires_grad_();
  ts::Tensor w2 = (ts::randn({hidden, 2}) * (1.0 / std::sqrt(double(hidden)))).requires_grad_();
  ts::Tensor b2 = ts::zeros({2}).requires_grad_();
  std::vector<ts::Tensor> params = {w1, b1, w2, b2};

  auto forward = [&](const ts::Tensor& in) { return (in.matmul(w1) + b1).relu().matmul(w2) + b2; };

  const double lr = 0.1;
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step <= 200; ++step) {
    ts::Tensor logits = forward(x);
    ts::Tensor loss = F::cross_entropy(logits, labels);
    loss.backward();  // fills w1.grad(), b1.grad(), ...
    {
      ts::NoGradGuard no_grad;  // the update itself must not be part of the graph
      for (ts::Tensor& p : params) {
        p.sub_(p.grad() * lr);
        p.grad().zero_();
      }
    }
    last_loss = loss.item<double>();
    if (step == 0) first_loss = last_loss;
    if (step % 50 == 0) std::printf("step %3d  loss %.4f\n", step, last_loss);
  }

  ts::NoGradGuard no_grad;
  ts::Tensor predicted = forward(x).argmax(1);
  const double accuracy = predicted.eq(labels).to(ts::kFloat64).mean().item<double>();
  std::printf("final training accuracy: %.1f%%\n", 100.0 * accuracy);
  if (!(last_loss < first_loss) || accuracy < 0.9) {
    std::printf("FAILED: the MLP did not learn (loss %.4f -> %.4f)\n", first_loss, last_loss);
    return 1;
  }
  return 0;
}
