// CUDA micro-benchmarks (DESIGN.md "Performance method"): device copy bandwidth as the floor, then
// elementwise, reductions, softmax / layer norm / RMS norm, causal attention, cross-entropy, the fused
// transformer ops (add + layer norm, linear + GELU, linear + cross-entropy), matmul, ResNet-50's convolutions and
// batch norm, eager op overhead and the caching allocator's round trip. bench/torch/cuda_micro.py times the same work in PyTorch under the
// same row names; bench/run_cuda_micro.py runs both and writes bench/results/cuda-micro.json.
//
// Output: one JSON object per line, on stdout,
//   {"name": "add_f32_256M", "unit": "GB/s", "value": 3950.2, "ms": 0.815, "bytes": 3221225472,
//    "samples_ms": [0.816, 0.814, ...], "peak_mem_gib": 3.0}
// or, where the op raises (a kernel family not there yet, out of memory), an error row, and the run
// goes on:
//   {"name": "add_f32_256M", "unit": "GB/s", "value": null, "error": "NotImplementedError: ..."}
// Timing: CUDA events on the current stream around each call, after warm-up; "ms" is the median of the
// --runs (>= 20) calls whose times are "samples_ms". Eager overhead and allocation are host wall times
// (synchronized at the end). Data is random (ts::randn on the GPU; generated on the host and copied where
// the GPU generator is missing). The row's value follows from "ms" and the work it names: GB/s = "bytes"
// (read + written; the device copy too: 2 x 1 GiB per copy; 1 GB = 1e9 bytes) per second, TFLOP/s =
// "flops" per second, us/op = "ms" over "ops" calls, ms = "ms" (the ResNet-50 total: the sum of its
// layers' medians, without samples of its own). Numbers carry 10 significant digits, so that
// bench/run_cuda_micro.py's results check can re-derive every value from its samples.
//
// usage: bench_cuda_micro [--runs N] [--only SUBSTRING]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;


namespace {

const ts::Device kGpu = ts::Device::cuda(0);
constexpr int64_t k256M = int64_t(256) << 20;

struct Options {
  int runs = 20;
  int warmup = 3;
  std::string only;
};
Options opt;

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o + "\"";
}

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(rc));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The milliseconds of each timed call and their median.
struct Timing {
  double ms;
  std::vector<double> samples;
};

Timing timing(std::vector<double> t) {
  const double m = median(t);
  return Timing{m, std::move(t)};
}

// Milliseconds of `fn` between two CUDA events on the current stream, after warm-up.
Timing time_ms(const std::function<void()>& fn) {
  for (int i = 0; i < opt.warmup; ++i) fn();
  ts::cuda::Event start(true), stop(true);
  std::vector<double> t;
  for (int i = 0; i < opt.runs; ++i) {
    start.record();
    fn();
    stop.record();
    stop.synchronize();
    t.push_back(start.elapsed_time(stop));
  }
  return timing(std::move(t));
}

// Host wall milliseconds of `fn` (which synchronizes itself), after one warm-up call.
Timing wall_ms(const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < opt.runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return timing(std::move(t));
}

// Random data on the GPU, never zeros.
ts::Tensor random(const ts::Shape& s, ts::DType d) {
  try {
    return ts::randn(s, {d, kGpu});
  } catch (const ts::NotImplementedError&) {  // no GPU generator yet: the host's, copied over
    return ts::randn(s, d).to(kGpu);
  }
}

std::optional<double> peak_gib() {
  try {
    return ts::cuda::max_memory_allocated() / double(int64_t(1) << 30);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

struct Result {
  double value;                 // in the row's unit
  double ms;                    // median time of one call
  std::string extra;            // more JSON members, ", \"k\": v"
  std::vector<double> samples;  // the time of each timed call (ms)
};

double gbps(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }

// A row's result from its timing and the work of one call, which the row prints beside the samples.
Result by_bytes(double bytes, const Timing& t, const std::string& extra = "") {
  return Result{gbps(bytes, t.ms), t.ms, ", \"bytes\": " + num(bytes) + extra, t.samples};
}
Result by_flops(double flops, const Timing& t, const std::string& extra = "") {
  return Result{flops / (t.ms * 1e-3) / 1e12, t.ms, ", \"flops\": " + num(flops) + extra, t.samples};
}
Result per_op(double ops, const Timing& t) {
  return Result{t.ms * 1e3 / ops, t.ms, ", \"ops\": " + num(ops), t.samples};
}
Result in_ms(const Timing& t, const std::string& extra = "") { return Result{t.ms, t.ms, extra, t.samples}; }

std::string json_list(const std::vector<double>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + num(v[i]);
  return o + "]";
}

// Runs one row; an exception (a missing kernel, out of memory) becomes an error row.
void row(const std::string& name, const std::string& unit, const std::function<Result()>& measure) {
  if (!opt.only.empty()) {  // comma-separated parts: a row runs when its name contains one of them
    bool hit = false;
    for (size_t b = 0; b <= opt.only.size();) {
      const size_t e = std::min(opt.only.find(',', b), opt.only.size());
      if (e > b && name.find(opt.only.substr(b, e - b)) != std::string::npos) hit = true;
      b = e + 1;
    }
    if (!hit) return;
  }
  std::string line = "{\"name\": " + json_str(name) + ", \"unit\": " + json_str(unit);
  try {
    try {
      ts::cuda::reset_peak_memory_stats();
    } catch (const std::exception&) {
    }
    Result r = measure();
    std::optional<double> peak = peak_gib();
    line += ", \"value\": " + num(r.value) + ", \"ms\": " + num(r.ms) +
            ", \"peak_mem_gib\": " + (peak ? num(*peak) : std::string("null")) + r.extra;
    if (!r.samples.empty()) line += ", \"samples_ms\": " + json_list(r.samples);
  } catch (const std::exception& e) {
    line += ", \"value\": null, \"error\": " + json_str(e.what());
    (void)cudaGetLastError();  // a launch error is reported in this row, not in the next one
  }
  std::printf("%s}\n", line.c_str());
  std::fflush(stdout);
  try {
    ts::cuda::empty_cache();
  } catch (const std::exception&) {
  }
}

// ---- device copy: the floor every bandwidth row is compared with --------------------------------
void bench_copy_reference() {
  row("copy_d2d_f32_256M", "GB/s", [] {
    ts::Tensor src = random({k256M}, ts::kFloat32), dst = ts::empty({k256M}, {ts::kFloat32, kGpu});
    size_t bytes = size_t(k256M) * 4;
    auto stream = static_cast<cudaStream_t>(ts::cuda::current_stream().handle());
    const Timing tm = time_ms([&] { check(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync"); });
    return by_bytes(2.0 * bytes, tm);
  });
}

// ---- elementwise on 256M elements --------------------------------------------------------------
void bench_elementwise() {
  for (ts::DType d : {ts::kFloat32, ts::kBFloat16}) {
    std::string sfx = std::string(d == ts::kFloat32 ? "f32" : "bf16") + "_256M";
    double es = d == ts::kFloat32 ? 4 : 2, n = double(k256M);
    // Inputs are made once per dtype and shared by the rows (3 x 1 GiB for float32).
    std::optional<ts::Tensor> a, b, out;
    auto inputs = [&] {
      if (a) return;
      a = random({k256M}, d);
      b = random({k256M}, d);
      out = ts::empty({k256M}, {d, kGpu});
    };
    row("add_" + sfx, "GB/s", [&] {
      inputs();
      return by_bytes(3 * n * es, time_ms([&] { ts::add_out(*a, *b, *out); }));
    });
    row("mul_" + sfx, "GB/s", [&] {
      inputs();
      return by_bytes(3 * n * es, time_ms([&] { ts::mul_out(*a, *b, *out); }));
    });
    row("gelu_" + sfx, "GB/s", [&] {  // no out= form: the caching allocator hands back the same block
      inputs();
      return by_bytes(2 * n * es, time_ms([&] { ts::gelu(*a); }));
    });
    row("copy_" + sfx, "GB/s", [&] {
      inputs();
      return by_bytes(2 * n * es, time_ms([&] { out->copy_(*a); }));
    });
  }
}

// ---- reductions over (16384, 16384) float32 ----------------------------------------------------
void bench_reductions() {
  const int64_t m = 16384;
  std::optional<ts::Tensor> x;
  for (int dim : {1, 0}) {
    row(std::string(dim == 1 ? "sum_lastdim" : "sum_firstdim") + "_f32_16384x16384", "GB/s", [&] {
      if (!x) x = random({m, m}, ts::kFloat32);
      return by_bytes(double(m) * m * 4 + double(m) * 4, time_ms([&] { ts::sum(*x, dim); }));
    });
  }
}

// ---- softmax and layer norm on (16384, 4096) bfloat16 ------------------------------------------
void bench_norms() {
  const int64_t r = 16384, c = 4096;
  row("softmax_bf16_16384x4096", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16);
    return in_ms(time_ms([&] { ts::softmax(x, -1); }));
  });
  row("layer_norm_fwd_bf16_16384x4096", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16), w = random({c}, ts::kBFloat16), b = random({c}, ts::kBFloat16);
    ts::NoGradGuard g;
    return in_ms(time_ms([&] { ts::nn::functional::layer_norm(x, {c}, w, b); }));
  });
  row("layer_norm_bwd_bf16_16384x4096", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16), w = random({c}, ts::kBFloat16), b = random({c}, ts::kBFloat16);
    ts::Tensor gy = random({r, c}, ts::kBFloat16);
    x.requires_grad_();
    w.requires_grad_();
    b.requires_grad_();
    ts::Tensor y = ts::nn::functional::layer_norm(x, {c}, w, b);
    return in_ms(time_ms([&] { ts::autograd::grad({y}, {x, w, b}, {gy}, true); }));
  });
  row("rms_norm_fwd_bf16_16384x4096", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16), w = random({c}, ts::kBFloat16);
    ts::NoGradGuard g;
    return in_ms(time_ms([&] { ts::nn::functional::rms_norm(x, {c}, w, 1e-6); }));
  });
}

// ---- causal attention (scaled_dot_product_attention, the flash path) ---------------------------------
// q, k, v as GPT-2 makes them: (B, T, H, D) bfloat16 buffers seen as (B, H, T, D). FLOPs as
// FlashAttention counts them: forward 4 B H T^2 D / 2 (two products, causal half), forward + backward
// 3.5 times that (five products in the backward).
void bench_attention() {
  struct Shape4 {
    int64_t b, h, t, d;
  };
  for (const Shape4& c : {Shape4{16, 12, 1024, 64}, Shape4{8, 16, 2048, 128}}) {
    const std::string tag = "bf16_B" + std::to_string(c.b) + "_H" + std::to_string(c.h) + "_T" + std::to_string(c.t) +
                            "_D" + std::to_string(c.d) + "_causal";
    const double fwd_flops = 4.0 * c.b * c.h * double(c.t) * c.t * c.d / 2;
    auto qkv = [&] {
      std::vector<ts::Tensor> v;
      for (int i = 0; i < 3; ++i) v.push_back(random({c.b, c.t, c.h, c.d}, ts::kBFloat16));
      return v;
    };
    auto attend = [](const std::vector<ts::Tensor>& x) {
      return ts::nn::functional::scaled_dot_product_attention(x[0].transpose(1, 2), x[1].transpose(1, 2),
                                                              x[2].transpose(1, 2), std::nullopt, 0.0, true);
    };
    row("attention_fwd_" + tag, "TFLOP/s", [&] {
      const std::vector<ts::Tensor> x = qkv();
      ts::NoGradGuard g;
      return by_flops(fwd_flops, time_ms([&] { attend(x); }));
    });
    row("attention_fwd_bwd_" + tag, "TFLOP/s", [&] {
      std::vector<ts::Tensor> x = qkv();
      for (ts::Tensor& t : x) t.requires_grad_();
      const ts::Tensor gy = random({c.b, c.h, c.t, c.d}, ts::kBFloat16);
      return by_flops(3.5 * fwd_flops, time_ms([&] { ts::autograd::grad({attend(x)}, x, {gy}); }));
    });
  }
}

// ---- cross-entropy on GPT-2's logits: (8192, 50257) bfloat16, mean, forward + backward -------------
void bench_loss() {
  const int64_t r = 8192, c = 50257;
  row("cross_entropy_fwd_bwd_bf16_8192x50257", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16);
    x.requires_grad_();
    ts::Tensor t = ts::randint(0, c, {r}, {ts::kInt64, kGpu});
    const Timing tm = time_ms([&] {
      ts::Tensor loss = ts::nn::functional::cross_entropy(x, t);
      ts::autograd::grad({loss}, {x});
    });
    return in_ms(tm);
  });
}

// ---- fused transformer ops (GPT-2 124M sizes: 16384 tokens, C = 768, 4C = 3072, V = 50257), bf16,
// forward + backward; PyTorch runs the unfused composition under the same row names -----------------
void bench_fused() {
  namespace F = ts::nn::functional;
  const int64_t r = 16384, c = 768, f = 3072, v = 50257;
  row("add_layer_norm_fwd_bwd_bf16_16384x768", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16).requires_grad_(), res = random({r, c}, ts::kBFloat16).requires_grad_();
    ts::Tensor w = random({c}, ts::kBFloat16).requires_grad_(), b = random({c}, ts::kBFloat16).requires_grad_();
    ts::Tensor gs = random({r, c}, ts::kBFloat16), gy = random({r, c}, ts::kBFloat16);
    const Timing tm = time_ms([&] {
      auto [s, y] = F::add_layer_norm(x, res, {c}, w, b);
      ts::autograd::grad({s, y}, {x, res, w, b}, {gs, gy});
    });
    return in_ms(tm);
  });
  row("linear_gelu_fwd_bwd_bf16_16384x768x3072", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16).requires_grad_();
    ts::Tensor w = ts::mul(random({f, c}, ts::kBFloat16), 1.0 / std::sqrt(double(c))).requires_grad_();
    ts::Tensor b = random({f}, ts::kBFloat16).requires_grad_();
    ts::Tensor gy = random({r, f}, ts::kBFloat16);
    const Timing tm = time_ms([&] {
      ts::Tensor y = F::linear_gelu(x, w, b);
      ts::autograd::grad({y}, {x, w, b}, {gy});
    });
    return in_ms(tm);
  });
  row("mlp_gelu_fwd_bwd_bf16_16384x768x3072x768", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16).requires_grad_();
    ts::Tensor w1 = ts::mul(random({f, c}, ts::kBFloat16), 1.0 / std::sqrt(double(c))).requires_grad_();
    ts::Tensor b1 = random({f}, ts::kBFloat16).requires_grad_();
    ts::Tensor w2 = ts::mul(random({c, f}, ts::kBFloat16), 1.0 / std::sqrt(double(f))).requires_grad_();
    ts::Tensor b2 = random({c}, ts::kBFloat16).requires_grad_();
    ts::Tensor gy = random({r, c}, ts::kBFloat16);
    const Timing tm = time_ms([&] {
      ts::Tensor y = F::mlp_gelu(x, w1, b1, w2, b2);
      ts::autograd::grad({y}, {x, w1, b1, w2, b2}, {gy});
    });
    return in_ms(tm);
  });
  // The classifier alone, unfused: logits of 50257 columns (rows not 16-byte aligned: Note [Aligned
  // GEMM staging]), forward and both gradients.
  row("linear_fwd_bwd_bf16_16384x768x50257", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16).requires_grad_();
    ts::Tensor w = ts::mul(random({v, c}, ts::kBFloat16), 0.02).requires_grad_();
    ts::Tensor gy = random({r, v}, ts::kBFloat16);
    const Timing tm = time_ms([&] {
      ts::Tensor y = F::linear(x, w);
      ts::autograd::grad({y}, {x, w}, {gy});
    });
    return in_ms(tm);
  });
  row("linear_cross_entropy_fwd_bwd_bf16_16384x768x50257", "ms", [&] {
    ts::Tensor x = random({r, c}, ts::kBFloat16).requires_grad_();
    ts::Tensor w = ts::mul(random({v, c}, ts::kBFloat16), 0.02).requires_grad_();
    ts::Tensor t = ts::randint(0, v, {r}, {ts::kInt64, kGpu});
    const Timing tm = time_ms([&] {
      ts::Tensor loss = F::linear_cross_entropy(x, w, t);
      ts::autograd::grad({loss}, {x, w});
    });
    return in_ms(tm, ", \"chunk_rows\": 4096");
  });
}

// ---- matmul 8192^3 -----------------------------------------------------------------------------
void bench_matmul() {
  const int64_t n = 8192;
  const double flops = 2.0 * n * n * n;
  row("matmul_bf16_8192", "TFLOP/s", [&] {
    ts::Tensor a = random({n, n}, ts::kBFloat16), b = random({n, n}, ts::kBFloat16);
    return by_flops(flops, time_ms([&] { ts::matmul(a, b); }));
  });
  row("matmul_f32_tf32_8192", "TFLOP/s", [&] {
    ts::Tensor a = random({n, n}, ts::kFloat32), b = random({n, n}, ts::kFloat32);
    bool prev = ts::cuda::allow_tf32();
    ts::cuda::set_allow_tf32(true);
    Timing tm{};
    try {
      tm = time_ms([&] { ts::matmul(a, b); });
    } catch (...) {
      ts::cuda::set_allow_tf32(prev);
      throw;
    }
    ts::cuda::set_allow_tf32(prev);
    return by_flops(flops, tm);
  });
}

// ---- ResNet-50's convolutions, batch 256, bfloat16, forward + backward (input and weight grads) ----
struct ConvLayer {
  const char* name;
  int64_t cin, cout, hw, k, stride, pad;  // input (N, cin, hw, hw), weight (cout, cin, k, k)
};
// The distinct conv shapes of torchvision's ResNet-50 (stride in the 3x3 conv of each stage's first
// block; the downsample 1x1 of layer1 has the shape of its conv3 and is listed once).
const ConvLayer kResNet50[] = {
    {"conv1_7x7_3_64_s2", 3, 64, 224, 7, 2, 3},
    {"l1_1x1_64_64", 64, 64, 56, 1, 1, 0},
    {"l1_3x3_64_64", 64, 64, 56, 3, 1, 1},
    {"l1_1x1_64_256", 64, 256, 56, 1, 1, 0},
    {"l1_1x1_256_64", 256, 64, 56, 1, 1, 0},
    {"l2_1x1_256_128", 256, 128, 56, 1, 1, 0},
    {"l2_3x3_128_128_s2", 128, 128, 56, 3, 2, 1},
    {"l2_1x1_128_512", 128, 512, 28, 1, 1, 0},
    {"l2_down_1x1_256_512_s2", 256, 512, 56, 1, 2, 0},
    {"l2_1x1_512_128", 512, 128, 28, 1, 1, 0},
    {"l2_3x3_128_128", 128, 128, 28, 3, 1, 1},
    {"l3_1x1_512_256", 512, 256, 28, 1, 1, 0},
    {"l3_3x3_256_256_s2", 256, 256, 28, 3, 2, 1},
    {"l3_1x1_256_1024", 256, 1024, 14, 1, 1, 0},
    {"l3_down_1x1_512_1024_s2", 512, 1024, 28, 1, 2, 0},
    {"l3_1x1_1024_256", 1024, 256, 14, 1, 1, 0},
    {"l3_3x3_256_256", 256, 256, 14, 3, 1, 1},
    {"l4_1x1_1024_512", 1024, 512, 14, 1, 1, 0},
    {"l4_3x3_512_512_s2", 512, 512, 14, 3, 2, 1},
    {"l4_1x1_512_2048", 512, 2048, 7, 1, 1, 0},
    {"l4_down_1x1_1024_2048_s2", 1024, 2048, 14, 1, 2, 0},
    {"l4_1x1_2048_512", 2048, 512, 7, 1, 1, 0},
    {"l4_3x3_512_512", 512, 512, 7, 3, 1, 1},
};

ts::Tensor channels_last(const ts::Tensor& x) { return x.contiguous(ts::MemoryFormat::ChannelsLast); }

void bench_conv() {
  const int64_t batch = 256;
  const std::string extra = ", \"layout\": \"channels_last\"";
  // cuDNN's heuristics pick tessera's algorithms: timing them (set_cudnn_benchmark(true)) was slower on
  // the 1x1 layers of this list on the H200 (bench/NOTES.md); PyTorch's side runs with benchmark mode.
  double total = 0;
  bool complete = true;
  std::string first_error;
  for (const ConvLayer& l : kResNet50) {
    std::string name = std::string("conv2d_rn50_b256_bf16/") + l.name;
    bool ok = false;
    row(name, "ms", [&] {
      ts::Tensor x = channels_last(random({batch, l.cin, l.hw, l.hw}, ts::kBFloat16));
      // weights at the scale of Kaiming init, so that activations stay O(1) in bfloat16
      ts::Tensor w = channels_last(
          ts::mul(random({l.cout, l.cin, l.k, l.k}, ts::kBFloat16), 1.0 / std::sqrt(double(l.cin * l.k * l.k))));
      x.requires_grad_();
      w.requires_grad_();
      int64_t ho = (l.hw + 2 * l.pad - l.k) / l.stride + 1;
      ts::Tensor gy = channels_last(random({batch, l.cout, ho, ho}, ts::kBFloat16));
      const Timing tm = time_ms([&] {
        ts::Tensor y = ts::conv2d(x, w, std::nullopt, l.stride, l.pad);
        ts::autograd::grad({y}, {x, w}, {gy});
      });
      total += tm.ms;
      ok = true;
      return in_ms(tm, extra);
    });
    complete = complete && ok;
  }
  row("conv2d_rn50_b256_bf16_fwd_bwd", "ms", [&] {
    if (!complete) throw std::runtime_error("some layers failed (see the conv2d_rn50_b256_bf16/ rows)");
    return Result{total, total, extra + ", \"layers\": " + std::to_string(std::size(kResNet50))};
  });
}

// ---- batch norm: ResNet-50's layer1 width at batch 256, bfloat16 channels-last, float32 parameters ----
// One training step of the layer: forward with batch statistics (running stats updated), then the
// gradients of x, weight and bias.
void bench_batch_norm() {
  row("batch_norm_fwd_bwd_bf16_cl_256x256x56x56", "ms", [] {
    const int64_t c = 256;
    ts::Tensor x = channels_last(random({256, c, 56, 56}, ts::kBFloat16));
    ts::Tensor gy = channels_last(random({256, c, 56, 56}, ts::kBFloat16));
    ts::Tensor w = random({c}, ts::kFloat32), b = random({c}, ts::kFloat32);
    ts::Tensor rm = ts::zeros({c}, {ts::kFloat32, kGpu}), rv = ts::ones({c}, {ts::kFloat32, kGpu});
    x.requires_grad_();
    w.requires_grad_();
    b.requires_grad_();
    const Timing tm = time_ms([&] {
      ts::Tensor y = ts::nn::functional::batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
      ts::autograd::grad({y}, {x, w, b}, {gy});
    });
    return in_ms(tm, ", \"layout\": \"channels_last\"");
  });
}

// ---- eager overhead and the caching allocator ------------------------------------------------------
void bench_overhead() {
  row("eager_add_1024_x1000", "us/op", [] {
    ts::Tensor x0 = random({1024}, ts::kFloat32), y = random({1024}, ts::kFloat32);
    return per_op(1000, wall_ms([&] {
      ts::Tensor x = x0;
      for (int i = 0; i < 1000; ++i) x = ts::add(x, y);
      ts::cuda::synchronize();
    }));
  });
  // Diagnostics of the row above (no PyTorch counterpart): the host's share (the loop without the
  // final synchronization) and the same adds into a preallocated output (no allocator).
  row("eager_add_1024_x1000_enqueue", "us/op", [] {
    ts::Tensor x0 = random({1024}, ts::kFloat32), y = random({1024}, ts::kFloat32);
    std::vector<double> t;
    for (int r = 0; r < opt.runs; ++r) {
      ts::Tensor x = x0;
      ts::cuda::synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 1000; ++i) x = ts::add(x, y);
      const auto t1 = std::chrono::steady_clock::now();
      ts::cuda::synchronize();
      t.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    return per_op(1000, timing(std::move(t)));
  });
  row("eager_add_out_1024_x1000", "us/op", [] {
    ts::Tensor a = random({1024}, ts::kFloat32), b = random({1024}, ts::kFloat32), y = random({1024}, ts::kFloat32);
    return per_op(1000, wall_ms([&] {
      for (int i = 0; i < 500; ++i) {
        ts::add_out(a, y, b);
        ts::add_out(b, y, a);
      }
      ts::cuda::synchronize();
    }));
  });
  row("alloc_free_1MiB", "us/op", [] {
    const int iters = 10000;
    return per_op(iters, wall_ms([&] {
      for (int i = 0; i < iters; ++i) ts::Tensor t = ts::empty({262144}, {ts::kFloat32, kGpu});
    }));
  });
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) opt.runs = std::max(20, std::atoi(argv[++i]));
    else if (a == "--only" && i + 1 < argc) opt.only = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--runs N (>= 20)] [--only SUBSTRING]\n", argv[0]);
      return 2;
    }
  }
  if (!ts::cuda::is_available()) {
    std::fprintf(stderr, "bench_cuda_micro: no CUDA GPU found\n");
    return 3;
  }
  ts::manual_seed(0);
  auto p = ts::cuda::get_device_properties(0);
  std::printf("{\"device\": %s, \"sm\": %d}\n", json_str(p.name).c_str(), p.major * 10 + p.minor);
  std::fflush(stdout);
  bench_copy_reference();
  bench_elementwise();
  bench_reductions();
  bench_norms();
  bench_attention();
  bench_loss();
  bench_fused();
  bench_matmul();
  bench_conv();
  bench_batch_norm();
  bench_overhead();
  return 0;
}
