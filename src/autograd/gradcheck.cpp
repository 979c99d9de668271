// gradcheck / gradgradcheck: compare the Jacobian autograd computes with central finite differences,
// in float64 (PyTorch's torch.autograd.gradcheck with its default eps, atol and rtol).
#include <cmath>
#include <sstream>

#include "autograd/graph.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"

namespace tessera::autograd {
namespace {

// Pointer to element `flat` (row-major over the logical shape) of a CPU float64 tensor of any strides.
double* element(const Tensor& t, int64_t flat) {
  double* p = static_cast<double*>(t.data_ptr());
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    int64_t s = t.sizes()[d];
    p += (flat % s) * t.strides()[d];
    flat /= s;
  }
  return p;
}

std::vector<Tensor> flat_outputs(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const Tensor& o : fn(inputs))
    if (o.defined() && is_floating_point(o.dtype())) out.push_back(o.to(kFloat64).detach().reshape({-1}).clone());
  return out;
}

}  // namespace

bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opts, std::string* report) {
  std::vector<size_t> wrt;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    TS_CHECK(inputs[i].dtype() == kFloat64 && inputs[i].is_cpu(), DTypeError,
             "gradcheck: inputs that require grad must be float64 CPU tensors, input ", i, " is ",
             dtype_name(inputs[i].dtype()), " on ", inputs[i].device().str());
    wrt.push_back(i);
  }
  TS_CHECK(!wrt.empty(), ValueError, "gradcheck: no input requires grad");

  // Analytical Jacobian, one output element at a time.
  std::vector<Tensor> outputs;
  for (const Tensor& o : fn(inputs))
    if (o.defined() && is_floating_point(o.dtype())) outputs.push_back(o);
  std::vector<Tensor> wrt_tensors;
  for (size_t i : wrt) wrt_tensors.push_back(inputs[i]);
  // analytic[w][o] is (numel(out o), numel(input w)) row-major.
  std::vector<std::vector<std::vector<double>>> analytic(wrt.size(), std::vector<std::vector<double>>(outputs.size()));
  for (size_t o = 0; o < outputs.size(); ++o) {
    const int64_t n_out = outputs[o].numel();
    for (size_t w = 0; w < wrt.size(); ++w) analytic[w][o].assign(n_out * inputs[wrt[w]].numel(), 0.0);
    if (!outputs[o].requires_grad()) continue;
    for (int64_t k = 0; k < n_out; ++k) {
      Tensor seed = zeros(outputs[o].sizes(), TensorOptions(outputs[o].dtype(), outputs[o].device()));
      *element(seed, k) = 1.0;
      std::vector<Tensor> g = grad({outputs[o]}, wrt_tensors, {seed}, true, false, true);
      for (size_t w = 0; w < wrt.size(); ++w) {
        if (!g[w].defined()) continue;
        std::vector<double> row = g[w].to(kFloat64).contiguous().tolist<double>();
        std::copy(row.begin(), row.end(), analytic[w][o].begin() + k * static_cast<int64_t>(row.size()));
      }
    }
  }

  // Numerical Jacobian by central differences, writing straight into the inputs' memory.
  bool ok = true;
  std::ostringstream msg;
  int reported = 0;
  NoGradGuard no_grad;
  for (size_t w = 0; w < wrt.size(); ++w) {
    const Tensor& x = inputs[wrt[w]];
    const int64_t n_in = x.numel();
    for (int64_t j = 0; j < n_in; ++j) {
      double* p = element(x, j);
      const double orig = *p;
      *p = orig + opts.eps;
      std::vector<Tensor> plus = flat_outputs(fn, inputs);
      *p = orig - opts.eps;
      std::vector<Tensor> minus = flat_outputs(fn, inputs);
      *p = orig;
      for (size_t o = 0; o < plus.size() && o < outputs.size(); ++o) {
        std::vector<double> a = plus[o].tolist<double>(), b = minus[o].tolist<double>();
        for (size_t k = 0; k < a.size(); ++k) {
          double num = (a[k] - b[k]) / (2 * opts.eps);
          double ana = analytic[w][o][k * n_in + j];
          if (std::fabs(ana - num) > opts.atol + opts.rtol * std::fabs(num) || std::isnan(ana) != std::isnan(num)) {
            ok = false;
            if (reported++ < 5)
              msg << "input " << wrt[w] << " element " << j << ", output " << o << " element " << k
                  << ": analytical " << ana << " numerical " << num << "\n";
          }
        }
      }
    }
  }
  if (!ok && report) *report = "Jacobian mismatch:\n" + msg.str();
  return ok;
}

bool gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opts, std::string* report) {
  std::vector<Tensor> outputs = fn(inputs);
  // Random upstream gradients (fixed per call) that themselves require grad.
  std::vector<Tensor> grad_outputs;
  uint64_t salt = 1;
  for (const Tensor& o : outputs) {
    if (!o.defined() || !is_floating_point(o.dtype())) continue;
    Generator gen(1234 + salt++);
    grad_outputs.push_back(randn(o.sizes(), TensorOptions(kFloat64, o.device()), &gen).requires_grad_());
  }
  const size_t n_in = inputs.size();
  GradcheckFn first_grads = [&fn, n_in](const std::vector<Tensor>& all) {
    // gradcheck evaluates this under no_grad for its finite differences; the first derivatives must
    // still be computed (without grad mode every output would look constant and nothing be compared).
    EnableGradGuard enable_grad;
    std::vector<Tensor> xs(all.begin(), all.begin() + n_in);
    std::vector<Tensor> gos(all.begin() + n_in, all.end());
    std::vector<Tensor> outs;
    for (const Tensor& o : fn(xs))
      if (o.defined() && is_floating_point(o.dtype())) outs.push_back(o);
    std::vector<Tensor> wrt;
    for (const Tensor& x : xs)
      if (x.defined() && x.requires_grad()) wrt.push_back(x);
    std::vector<Tensor> used_outs, used_gos;
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].requires_grad()) {
        used_outs.push_back(outs[i]);
        used_gos.push_back(gos[i]);
      }
    if (used_outs.empty()) return std::vector<Tensor>{};
    return grad(used_outs, wrt, used_gos, true, true, true);
  };
  std::vector<Tensor> all = inputs;
  all.insert(all.end(), grad_outputs.begin(), grad_outputs.end());
  return gradcheck(first_grads, all, opts, report);
}

}  // namespace tessera::autograd
