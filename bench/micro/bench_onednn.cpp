// The shape classes of Note [oneDNN where it wins] (kernels/cpu/onednn/onednn.h), timed through the
// public ops so that either path can run them: bench/run_onednn_choice.py runs these cases with
// TESSERA_ONEDNN=0 (the native kernels), 1 (the rule) and `all` (oneDNN wherever it has a kernel) in
// alternating rounds and prints the table the rule comes from (bench/NOTES.md, "oneDNN on the CPU").
// Convolutions are timed forward alone and forward + backward (the input and weight gradients, as a
// training step needs them); products alone. Inputs are random, never zeros.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

ts::Tensor randn(const ts::Shape& shape, ts::DType dt, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(ts::numel_of(shape));
  for (float& x : v) x = dist(gen);
  return ts::tensor(v, shape).to(dt);
}

struct Conv {
  int64_t n, c, h, w, co, k, stride, pad, groups;
};

void conv_case(benchmark::State& state, Conv s, ts::DType dt, bool channels_last, bool backward) {
  ts::Tensor x = randn({s.n, s.c, s.h, s.w}, dt, 1);
  if (channels_last) x = x.contiguous(ts::MemoryFormat::ChannelsLast);
  if (backward && s.c > 1) x.requires_grad_();
  ts::Tensor w = randn({s.co, s.c / s.groups, s.k, s.k}, dt, 2);
  if (backward) w.requires_grad_();
  ts::Tensor b = randn({s.co}, dt, 3);
  ts::Tensor y0 = ts::conv2d(x.detach(), w.detach(), b, s.stride, s.pad, 1, s.groups);
  ts::Tensor gy = randn(y0.sizes(), dt, 4);
  if (channels_last) gy = gy.contiguous(ts::MemoryFormat::ChannelsLast);
  for (auto _ : state) {
    ts::Tensor y = ts::conv2d(x, w, b, s.stride, s.pad, 1, s.groups);
    if (backward) {
      std::vector<ts::Tensor> inputs = {w};
      if (x.requires_grad()) inputs.push_back(x);
      std::vector<ts::Tensor> g = ts::autograd::grad({y}, inputs, {gy});
      benchmark::DoNotOptimize(g[0].data_ptr());
    } else {
      benchmark::DoNotOptimize(y.data_ptr());
    }
  }
}

void mm_case(benchmark::State& state, int64_t batch, int64_t m, int64_t k, int64_t n, ts::DType dt) {
  ts::Tensor a = randn({batch, m, k}, dt, 5), b = randn({batch, k, n}, dt, 6);
  if (batch == 1) {
    a = a.select(0, 0);
    b = b.select(0, 0);
  }
  for (auto _ : state) {
    ts::Tensor c = ts::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
}

// Pooling and batch norm have no oneDNN path (Note [oneDNN where it wins]): these time the native
// kernels on the shapes that bench/NOTES.md compares with oneDNN's primitives.
void BM_onednn_native_max_pool2d_f32_64x64x24x24_fwd_bwd(benchmark::State& state) {
  ts::Tensor x = randn({64, 64, 24, 24}, ts::kFloat32, 1).requires_grad_();
  ts::Tensor gy = randn({64, 64, 12, 12}, ts::kFloat32, 2);
  for (auto _ : state) {
    ts::Tensor y = ts::max_pool2d(x, 2);
    std::vector<ts::Tensor> g = ts::autograd::grad({y}, {x}, {gy});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
}
BENCHMARK(BM_onednn_native_max_pool2d_f32_64x64x24x24_fwd_bwd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_onednn_native_batch_norm_f32_32x64x56x56_fwd_bwd(benchmark::State& state) {
  ts::Tensor x = randn({32, 64, 56, 56}, ts::kFloat32, 1).requires_grad_();
  ts::Tensor w = randn({64}, ts::kFloat32, 2).requires_grad_(), b = randn({64}, ts::kFloat32, 3).requires_grad_();
  ts::Tensor rm = ts::zeros({64}), rv = ts::ones({64});
  ts::Tensor gy = randn({32, 64, 56, 56}, ts::kFloat32, 4);
  for (auto _ : state) {
    ts::Tensor y = ts::nn::functional::batch_norm(x, rm, rv, w, b, /*training=*/true);
    std::vector<ts::Tensor> g = ts::autograd::grad({y}, {x, w, b}, {gy});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
}
BENCHMARK(BM_onednn_native_batch_norm_f32_32x64x56x56_fwd_bwd)->Unit(benchmark::kMillisecond)->UseRealTime();

// name, shape, channels-last
struct ConvRow {
  const char* name;
  Conv s;
  bool cl;
};
const ConvRow kConvRows[] = {
    {"cnn1_64x1x28x28_k3", {64, 1, 28, 28, 32, 3, 1, 0, 1}, false},      // the Fashion-MNIST CNN's layers
    {"cnn2_64x32x13x13_k3", {64, 32, 13, 13, 64, 3, 1, 0, 1}, false},
    {"res_8x64x56x56_k3", {8, 64, 56, 56, 64, 3, 1, 1, 1}, false},       // a ResNet stage's 3x3
    {"res_8x64x56x56_k3_cl", {8, 64, 56, 56, 64, 3, 1, 1, 1}, true},     // the same, channels-last
    {"res_8x64x56x56_k3_s2", {8, 64, 56, 56, 128, 3, 2, 1, 1}, false},   // strided
    {"pw_8x128x28x28_k1", {8, 128, 28, 28, 128, 1, 1, 0, 1}, false},     // pointwise 1x1
    {"dw_8x64x56x56_k3_g64", {8, 64, 56, 56, 64, 3, 1, 1, 64}, false},   // depthwise
    {"g4_8x64x28x28_k3", {8, 64, 28, 28, 64, 3, 1, 1, 4}, false},        // grouped
};

struct MmRow {
  const char* name;
  int64_t batch, m, k, n;
};
const MmRow kMmRows[] = {
    {"1024", 1, 1024, 1024, 1024},     // the micro-benchmark row
    {"mlp_128x784x512", 1, 128, 784, 512},  // the MLP's first layer
    {"256", 1, 256, 256, 256},
    {"64", 1, 64, 64, 64},
    {"bmm_16x128x64x128", 16, 128, 64, 128},  // attention scores
};

int register_cases() {
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16}) {
    const std::string d = dt == ts::kFloat32 ? "f32" : "bf16";
    for (const ConvRow& r : kConvRows)
      for (bool bwd : {false, true}) {
        const std::string name = "BM_onednn_conv_" + d + "_" + r.name + (bwd ? "_fwd_bwd" : "_fwd");
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { conv_case(st, r.s, dt, r.cl, bwd); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    for (const MmRow& r : kMmRows) {
      const std::string name = "BM_onednn_matmul_" + d + "_" + r.name;
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { mm_case(st, r.batch, r.m, r.k, r.n, dt); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return 0;
}
const int registered = register_cases();

}  // namespace
