// Elementwise micro-benchmarks: add, mul, gelu on 16M float32 and softmax over (4096, 1024) float32,
// the shapes bench/torch times in PyTorch for the side-by-side ratio. Outputs are preallocated
// (out=) where the API allows, so the timing is the kernel and not the allocator.
#include <benchmark/benchmark.h>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int64_t k16M = 16 * 1024 * 1024;

void BM_add_f32_16M(benchmark::State& state) {
  ts::Tensor a = ts::randn({k16M}), b = ts::randn({k16M}), out = ts::empty({k16M});
  for (auto _ : state) ts::add_out(a, b, out);
  state.SetBytesProcessed(state.iterations() * k16M * 4 * 3);
}
BENCHMARK(BM_add_f32_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_mul_f32_16M(benchmark::State& state) {
  ts::Tensor a = ts::randn({k16M}), b = ts::randn({k16M}), out = ts::empty({k16M});
  for (auto _ : state) ts::mul_out(a, b, out);
  state.SetBytesProcessed(state.iterations() * k16M * 4 * 3);
}
BENCHMARK(BM_mul_f32_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_gelu_f32_16M(benchmark::State& state) {
  ts::Tensor a = ts::randn({k16M});
  for (auto _ : state) benchmark::DoNotOptimize(ts::gelu(a));  // gelu has no out= form
  state.SetBytesProcessed(state.iterations() * k16M * 4 * 2);
}
BENCHMARK(BM_gelu_f32_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_softmax_f32_4096x1024(benchmark::State& state) {
  ts::Tensor a = ts::randn({4096, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(ts::softmax(a, -1));
  state.SetBytesProcessed(state.iterations() * 4096 * 1024 * 4 * 2);
}
BENCHMARK(BM_softmax_f32_4096x1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

