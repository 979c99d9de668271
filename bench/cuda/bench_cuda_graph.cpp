// CUDA graph benchmarks (issue "Mixed precision, CUDA graphs and the profiler", Measured): a 200-op step
// launched eagerly versus replayed as one captured graph, and the MLP 784-512-512-10 (batch 128, SGD with
// momentum, float32) training step eager and through cuda::make_graphed. bench/torch/cuda_graph.py
// times the same work in PyTorch (eager and torch.cuda.graph) under the same row names;
// bench/run_amp_graphs.py runs both in alternating rounds and writes bench/results/amp-graphs.json.
//
// Output: one JSON object per line on stdout,
//   {"name": "step200_graph", "unit": "ms/step", "value": 0.278, "ms": 0.278, "iters": 50,
//    "samples_ms": [0.279, 0.277, ...]}
// or, where the work raises, {"name": ..., "unit": ..., "value": null, "error": "..."}, and the run goes on.
// Timing: CUDA events around `--iters` back-to-back steps on the current stream, after warm-up; each of
// the `--runs` measurements divided by the number of steps is one of "samples_ms", and "ms" is their
// median. The value is "ms" (ms/step) or 1000 / "ms" (steps/s). Numbers carry 10 significant digits, so
// that the results check can re-derive each value from its samples.
//
// usage: bench_cuda_graph [--runs N] [--iters N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
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

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o + "\"";
}

// Milliseconds per call of `fn`, one sample per g_iters back-to-back calls.
std::vector<double> ms_per_call(const std::function<void()>& fn) {
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
  return t;
}

// One row: the samples' median as ms/step, or as steps/s.
void emit(const char* name, const char* unit, const std::vector<double>& samples) {
  const double ms = median(samples);
  const double value = std::strcmp(unit, "steps/s") == 0 ? 1000.0 / ms : ms;
  std::string list = "[";
  for (size_t i = 0; i < samples.size(); ++i) list += (i ? ", " : "") + num(samples[i]);
  list += "]";
  std::printf("{\"name\": \"%s\", \"unit\": \"%s\", \"value\": %s, \"ms\": %s, \"iters\": %d, \"samples_ms\": %s}\n",
              name, unit, num(value).c_str(), num(ms).c_str(), g_iters, list.c_str());
  std::fflush(stdout);
}

// Runs `fn`, which emits its rows; where it raises, an error row for each of `names` it had not printed.
void rows(const std::vector<const char*>& names, const char* unit, const std::function<void(size_t&)>& fn) {
  size_t done = 0;
  try {
    fn(done);
  } catch (const std::exception& e) {
    for (size_t i = done; i < names.size(); ++i)
      std::printf("{\"name\": \"%s\", \"unit\": \"%s\", \"value\": null, \"error\": %s}\n", names[i], unit,
                  json_str(e.what()).c_str());
    std::fflush(stdout);
    try {
      cuda::synchronize();
    } catch (const std::exception&) {
    }
  }
}

// 200 small dependent elementwise ops: launch-bound.
ts::Tensor step200(const ts::Tensor& x) {
  ts::Tensor y = x;
  for (int i = 0; i < 100; ++i) y = y * 1.0001 + 0.0001;
  return y;
}

void bench_step200() {
  rows({"step200_eager", "step200_graph"}, "ms/step", [](size_t& done) {
    ts::Tensor x = ts::randn({1024}, ts::Device::cuda());
    emit("step200_eager", "ms/step", ms_per_call([&] { (void)step200(x); }));
    ++done;
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
    emit("step200_graph", "ms/step", ms_per_call([&] { g.replay(); }));
    ++done;
  });
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
  rows({"mlp_784_512_512_10_b128_sgd_eager"}, "steps/s", [&](size_t& done) {
    MlpTrainer t;
    emit("mlp_784_512_512_10_b128_sgd_eager", "steps/s", ms_per_call([&] { (void)t.step(batch); }));
    ++done;
  });
  rows({"mlp_784_512_512_10_b128_sgd_graph"}, "steps/s", [&](size_t& done) {
    MlpTrainer t;
    auto step = cuda::make_graphed([&](const std::vector<ts::Tensor>& in) { return t.step(in); }, batch);
    // copies into itself are skipped
    emit("mlp_784_512_512_10_b128_sgd_graph", "steps/s", ms_per_call([&] { (void)step(batch); }));
    ++done;
  });
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
  std::printf("{\"device\": %s}\n", json_str(cuda::get_device_properties(0).name).c_str());
  std::fflush(stdout);
  bench_step200();
  bench_mlp();
  return 0;
}
