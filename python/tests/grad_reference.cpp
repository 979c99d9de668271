// python_grad_reference OUT.safetensors: the C++ side of test_grad_reference.py. It builds a few models
// and ops with tessera's C++ API, computes a loss and its gradients, and writes the inputs, the
// weights, the loss and every gradient into one safetensors file; the pytest loads the same weights
// and inputs into the Python models (the examples' Net and GPT, built from tessera.nn in Python) and
// ops, differentiates from Python and compares. So what the Python layer adds (attribute registration,
// the wrapped modules, argument parsing, the optimizer's view of the parameters) is checked against
// the C++ results, not against a re-implementation in Python.
//
// Names: "<case>.in.<name>" inputs, "<case>.param.<name>" weights (state_dict names),
// "<case>.grad.<name>" gradients of params and inputs, "<case>.loss" the loss.
//   cnn:  models::CNN (the Fashion-MNIST CNN), cross_entropy over a batch of 4 random images;
//   mlp:  models::MLP(20, {16, 16}, 5), cross_entropy;
//   gpt:  models::GPT2 with 2 layers, 2 heads, embd 32, context 16, vocabulary 256, no dropout, the
//         fused kernels on (add + layer norm, mlp_gelu, the chunked linear_cross_entropy loss);
//   ops:  layer_norm, GELU (tanh), log_softmax, causal scaled_dot_product_attention and embedding,
//         each loss = sum(f(inputs) * r) with a random r written as "ops.in.r_<op>".
#include <cstdio>
#include <map>
#include <string>

#include "tessera/models.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace F = ts::nn::functional;

namespace {

using Tensors = std::map<std::string, ts::Tensor>;

void put_module(Tensors& out, const std::string& c, ts::nn::Module& m) {
  for (auto& [name, p] : m.named_parameters()) {
    out[c + ".param." + name] = p.detach();
    if (p.grad().defined()) out[c + ".grad." + name] = p.grad();
  }
}

void classifier_case(Tensors& out, const std::string& c, ts::nn::Module& net, const ts::Shape& x_shape) {
  ts::Tensor x = ts::randn(x_shape);
  ts::Tensor y = ts::randint(0, 5, {x_shape[0]});  // labels valid for both heads (10 and 5 classes)
  ts::Tensor loss = F::cross_entropy(net(x), y);
  loss.backward();
  out[c + ".in.x"] = x;
  out[c + ".in.y"] = y;
  out[c + ".loss"] = loss.detach();
  put_module(out, c, net);
}

// loss = sum(f(inputs) * r): every input's gradient, and r, written under `name`.
template <class Fn>
void op_case(Tensors& out, const std::string& name, std::vector<std::pair<std::string, ts::Tensor>> inputs, Fn fn) {
  for (auto& [k, t] : inputs)
    if (t.is_floating_point()) t.requires_grad_(true);
  ts::Tensor y = fn(inputs);
  ts::Tensor r = ts::randn(y.sizes());
  ts::Tensor loss = (y * r).sum();
  loss.backward();
  out["ops.in.r_" + name] = r;
  out["ops.loss." + name] = loss.detach();
  for (auto& [k, t] : inputs) {
    out["ops.in." + name + "_" + k] = t.detach();
    if (t.requires_grad()) out["ops.grad." + name + "_" + k] = t.grad();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  ts::manual_seed(0);
  Tensors out;

  ts::models::CNN cnn;
  classifier_case(out, "cnn", cnn, {4, 1, 28, 28});
  ts::models::MLP mlp(20, {16, 16}, 5);
  classifier_case(out, "mlp", mlp, {6, 20});

  ts::models::GPT2Config cfg;
  cfg.n_layer = 2;
  cfg.n_head = 2;
  cfg.n_embd = 32;
  cfg.n_positions = 16;
  cfg.vocab_size = 256;
  cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = 0.0;
  ts::models::GPT2 gpt(cfg);
  // GPT-2's initialization (matrices N(0, 0.02), biases 0, LayerNorm weights 1) keeps every
  // activation near zero, where GELU's tanh approximation and the exact GELU agree to 1e-6: scaled
  // matrices and perturbed vectors make the comparison tell such differences apart.
  {
    ts::NoGradGuard g;
    for (auto& [name, p] : gpt.named_parameters()) {
      if (p.dim() == 1) p.add_(ts::randn(p.sizes()) * 0.1);
      else p.mul_(10.0);
    }
  }
  ts::Tensor idx = ts::randint(0, 256, {3, 16});
  ts::Tensor targets = ts::randint(0, 256, {3, 16});
  ts::Tensor gpt_loss = gpt.loss(idx, targets);
  gpt_loss.backward();
  out["gpt.in.idx"] = idx;
  out["gpt.in.targets"] = targets;
  out["gpt.loss"] = gpt_loss.detach();
  put_module(out, "gpt", gpt);

  using In = std::vector<std::pair<std::string, ts::Tensor>>;
  op_case(out, "layer_norm", {{"x", ts::randn({3, 5, 8})}, {"w", ts::randn({8})}, {"b", ts::randn({8})}},
          [](const In& a) { return F::layer_norm(a[0].second, {8}, a[1].second, a[2].second, 1e-5); });
  op_case(out, "gelu_tanh", {{"x", ts::randn({4, 7})}}, [](const In& a) { return F::gelu(a[0].second, "tanh"); });
  op_case(out, "log_softmax", {{"x", ts::randn({4, 9})}}, [](const In& a) { return F::log_softmax(a[0].second, 1); });
  op_case(out, "sdpa_causal", {{"q", ts::randn({2, 3, 6, 4})}, {"k", ts::randn({2, 3, 6, 4})}, {"v", ts::randn({2, 3, 6, 4})}},
          [](const In& a) {
            return F::scaled_dot_product_attention(a[0].second, a[1].second, a[2].second, std::nullopt, 0.0, true);
          });
  op_case(out, "embedding", {{"idx", ts::randint(0, 10, {4, 3})}, {"w", ts::randn({10, 5})}},
          [](const In& a) { return F::embedding(a[0].second, a[1].second); });

  ts::save_safetensors(out, argv[1]);
  return 0;
}
