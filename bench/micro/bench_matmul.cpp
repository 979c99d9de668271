// Matrix-product micro-benchmarks: square float32 matmul (the figure compared with PyTorch's
// torch.matmul on the same threads), a transposed operand (read in place through BLAS's transpose
// flag, so it should cost the same), bfloat16 (float32 GEMM plus conversions), a batch of small
// attention-sized matrices (batch-parallel path) and linear. Inputs are random, never zeros.
// Counters report GFLOP/s (2*m*n*k per product).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

// Normal(0, 1) float32 values from the host (independent of the random-op family).
ts::Tensor randn(const ts::Shape& shape) {
  static std::mt19937 gen(12345);
  std::normal_distribution<float> dist;
  std::vector<float> v(ts::numel_of(shape));
  for (float& x : v) x = dist(gen);
  return ts::tensor(v, shape);
}

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iter, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_matmul_f32_1024(benchmark::State& state) {
  const int64_t n = 1024;
  ts::Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) {
    ts::Tensor c = ts::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_flops(state, 2.0 * n * n * n * 1e-9);
}
BENCHMARK(BM_matmul_f32_1024)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_matmul_f32_square(benchmark::State& state) {
  const int64_t n = state.range(0);
  ts::Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) {
    ts::Tensor c = ts::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_flops(state, 2.0 * n * n * n * 1e-9);
}
BENCHMARK(BM_matmul_f32_square)->Arg(64)->Arg(256)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_matmul_f32_1024_transposed_b(benchmark::State& state) {
  const int64_t n = 1024;
  ts::Tensor a = randn({n, n}), b = randn({n, n}).t();
  for (auto _ : state) {
    ts::Tensor c = ts::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_flops(state, 2.0 * n * n * n * 1e-9);
}
BENCHMARK(BM_matmul_f32_1024_transposed_b)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_matmul_bf16_512(benchmark::State& state) {
  const int64_t n = 512;
  ts::Tensor a = randn({n, n}).to(ts::kBFloat16), b = randn({n, n}).to(ts::kBFloat16);
  for (auto _ : state) {
    ts::Tensor c = ts::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_flops(state, 2.0 * n * n * n * 1e-9);
}
BENCHMARK(BM_matmul_bf16_512)->Unit(benchmark::kMillisecond)->UseRealTime();

// Attention scores: (B*H) small matrices, q @ k^T.
void BM_bmm_f32_attention_scores(benchmark::State& state) {
  const int64_t bh = 48, t = 64, d = 64;
  ts::Tensor q = randn({bh, t, d}), k = randn({bh, t, d});
  for (auto _ : state) {
    ts::Tensor s = ts::bmm(q, k.transpose(1, 2));
    benchmark::DoNotOptimize(s.data_ptr());
  }
  set_flops(state, 2.0 * bh * t * t * d * 1e-9);
}
BENCHMARK(BM_bmm_f32_attention_scores)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_linear_f32_256x768x3072(benchmark::State& state) {
  const int64_t rows = 256, in = 768, out = 3072;
  ts::Tensor x = randn({2, rows / 2, in}), w = randn({out, in}), b = randn({out});
  for (auto _ : state) {
    ts::Tensor y = ts::linear(x, w, b);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  set_flops(state, 2.0 * rows * in * out * 1e-9);
}
BENCHMARK(BM_linear_f32_256x768x3072)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

