// Least-squares fit by matmul, the demo of the tensor API until the training demo exists:
// y = X w_true + noise; w = (X^T X)^-1 X^T y solved by gradient descent on the normal equations.
#include <cstdio>
#include <iostream>

#include <tessera/tessera.h>

namespace ts = tessera;

int main() {
  ts::manual_seed(0);
  const int64_t n = 1000, d = 4;
  ts::Tensor w_true = ts::tensor({2.0, -3.0, 0.5, 1.0}).view({d, 1});
  ts::Tensor X = ts::randn({n, d});
  ts::Tensor y = X.matmul(w_true) + 0.01 * ts::randn({n, 1});
  std::printf("X: (%lld, %lld) float32 from randn; y = X w_true + 0.01 noise\n", (long long)n, (long long)d);
  std::cout << "w_true = " << w_true.view({d}) << "\n";

  // Gradient descent on 0.5/n |X w - y|^2: grad = X^T (X w - y) / n.
  ts::Tensor w = ts::zeros({d, 1});
  ts::Tensor Xt = X.t();
  for (int step = 0; step <= 200; ++step) {
    ts::Tensor r = X.matmul(w) - y;
    if (step % 50 == 0)
      std::printf("step %3d  loss %.6f\n", step, 0.5 * r.pow(2).mean().item<double>());
    w = w - 0.1 * Xt.matmul(r) / double(n);
  }
  std::cout << "fitted w = " << w.view({d}) << "\n";
  std::cout << "max |w - w_true| = " << (w - w_true).abs().max().item<double>() << "\n";
  return 0;
}
