// Convolution and pooling micro-benchmarks, shaped like the Fashion-MNIST CNN's layers (batch 64):
// conv 1->32 3x3 on 28x28, conv 32->64 3x3, max_pool2d 2. Forward alone and forward + backward
// (autograd::grad of every input that a training step needs). bench/torch/conv_micro.py times the
// same work in PyTorch. Inputs are random, never zeros. Counters report GFLOP/s of the convolution
// (2 * N * C_out * OH * OW * C_in * KH * KW per pass; backward counts its two passes).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

ts::Tensor randn(const ts::Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(ts::numel_of(shape));
  for (float& x : v) x = dist(gen);
  return ts::tensor(v, shape);
}

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iter, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

double conv_flops(int64_t n, int64_t co, int64_t oh, int64_t ow, int64_t ci, int64_t k) {
  return 2.0 * n * co * oh * ow * ci * k * k * 1e-9;
}

// conv 32 -> 64, 3x3, padding 1, on (64, 32, 28, 28).
void BM_conv2d_f32_64x32x28x28(benchmark::State& state) {
  ts::Tensor x = randn({64, 32, 28, 28}, 1), w = randn({64, 32, 3, 3}, 2), b = randn({64}, 3);
  for (auto _ : state) {
    ts::Tensor y = ts::conv2d(x, w, b, 1, 1);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  set_flops(state, conv_flops(64, 64, 28, 28, 32, 3));
}
BENCHMARK(BM_conv2d_f32_64x32x28x28)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same layer, forward and backward to the input, the weight and the bias.
void BM_conv2d_f32_64x32x28x28_fwd_bwd(benchmark::State& state) {
  ts::Tensor x = randn({64, 32, 28, 28}, 1).requires_grad_(), w = randn({64, 32, 3, 3}, 2).requires_grad_();
  ts::Tensor b = randn({64}, 3).requires_grad_(), gy = randn({64, 64, 28, 28}, 4);
  for (auto _ : state) {
    ts::Tensor y = ts::conv2d(x, w, b, 1, 1);
    std::vector<ts::Tensor> g = ts::autograd::grad({y}, {x, w, b}, {gy});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
  set_flops(state, 3 * conv_flops(64, 64, 28, 28, 32, 3));
}
BENCHMARK(BM_conv2d_f32_64x32x28x28_fwd_bwd)->Unit(benchmark::kMillisecond)->UseRealTime();

// The CNN's second conv as the model has it: no padding on the first conv's 26x26 output.
void BM_conv2d_f32_64x32x26x26_fwd_bwd(benchmark::State& state) {
  ts::Tensor x = randn({64, 32, 26, 26}, 1).requires_grad_(), w = randn({64, 32, 3, 3}, 2).requires_grad_();
  ts::Tensor b = randn({64}, 3).requires_grad_(), gy = randn({64, 64, 24, 24}, 4);
  for (auto _ : state) {
    ts::Tensor y = ts::conv2d(x, w, b);
    std::vector<ts::Tensor> g = ts::autograd::grad({y}, {x, w, b}, {gy});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
  set_flops(state, 3 * conv_flops(64, 64, 24, 24, 32, 3));
}
BENCHMARK(BM_conv2d_f32_64x32x26x26_fwd_bwd)->Unit(benchmark::kMillisecond)->UseRealTime();

// The CNN's first conv (1 -> 32 on the images): the input needs no gradient.
void BM_conv2d_f32_64x1x28x28_fwd_bwd(benchmark::State& state) {
  ts::Tensor x = randn({64, 1, 28, 28}, 1), w = randn({32, 1, 3, 3}, 2).requires_grad_();
  ts::Tensor b = randn({32}, 3).requires_grad_(), gy = randn({64, 32, 26, 26}, 4);
  for (auto _ : state) {
    ts::Tensor y = ts::conv2d(x, w, b);
    std::vector<ts::Tensor> g = ts::autograd::grad({y}, {w, b}, {gy});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
  set_flops(state, 2 * conv_flops(64, 32, 26, 26, 1, 3));
}
BENCHMARK(BM_conv2d_f32_64x1x28x28_fwd_bwd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_max_pool2d_f32_64x64x24x24_fwd_bwd(benchmark::State& state) {
  ts::Tensor x = randn({64, 64, 24, 24}, 1).requires_grad_(), gy = randn({64, 64, 12, 12}, 2);
  for (auto _ : state) {
    ts::Tensor y = ts::max_pool2d(x, 2);
    std::vector<ts::Tensor> g = ts::autograd::grad({y}, {x}, {gy});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
}
BENCHMARK(BM_max_pool2d_f32_64x64x24x24_fwd_bwd)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
