// CUDA runtime micro-benchmarks: allocate + free of a cached block through the caching allocator
// (target: at most 0.5 us for 1 MiB, from C++), the same through a tensor (ts::empty on cuda: the
// allocator plus TensorImpl and Storage), and pinned host blocks. Nothing is launched: these time host
// code only. Without a GPU each benchmark reports that it skipped.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "runtime/allocator.h"
#include "runtime/cuda/cuda_allocator.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

bool skip_without_gpu(benchmark::State& state) {
  if (ts::cuda::is_available()) return false;
  state.SkipWithError("no CUDA GPU found");
  return true;
}

// Allocate and free a block of state.range(0) bytes on the current stream; after the first iteration
// the block comes from the cache every time.
void BM_CudaCachedAllocFree(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto nbytes = static_cast<size_t>(state.range(0));
  ts::Allocator* a = ts::get_allocator(ts::DeviceType::CUDA);
  const ts::Device dev = ts::Device::cuda(ts::cuda::current_device());
  { ts::DataPtr warm = a->allocate(nbytes, dev); }
  for (auto _ : state) {
    ts::DataPtr p = a->allocate(nbytes, dev);
    benchmark::DoNotOptimize(p.get());
  }
  state.counters["us_per_alloc_free"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 1e-6, benchmark::Counter::kIsRate |
                                                                            benchmark::Counter::kInvert);
}
BENCHMARK(BM_CudaCachedAllocFree)->Arg(512)->Arg(1 << 20)->Arg(8 << 20)->Arg(64 << 20);

// The same with a second stream's allocations alive in the pools (a busier cache).
void BM_CudaCachedAllocFreeBusyPool(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  ts::Allocator* a = ts::get_allocator(ts::DeviceType::CUDA);
  const ts::Device dev = ts::Device::cuda(ts::cuda::current_device());
  std::vector<ts::DataPtr> held;
  for (int i = 0; i < 2000; ++i) held.push_back(a->allocate(static_cast<size_t>(i % 97 + 1) * 4096, dev));
  for (size_t i = 0; i < held.size(); i += 2) held[i] = ts::DataPtr();
  for (auto _ : state) {
    ts::DataPtr p = a->allocate(size_t(1) << 20, dev);
    benchmark::DoNotOptimize(p.get());
  }
}
BENCHMARK(BM_CudaCachedAllocFreeBusyPool);

void BM_CudaEmptyTensor(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  for (auto _ : state) {
    ts::Tensor t = ts::empty({256, 1024}, {ts::kFloat32, "cuda"});
    benchmark::DoNotOptimize(t.data_ptr());
  }
}
BENCHMARK(BM_CudaEmptyTensor);

void BM_PinnedCachedAllocFree(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  ts::Allocator* a = ts::cuda::pinned_host_allocator();
  { ts::DataPtr warm = a->allocate(size_t(1) << 20, ts::kCPU); }
  for (auto _ : state) {
    ts::DataPtr p = a->allocate(size_t(1) << 20, ts::kCPU);
    benchmark::DoNotOptimize(p.get());
  }
}
BENCHMARK(BM_PinnedCachedAllocFree);

}  // namespace
