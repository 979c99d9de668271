// Reduction micro-benchmarks: full and per-dim float32 sums and the other reductions on 16M elements
// of random data. Compare against PyTorch with the same thread count (OMP_NUM_THREADS for tessera,
// torch.set_num_threads in PyTorch); bytes/s counts the input read once.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int64_t k16M = int64_t{1} << 24;

// Uniform [-1, 1) values from a fixed LCG (random, never zeros), as a float32 tensor.
ts::Tensor random_f32(const ts::Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t state = 0x853c49e6748fea9bull;
  for (auto& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(state >> 40) / 8388608.0 - 1.0);
  }
  return ts::from_blob(v.data(), sizes, ts::kFloat32);
}

template <class F>
void run(benchmark::State& state, const ts::Tensor& x, F&& f) {
  for (auto _ : state) {
    ts::Tensor r = f(x);
    benchmark::DoNotOptimize(r.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(x.nbytes()));
}

void BM_sum_f32_16M(benchmark::State& state) {
  ts::Tensor x = random_f32({k16M});
  run(state, x, [](const ts::Tensor& t) { return ts::sum(t); });
}
BENCHMARK(BM_sum_f32_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_sum_dim1_f32_4096x4096(benchmark::State& state) {
  ts::Tensor x = random_f32({4096, 4096});
  run(state, x, [](const ts::Tensor& t) { return ts::sum(t, 1); });
}
BENCHMARK(BM_sum_dim1_f32_4096x4096)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_sum_dim0_f32_4096x4096(benchmark::State& state) {
  ts::Tensor x = random_f32({4096, 4096});
  run(state, x, [](const ts::Tensor& t) { return ts::sum(t, 0); });
}
BENCHMARK(BM_sum_dim0_f32_4096x4096)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_amax_f32_16M(benchmark::State& state) {
  ts::Tensor x = random_f32({k16M});
  run(state, x, [](const ts::Tensor& t) { return ts::amax(t); });
}
BENCHMARK(BM_amax_f32_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_argmax_f32_16M(benchmark::State& state) {
  ts::Tensor x = random_f32({k16M});
  run(state, x, [](const ts::Tensor& t) { return ts::argmax(t); });
}
BENCHMARK(BM_argmax_f32_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_var_f32_16M(benchmark::State& state) {
  ts::Tensor x = random_f32({k16M});
  run(state, x, [](const ts::Tensor& t) { return ts::var(t); });
}
BENCHMARK(BM_var_f32_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_norm_f32_16M(benchmark::State& state) {
  ts::Tensor x = random_f32({k16M});
  run(state, x, [](const ts::Tensor& t) { return ts::norm(t); });
}
BENCHMARK(BM_norm_f32_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_cumsum_f32_4096x4096_dim1(benchmark::State& state) {
  ts::Tensor x = random_f32({4096, 4096});
  run(state, x, [](const ts::Tensor& t) { return ts::cumsum(t, 1); });
}
BENCHMARK(BM_cumsum_f32_4096x4096_dim1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

