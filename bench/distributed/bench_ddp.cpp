// The overhead of nn::DistributedDataParallel at world size 1 (the nccl backend, one GPU) over plain
// training: GPT-2 124M, batch 16 x 1024, bfloat16 autocast, clip_grad_norm_ 1.0, fused AdamW, as
// bench_models' gpt2 row. Two replicas with the same weights, one plain, one wrapped; the step calls
// GPT2::loss on the module (the wrapper's gradient hooks reduce what backward produces, as PyTorch's
// DDP does for a forward that returns the loss). Rounds alternate plain and DDP so that clocks and
// the allocator's state drift alike over both.
//
//   bench_ddp [--rounds 5] [--iters 10] [--warmup 3] [--batch 16] [--seq 1024]
//
// Prints one JSON line per round {"round", "plain_ms", "ddp_ms"} (CUDA-event time of `iters` steps over
// iters), then {"summary": ...} with the medians, the buckets and how many started during backward.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tessera/cuda.h"
#include "tessera/distributed.h"
#include "tessera/distributed/ddp.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A model on the GPU (same seed, so the same weights in both replicas) and its optimizer.
struct Replica {
  std::unique_ptr<ts::models::GPT2> model;
  std::vector<ts::Tensor> params;
  std::unique_ptr<ts::optim::AdamW> opt;
  explicit Replica(const ts::models::GPT2Config& cfg) {
    ts::manual_seed(1234);
    model = std::make_unique<ts::models::GPT2>(cfg);
    model->to(ts::Device::cuda());
    model->train();
    params = model->parameters();
    opt = std::make_unique<ts::optim::AdamW>(
        params, ts::optim::AdamWOptions{.lr = 6e-4, .betas = {0.9, 0.95}, .eps = 1e-8, .weight_decay = 0.1, .fused = true});
  }
  void step(const ts::Tensor& x, const ts::Tensor& y) {
    ts::Tensor loss;
    {
      ts::amp::autocast guard(ts::Device::cuda(), ts::kBFloat16);
      loss = model->loss(x, y);
    }
    loss.backward();
    ts::nn::utils::clip_grad_norm_(params, 1.0);
    opt->step();
    opt->zero_grad(true);
  }
};

double time_ms(Replica& r, const ts::Tensor& x, const ts::Tensor& y, int iters) {
  ts::cuda::synchronize();
  ts::cuda::Event start(true), stop(true);
  start.record();
  for (int i = 0; i < iters; ++i) r.step(x, y);
  stop.record();
  stop.synchronize();
  return static_cast<double>(start.elapsed_time(stop)) / iters;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5, iters = 10, warmup = 3;
  int64_t B = 16, T = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (a == "--rounds") rounds = static_cast<int>(v);
    else if (a == "--iters") iters = static_cast<int>(v);
    else if (a == "--warmup") warmup = static_cast<int>(v);
    else if (a == "--batch") B = v;
    else if (a == "--seq") T = v;
    else {
      std::fprintf(stderr, "bench_ddp: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (!ts::cuda::is_available()) {
    std::fprintf(stderr, "bench_ddp: needs a GPU\n");
    return 2;
  }
  try {
    ts::distributed::init_process_group("nccl");
    ts::models::GPT2Config cfg;
    cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = 0.0;
    cfg.n_positions = std::max<int64_t>(cfg.n_positions, T);
    Replica plain(cfg), wrapped(cfg);
    ts::nn::DistributedDataParallel ddp(*wrapped.model);
    const ts::TensorOptions i64(ts::kInt64, ts::Device::cuda());
    ts::manual_seed(7);
    const ts::Tensor x = ts::randint(0, cfg.vocab_size, {B, T}, i64), y = ts::randint(0, cfg.vocab_size, {B, T}, i64);
    for (int i = 0; i < warmup; ++i) {
      plain.step(x, y);
      wrapped.step(x, y);
    }
    std::vector<double> p, d;
    for (int r = 0; r < rounds; ++r) {
      p.push_back(time_ms(plain, x, y, iters));
      d.push_back(time_ms(wrapped, x, y, iters));
      std::printf("{\"round\": %d, \"plain_ms\": %.5f, \"ddp_ms\": %.5f}\n", r, p.back(), d.back());
      std::fflush(stdout);
    }
    // The replicas took the same steps on the same batch: at world size 1 the average is the gradient
    // itself, so their weights must agree (a check that the wrapped run did the same work).
    double max_diff = 0;
    auto a = plain.model->parameters(), b = wrapped.model->parameters();
    for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, ts::max((a[i] - b[i]).abs()).item<double>());
    std::printf("{\"summary\": {\"batch\": %lld, \"seq\": %lld, \"iters\": %d, \"rounds\": %d, \"plain_ms\": %.5f, "
                "\"ddp_ms\": %.5f, \"buckets\": %zu, \"buckets_started_in_backward\": %zu, "
                "\"max_weight_diff\": %.3g, \"gradient_bytes\": %lld}}\n",
                static_cast<long long>(B), static_cast<long long>(T), iters, rounds, median(p), median(d),
                ddp.num_buckets(), ddp.buckets_started_in_backward(), max_diff,
                [&] {
                  long long n = 0;
                  for (auto& t : b) n += t.numel() * static_cast<long long>(t.element_size());
                  return n;
                }());
    ts::distributed::destroy_process_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ddp: %s\n", e.what());
    return 1;
  }
  return 0;
}
