// The profiler's cost: 1000 small CPU adds (16 float32, into a preallocated output, so the op call
// itself is what is timed) with the profiler off, with it recording, and with an emit_nvtx scope
// (observer on, nothing recorded). "Off" is the figure that must not move when the profiler changes:
// each op then pays one relaxed atomic load (Note [Profiler recording] in src/profiler/recorder.h).
// BM_op_scope_off times that load alone (an OpScope with no observer).
#include <benchmark/benchmark.h>

#include "ops/op_scope.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

void run_adds(const ts::Tensor& a, const ts::Tensor& b, ts::Tensor& out) {
  for (int i = 0; i < 1000; ++i) ts::add_out(a, b, out);
}

void BM_add_small_x1000_profiler_off(benchmark::State& state) {
  ts::Tensor a = ts::randn({16}), b = ts::randn({16}), out = ts::empty({16});
  for (auto _ : state) run_adds(a, b, out);
  state.SetItemsProcessed(state.iterations() * 1000);
}
BENCHMARK(BM_add_small_x1000_profiler_off)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_add_small_x1000_profiler_on(benchmark::State& state) {
  ts::Tensor a = ts::randn({16}), b = ts::randn({16}), out = ts::empty({16});
  for (auto _ : state) {
    ts::profiler::profile prof({.record_shapes = true});
    run_adds(a, b, out);
    state.PauseTiming();
    prof.stop();  // collecting the events is not per-op cost
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * 1000);
}
BENCHMARK(BM_add_small_x1000_profiler_on)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_add_small_x1000_emit_nvtx(benchmark::State& state) {
  ts::Tensor a = ts::randn({16}), b = ts::randn({16}), out = ts::empty({16});
  ts::profiler::emit_nvtx nvtx;
  for (auto _ : state) run_adds(a, b, out);
  state.SetItemsProcessed(state.iterations() * 1000);
}
BENCHMARK(BM_add_small_x1000_emit_nvtx)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_op_scope_off(benchmark::State& state) {
  ts::Tensor a = ts::randn({16});
  for (auto _ : state) {
    ts::OpScope scope(ts::OpId::add, {&a});
    benchmark::DoNotOptimize(&scope);
  }
}
BENCHMARK(BM_op_scope_off);

}  // namespace
