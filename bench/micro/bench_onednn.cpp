// The shape classes of Note [oneDNN where it wins] (kernels/cpu/onednn/onednn.h), timed through the
// public ops so that either path can run them: bench/run_onednn_choice.py runs these cases with
// TESSERA_ONEDNN=0 (the native kernels), 1 (the rule) and `all` (oneDNN wherever it has a kernel) in
// alternating rounds and prints the table the rule comes from (bench/NOTES.md, "oneDNN on the CPU").
// Convolutions are timed forward alone and forward + backward (the input and weight gradients, as a
// training step needs them); products alone; pooling and batch norm per direction. Inputs are random,
// never zeros.
#include <benchmark/benchmark.h>

#include <random>
#include <tuple>
#include <vector>

#include "ops/batch_norm_ops.h"
#include "ops/conv_ops.h"
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

// Pooling: forward (max_pool2d with its indices, avg_pool2d, adaptive_avg_pool2d) and backward timed
// apart, the backward ops called directly on the forward's indices, since each direction is its own
// kernel slot with its own rule. `bytes` counts what each must move at least (inputs read once,
// results written once; int64 indices), for the floor that run_onednn_choice.py derives from the copy
// bandwidth of the control row.
enum class PoolKind { max, avg, global };
struct Pool {
  int64_t n, c, h, w, k, stride, pad;
  PoolKind kind;
};

void set_bytes(benchmark::State& state, double bytes) { state.counters["bytes"] = bytes; }

void pool_case(benchmark::State& state, Pool s, ts::DType dt, bool channels_last, bool backward) {
  ts::Tensor x = randn({s.n, s.c, s.h, s.w}, dt, 1);
  if (channels_last) x = x.contiguous(ts::MemoryFormat::ChannelsLast);
  ts::Tensor y, idx;
  if (s.kind == PoolKind::max) {
    std::tie(y, idx) = ts::max_pool2d_with_indices(x, s.k, s.stride, s.pad);
  } else if (s.kind == PoolKind::avg) {
    y = ts::avg_pool2d(x, s.k, s.stride, s.pad);
  } else {
    y = ts::adaptive_avg_pool2d(x, 1);
  }
  ts::Tensor gy = randn(y.sizes(), dt, 2);
  if (channels_last) gy = gy.contiguous(ts::MemoryFormat::ChannelsLast);
  const double e = double(ts::element_size(dt)), in = double(x.numel()) * e, out = double(y.numel()) * e;
  const double ix = s.kind == PoolKind::max ? double(y.numel()) * 8 : 0;
  set_bytes(state, in + out + ix);
  for (auto _ : state) {
    ts::Tensor r;
    if (!backward) {
      if (s.kind == PoolKind::max) {
        r = std::get<0>(ts::max_pool2d_with_indices(x, s.k, s.stride, s.pad));
      } else if (s.kind == PoolKind::avg) {
        r = ts::avg_pool2d(x, s.k, s.stride, s.pad);
      } else {
        r = ts::adaptive_avg_pool2d(x, 1);
      }
    } else if (s.kind == PoolKind::max) {
      r = ts::max_pool2d_backward(gy, idx, x.sizes(), s.k, s.stride, s.pad, 1);
    } else if (s.kind == PoolKind::avg) {
      r = ts::avg_pool2d_backward(gy, x.sizes(), s.k, s.stride, s.pad, false, true);
    } else {
      r = ts::adaptive_avg_pool2d_backward(gy, x.sizes());
    }
    benchmark::DoNotOptimize(r.data_ptr());
  }
}

// Batch norm: the training forward (batch statistics, running stats updated), its backward (input,
// weight and bias gradients) and the inference forward, each its own slot.
enum class BnPass { train_fwd, bwd, eval_fwd };
struct Bn {
  ts::Shape x;
};

void bn_case(benchmark::State& state, Bn s, ts::DType dt, bool channels_last, BnPass pass) {
  ts::Tensor x = randn(s.x, dt, 1);
  if (channels_last) x = x.contiguous(ts::MemoryFormat::ChannelsLast);
  const int64_t c = s.x[1];
  ts::Tensor w = randn({c}, ts::kFloat32, 2), b = randn({c}, ts::kFloat32, 3);
  ts::Tensor rm = randn({c}, ts::kFloat32, 4), rv = randn({c}, ts::kFloat32, 5).abs() + 0.5;
  ts::Tensor gy = randn(s.x, dt, 6);
  if (channels_last) gy = gy.contiguous(ts::MemoryFormat::ChannelsLast);
  auto [y0, sm, si] = ts::native_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
  const double t = double(x.numel()) * double(ts::element_size(dt));
  set_bytes(state, pass == BnPass::bwd ? 3 * t : 2 * t);
  for (auto _ : state) {
    if (pass == BnPass::bwd) {
      auto r = ts::native_batch_norm_backward(gy, x, w, rm, rv, sm, si, true, 1e-5, {true, true, true}, ts::Tensor());
      benchmark::DoNotOptimize(std::get<0>(r).data_ptr());
    } else {
      auto r = ts::native_batch_norm(x, w, b, rm, rv, pass == BnPass::train_fwd, 0.1, 1e-5);
      benchmark::DoNotOptimize(std::get<0>(r).data_ptr());
    }
  }
}

// The control: a float32 copy of 16M elements, the same code in every mode. Its time gives the copy
// bandwidth of the floors, and its spread between the modes the run's noise.
void BM_onednn_control_copy_f32_16M(benchmark::State& state) {
  ts::Tensor src = randn({int64_t(1) << 24}, ts::kFloat32, 1), dst = ts::empty({int64_t(1) << 24});
  set_bytes(state, 2.0 * double(src.numel()) * 4);
  for (auto _ : state) {
    dst.copy_(src);
    benchmark::DoNotOptimize(dst.data_ptr());
  }
}
BENCHMARK(BM_onednn_control_copy_f32_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

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

struct PoolRow {
  const char* name;
  Pool s;
};
const PoolRow kPoolRows[] = {
    {"max_64x64x24x24_k2", {64, 64, 24, 24, 2, 2, 0, PoolKind::max}},         // the Fashion-MNIST CNN's pool
    {"max_8x64x112x112_k3s2p1", {8, 64, 112, 112, 3, 2, 1, PoolKind::max}},   // a ResNet's stem
    {"avg_8x128x28x28_k2", {8, 128, 28, 28, 2, 2, 0, PoolKind::avg}},         // a DenseNet transition
    {"global_8x512x7x7", {8, 512, 7, 7, 7, 7, 0, PoolKind::global}},          // a ResNet's head
};

struct BnRow {
  const char* name;
  Bn s;
  bool cl;  // also channels-last
};
const BnRow kBnRows[] = {
    {"32x64x56x56", {{32, 64, 56, 56}}, true},  // a ResNet's first stage
    {"8x256x14x14", {{8, 256, 14, 14}}, true},  // its third
    {"1d_256x512", {{256, 512}}, false},        // BatchNorm1d in an MLP
};

int register_cases() {
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16}) {
    const std::string d = dt == ts::kFloat32 ? "f32" : "bf16";
    for (const PoolRow& r : kPoolRows)
      for (bool cl : {false, true})
        for (bool bwd : {false, true}) {
          const std::string name =
              "BM_onednn_pool_" + d + "_" + r.name + (cl ? "_cl" : "") + (bwd ? "_bwd" : "_fwd");
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { pool_case(st, r.s, dt, cl, bwd); })
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
    for (const BnRow& r : kBnRows)
      for (bool cl : {false, true}) {
        if (cl && !r.cl) continue;
        for (BnPass pass : {BnPass::train_fwd, BnPass::bwd, BnPass::eval_fwd}) {
          const char* what = pass == BnPass::train_fwd ? "_train_fwd" : pass == BnPass::bwd ? "_bwd" : "_eval_fwd";
          const std::string name = "BM_onednn_bn_" + d + "_" + r.name + (cl ? "_cl" : "") + what;
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { bn_case(st, r.s, dt, cl, pass); })
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
      }
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
