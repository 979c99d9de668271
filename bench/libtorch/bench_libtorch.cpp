// libtorch's side of three rows, C++ against C++, under tessera's row names (bench/run_libtorch.py
// runs it beside bench_cuda_micro and bench_models and writes bench/results/libtorch-cuda.json):
//   eager_add_1024_x1000          us per torch::add of 1024 floats, 1000 in a row, then a synchronize
//                                 (bench_cuda_micro's row: the host cost of one small eager op);
//   mlp_784_512_512_10_b128_sgd   steps/s of the MLP step (batch 128, float32, torch::optim::SGD lr
//                                 0.01 momentum 0.9, as a libtorch user writes it);
//   gpt2_124m_train_b16x1024      tokens/s of GPT-2 124M (nanoGPT's model: pre-norm blocks, tanh GELU,
//                                 at::scaled_dot_product_attention causal, the classifier tied to the
//                                 embedding, dropout 0), bfloat16 autocast, the gradients' norm clipped
//                                 at 1.0 and AdamW (lr 6e-4, betas (0.9, 0.95), eps 1e-8, weight decay
//                                 0.1) through ATen's fused kernels, as torch.optim does on CUDA (the
//                                 C++ frontend's clip_grad_norm_ returns a double, a synchronization
//                                 per step, and its AdamW loops over the parameters: a libtorch user
//                                 who cares calls the ATen ops).
// Timing as tessera's: the add row by wall clock, median over --runs; the steps by CUDA events around
// --iters steps after --warmup, median over --runs. One JSON line per row, with its samples.
//   bench_libtorch [--runs 5] [--iters 10] [--warmup 3] [--only SUBSTR] [--vocab 50257]
#include <cuda_runtime_api.h>
#include <torch/torch.h>
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#include <ATen/autocast_mode.h>  // the device-typed autocast API of libtorch 2.4 and later
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

struct Args {
  int runs = 5, iters = 10, warmup = 3;
  int64_t vocab = 50257;
  std::string only;
} g;

bool selected(const std::string& name) { return g.only.empty() || name.find(g.only) != std::string::npos; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void emit(const std::string& name, const char* unit, double value, double ms, const std::vector<double>& samples) {
  std::string s = "[";
  for (size_t i = 0; i < samples.size(); ++i) s += (i ? ", " : "") + std::to_string(samples[i]);
  s += "]";
  std::printf("{\"name\": \"%s\", \"unit\": \"%s\", \"value\": %.6g, \"ms\": %.6g, \"samples_ms\": %s, \"libtorch\": \"%s\"}\n",
              name.c_str(), unit, value, ms, s.c_str(), TORCH_VERSION);
  std::fflush(stdout);
}

void emit_error(const std::string& name, const std::string& what) {
  std::string msg;
  for (char c : what) {
    if (c == '"' || c == '\\') msg += '\\';
    msg += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
  }
  std::printf("{\"name\": \"%s\", \"value\": null, \"error\": \"%s\"}\n", name.c_str(), msg.c_str());
  std::fflush(stdout);
}

void guarded(const std::string& name, const std::function<void()>& work) {
  if (!selected(name)) return;
  try {
    work();
  } catch (const std::exception& e) {
    emit_error(name, e.what());
  }
  torch::cuda::synchronize();
}

// Milliseconds per step: CUDA events on the default stream (libtorch's current stream unless set).
std::vector<double> time_steps(const std::function<void()>& step, int iters) {
  for (int i = 0; i < g.warmup; ++i) step();
  torch::cuda::synchronize();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> t;
  for (int r = 0; r < g.runs; ++r) {
    cudaEventRecord(start, 0);
    for (int i = 0; i < iters; ++i) step();
    cudaEventRecord(stop, 0);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    t.push_back(static_cast<double>(ms) / iters);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return t;
}

const torch::Device kGpu(torch::kCUDA, 0);

void bench_eager_add() {
  guarded("eager_add_1024_x1000", [] {
    torch::Tensor x0 = torch::randn({1024}, torch::TensorOptions().device(kGpu));
    torch::Tensor y = torch::randn({1024}, torch::TensorOptions().device(kGpu));
    std::vector<double> t;
    for (int r = 0; r < std::max(g.runs, 20); ++r) {
      torch::cuda::synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      torch::Tensor x = x0;
      for (int i = 0; i < 1000; ++i) x = torch::add(x, y);
      torch::cuda::synchronize();
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const double ms = median(t);
    emit("eager_add_1024_x1000", "us/op", ms * 1e3 / 1000, ms, t);
  });
}

void bench_mlp() {
  guarded("mlp_784_512_512_10_b128_sgd", [] {
    torch::nn::Sequential net(torch::nn::Linear(784, 512), torch::nn::ReLU(), torch::nn::Linear(512, 512),
                              torch::nn::ReLU(), torch::nn::Linear(512, 10));
    net->to(kGpu);
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    torch::Tensor x = torch::randn({128, 784}, torch::TensorOptions().device(kGpu));
    torch::Tensor y = torch::randint(0, 10, {128}, torch::TensorOptions().dtype(torch::kLong).device(kGpu));
    auto step = [&] {
      opt.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      loss.backward();
      opt.step();
    };
    const std::vector<double> t = time_steps(step, std::max(g.iters, 50));
    const double ms = median(t);
    emit("mlp_784_512_512_10_b128_sgd", "steps/s", 1000.0 / ms, ms, t);
  });
}

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define TS_LIBTORCH_GPT2 1

// ---- GPT-2 124M, nanoGPT's model ---------------------------------------------------------------------
struct BlockImpl : torch::nn::Module {
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  torch::nn::Linear c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, c_proj{nullptr};
  int64_t n_head;
  BlockImpl(int64_t C, int64_t H) : n_head(H) {
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    c_attn = register_module("c_attn", torch::nn::Linear(C, 3 * C));
    attn_proj = register_module("attn_proj", torch::nn::Linear(C, C));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    c_fc = register_module("c_fc", torch::nn::Linear(C, 4 * C));
    c_proj = register_module("c_proj", torch::nn::Linear(4 * C, C));
  }
  torch::Tensor forward(torch::Tensor x) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    auto qkv = c_attn(ln_1(x)).split(C, 2);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_head, C / n_head}).transpose(1, 2); };
    torch::Tensor y = at::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), {}, 0.0, true);
    x = x + attn_proj(y.transpose(1, 2).contiguous().view({B, T, C}));
    return x + c_proj(torch::gelu(c_fc(ln_2(x)), "tanh"));
  }
};
TORCH_MODULE(Block);

struct GPTImpl : torch::nn::Module {
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h;
  torch::nn::LayerNorm ln_f{nullptr};
  GPTImpl(int64_t vocab, int64_t block, int64_t layers = 12, int64_t heads = 12, int64_t C = 768) {
    wte = register_module("wte", torch::nn::Embedding(vocab, C));
    wpe = register_module("wpe", torch::nn::Embedding(block, C));
    h = register_module("h", torch::nn::ModuleList());
    for (int64_t i = 0; i < layers; ++i) h->push_back(Block(C, heads));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    torch::NoGradGuard ng;
    for (auto& p : named_parameters()) {
      const std::string& n = p.key();
      if (n.find("ln_") != std::string::npos) continue;  // layer norms: ones and zeros
      if (n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0) p.value().zero_();
      else p.value().normal_(0.0, n.find("c_proj.weight") != std::string::npos ? 0.02 / std::sqrt(2.0 * layers) : 0.02);
    }
  }
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets) {
    const int64_t T = idx.size(1);
    torch::Tensor x = wte(idx) + wpe(torch::arange(T, idx.options()));
    for (auto& m : *h) x = m->as<BlockImpl>()->forward(x);
    torch::Tensor logits = torch::nn::functional::linear(ln_f(x), wte->weight);  // tied classifier
    return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view({-1}));
  }
};
TORCH_MODULE(GPT);

void bench_gpt2() {
  const int64_t B = 16, T = 1024;
  std::string name = "gpt2_124m_train_b16x1024";
  if (g.vocab != 50257) name += "_v" + std::to_string(g.vocab);
  guarded(name, [&] {
    GPT model(g.vocab, T);
    model->to(kGpu);
    model->train();
    std::vector<torch::Tensor> params = model->parameters();
    std::vector<torch::Tensor> m, v, steps, none;
    for (auto& p : params) {
      m.push_back(torch::zeros_like(p));
      v.push_back(torch::zeros_like(p));
      steps.push_back(torch::zeros({}, p.options().dtype(torch::kFloat)));
    }
    const auto i64 = torch::TensorOptions().dtype(torch::kLong).device(kGpu);
    torch::Tensor x = torch::randint(0, g.vocab, {B, T}, i64), y = torch::randint(0, g.vocab, {B, T}, i64);
    auto step = [&] {
      at::autocast::set_autocast_enabled(at::kCUDA, true);
      at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
      torch::Tensor loss = model->forward(x, y);
      at::autocast::set_autocast_enabled(at::kCUDA, false);
      at::autocast::clear_cache();
      loss.backward();
      std::vector<torch::Tensor> grads;
      for (auto& p : params) grads.push_back(p.grad());
      // clip_grad_norm_(1.0) without a synchronization, as torch.nn.utils does it
      torch::Tensor norm = torch::stack(at::_foreach_norm(grads, 2.0)).norm(2.0);
      at::_foreach_mul_(grads, torch::clamp_max(1.0 / (norm + 1e-6), 1.0));
      at::_foreach_add_(steps, 1.0);
      at::_fused_adamw_(params, grads, m, v, none, steps, 6e-4, 0.9, 0.95, 0.1, 1e-8, false, false);
      for (auto& p : params) p.mutable_grad() = torch::Tensor();
    };
    const std::vector<double> t = time_steps(step, g.iters);
    const double ms = median(t);
    emit(name, "tokens/s", static_cast<double>(B * T) * 1000.0 / ms, ms, t);
  });
}
#endif

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--runs") g.runs = std::stoi(v);
    else if (a == "--iters") g.iters = std::stoi(v);
    else if (a == "--warmup") g.warmup = std::stoi(v);
    else if (a == "--only") g.only = v;
    else if (a == "--vocab") g.vocab = std::stoll(v);
    else {
      std::fprintf(stderr, "usage: bench_libtorch [--runs N] [--iters N] [--warmup N] [--only SUBSTR] [--vocab V]\n");
      return 2;
    }
  }
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "bench_libtorch: libtorch sees no CUDA GPU\n");
    return 3;
  }
  std::printf("{\"libtorch\": \"%s\", \"cudnn\": %lld}\n", TORCH_VERSION, static_cast<long long>(torch::cuda::cudnn_is_available()));
  torch::manual_seed(0);
  bench_eager_add();
  bench_mlp();
#ifdef TS_LIBTORCH_GPT2
  bench_gpt2();
#else
  guarded("gpt2_124m_train_b16x1024", [] { throw std::runtime_error("needs libtorch 2.4 or later"); });
#endif
  return 0;
}
