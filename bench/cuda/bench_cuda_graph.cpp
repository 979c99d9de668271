// CUDA graph benchmarks (issue "Mixed precision, CUDA graphs and the profiler", Measured): a 200-op step
// launched eagerly versus replayed as one captured graph, and the MLP 784-512-512-10 (batch 128, SGD with
// momentum, float32) training step eager and through cuda::make_graphed. bench/torch/cuda_graph.py
// times the same work in PyTorch (eager and torch.cuda.graph) under the same row names;
// bench/run_cuda_graph.py runs both and writes the rows into bench/results/amp-graphs.json.
//
// Output: one JSON object per line on stdout: {"name": "...", "unit": "ms", "value": 1.23}
// Timing: CUDA events around `--iters` back-to-back steps on the current stream, after warm-up; the
// median over `--runs` such measurements, divided by the number of steps.
//
// usage: bench_cuda_graph [--runs N] [--iters N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;
namespace cuda = tessera::cuda;
namespace F = tessera::nn::functional;

namespace {

int g_runs = 20, g_iters = 50;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median milliseconds per call of `fn`, timed over g_iters back-to-back calls.
double ms_per_call(const std::function<void()>& fn) {
  for (int i = 0; i < 5; ++i) fn();
  cuda::synchronize();
  cuda::Event start(true), stop(true);
  std::vector<double> t;
  for (int r = 0; r < g_runs; ++r) {
    start.record();
    for (int i = 0; i < g_iters; ++i) fn();
    stop.record();
    stop.synchronize();
    t.push_back(start.elapsed_time(stop) / g_iters);
  }
  return median(t);
}

void emit(const char* name, const char* unit, double value) {
  std::printf("{\"name\": \"%s\", \"unit\": \"%s\", \"value\": %.6g}\n", name, unit, value);
  std::fflush(stdout);
}

// 200 small dependent elementwise ops: launch-bound.
ts::Tensor step200(const ts::Tensor& x) {
  ts::Tensor y = x;
  for (int i = 0; i < 100; ++i) y = y * 1.0001 + 0.0001;
  return y;
}

void bench_step200() {
  ts::Tensor x = ts::randn({1024}, ts::Device::cuda());
  const double eager = ms_per_call([&] { (void)step200(x); });
  cuda::Stream side = cuda::Stream::create();
  cuda::Graph g;
  ts::Tensor out;
  {
    cuda::StreamGuard sg(side);
    (void)step200(x);
    g.capture_begin();
    out = step200(x);
    g.capture_end();
  }
  const double graph = ms_per_call([&] { g.replay(); });
  emit("step200_eager", "ms", eager);
  emit("step200_graph", "ms", graph);
}

struct MlpTrainer {
  ts::models::MLP net{784, {512, 512}, 10};
  ts::optim::SGD opt;
  MlpTrainer() : opt((net.to(ts::Device::cuda()), net.parameters()), {.lr = 0.01, .momentum = 0.9}) {}
  std::vector<ts::Tensor> step(const std::vector<ts::Tensor>& in) {
    opt.zero_grad();
    ts::Tensor loss = F::cross_entropy(net.forward(in[0]), in[1]);
    loss.backward();
    opt.step();
    return {loss};
  }
};

void bench_mlp() {
  const ts::Device gpu = ts::Device::cuda();
  std::vector<ts::Tensor> batch = {ts::randn({128, 784}, gpu), ts::randint(0, 10, {128}, ts::TensorOptions(ts::kInt64, gpu))};
  {
    MlpTrainer t;
    const double ms = ms_per_call([&] { (void)t.step(batch); });
    emit("mlp_784_512_512_10_b128_sgd_eager", "steps/s", 1000.0 / ms);
  }
  {
    MlpTrainer t;
    auto step = cuda::make_graphed([&](const std::vector<ts::Tensor>& in) { return t.step(in); }, batch);
    const double ms = ms_per_call([&] { (void)step(batch); });  // copies into itself are skipped
    emit("mlp_784_512_512_10_b128_sgd_graph", "steps/s", 1000.0 / ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--runs")) g_runs = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--iters")) g_iters = std::max(1, std::atoi(argv[i + 1]));
  }
  if (!cuda::is_available()) {
    std::fprintf(stderr, "bench_cuda_graph: no CUDA GPU\n");
    return 2;
  }
  ts::manual_seed(0);
  bench_step200();
  bench_mlp();
  return 0;
}
