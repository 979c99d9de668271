// GPU flash attention (ops/attention_ops.h, kernels/cuda/attention_*.cu) against the CPU flash
// kernel in float64 on the same (rounded) inputs: float16 and bfloat16, head dims 64 and 128,
// causal and not, ragged lengths (1, 63, 64, 65, 200 and L != S both ways), out and lse; the
// backward's dq, dk, dv; GPT-2's transposed (B, T, H, D) views (no copy; bitwise equal to the
// contiguous run) and misaligned storage (copied); a deterministic backward (two runs bitwise
// equal); autograd through nn::functional::scaled_dot_product_attention, which takes the flash path;
// the GPU's errors; and, named *Large*, tensors past 2^31 elements. The float64 comparisons run
// twice: through cuDNN's fused attention engines (the default where they apply:
// kernels/cuda/attention_cudnn.cpp) and through tessera's own flash kernels
// (cuda::enable_cudnn_sdp(false)); on an sm_80+ GPU the cuDNN path must be taken, in a CUDA graph
// capture as well.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "ops/attention_ops.h"
#include "tessera/cuda.h"
#include "tessera/cuda_graph.h"
#include "tessera/determinism.h"
#include "tessera/nn/functional.h"
#if defined(TESSERA_WITH_CUDA)
#include "kernels/cuda/attention_cudnn.h"
#endif

namespace ts = tessera;
using namespace tessera::testing;

namespace {

struct Dims {
  int64_t b, h, l, s, d;
};

// (B, H, N, D) test data in dtype `dt` on the GPU; `bthd`: stored as (B, N, H, D) and transposed.
ts::Tensor input(int64_t b, int64_t h, int64_t n, int64_t d, ts::DType dt, uint64_t seed, bool bthd = false) {
  if (bthd) return test_data({b, n, h, d}, dt, seed).reshape({b, n, h, d}).to("cuda").transpose(1, 2);
  return test_data({b, h, n, d}, dt, seed).reshape({b, h, n, d}).to("cuda");
}

ts::Tensor f64(const ts::Tensor& t) { return t.cpu().to(ts::kFloat64); }

// gpu (moved to the host, in float64) within tol of ref, atol raised to rel * max|ref| (sums of
// many rounded terms) and to `floor` (for references that cancel to 0, see BackwardMatchesCpuFloat64).
::testing::AssertionResult near(const ts::Tensor& gpu, const ts::Tensor& ref, double rtol, double rel,
                                double floor = 1e-6) {
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "the result is not on the GPU";
  const double m = ref.numel() > 0 ? ref.abs().max().item<double>() : 0.0;
  return all_close(f64(gpu), ref, {rtol, std::max(floor, rel * m)});
}

double max_abs(const ts::Tensor& t) { return t.numel() > 0 ? t.abs().max().cpu().to(ts::kFloat64).item<double>() : 0.0; }

// bfloat16 keeps 8 bits, float16 11: P and dS are rounded to them for the tensor-core products.
double out_tol(ts::DType dt) { return dt == ts::kBFloat16 ? 2e-2 : 3e-3; }
double grad_tol(ts::DType dt) { return dt == ts::kBFloat16 ? 3e-2 : 6e-3; }

std::vector<Dims> ragged(int64_t d) {
  // The last three have S a multiple of 128 and at least 64 queries: cuDNN's backward takes them on
  // every cuDNN version (attention_cudnn.cpp), with L = S and L != S both ways.
  return {{1, 1, 1, 1, d},   {2, 3, 63, 63, d}, {2, 3, 64, 64, d},   {1, 2, 65, 65, d},   {2, 2, 200, 200, d},
          {1, 2, 64, 200, d}, {1, 2, 200, 65, d}, {1, 1, 1, 130, d},  {1, 1, 130, 1, d},  {2, 2, 128, 128, d},
          {1, 2, 64, 256, d}, {1, 2, 300, 128, d}};
}

std::string what(const Dims& c, ts::DType dt, bool causal) {
  return ts::detail::str_cat(ts::dtype_name(dt), " B", c.b, " H", c.h, " L", c.l, " S", c.s, " D", c.d,
                             causal ? " causal" : "");
}

// How many attention calls cuDNN ran, and why it last declined one (the kernels' counters; a CPU
// build, where these tests skip, has none).
int64_t cudnn_runs() {
#if defined(TESSERA_WITH_CUDA)
  return ts::cuda::attention_cudnn_runs();
#else
  return 0;
#endif
}
std::string cudnn_failure() {
#if defined(TESSERA_WITH_CUDA)
  return ts::cuda::attention_cudnn_last_failure();
#else
  return "a build without CUDA";
#endif
}

// Sets cuda::enable_cudnn_sdp for a scope.
struct CudnnSdp {
  explicit CudnnSdp(bool on) { ts::cuda::enable_cudnn_sdp(on); }
  ~CudnnSdp() { ts::cuda::enable_cudnn_sdp(true); }
};
const char* backend(bool cudnn) { return cudnn ? " (cuDNN)" : " (tessera kernels)"; }

bool sm80() {
  const ts::cuda::DeviceProperties props = ts::cuda::get_device_properties(0);
  return props.major >= 8;
}

}  // namespace

TEST(CudaAttention, ForwardMatchesCpuFloat64) {
  TS_REQUIRE_GPU();
  for (bool cudnn : {true, false})
  for (ts::DType dt : {ts::kBFloat16, ts::kFloat16})
    for (int64_t d : {64, 128})
      for (const Dims& c : ragged(d))
        for (bool causal : {false, true}) {
          const ts::Tensor q = input(c.b, c.h, c.l, c.d, dt, 1), k = input(c.b, c.h, c.s, c.d, dt, 2),
                           v = input(c.b, c.h, c.s, c.d, dt, 3);
          const double scale = 1.0 / std::sqrt(static_cast<double>(d));
          CudnnSdp use(cudnn);
          auto [out, lse] = ts::flash_attention_forward(q, k, v, causal, scale);
          auto [ro, rl] = ts::flash_attention_forward(f64(q), f64(k), f64(v), causal, scale);
          ASSERT_EQ(out.dtype(), dt);
          ASSERT_EQ(lse.dtype(), ts::kFloat32);
          // In q's dim order (Note [Flash attention layout]): a contiguous q, a contiguous out.
          EXPECT_EQ(out.sizes(), q.sizes());
          EXPECT_TRUE(out.is_contiguous());
          EXPECT_TRUE(near(out, ro, out_tol(dt), out_tol(dt))) << what(c, dt, causal) << backend(cudnn);
          EXPECT_TRUE(near(lse, rl, 1e-4, 1e-5)) << "lse " << what(c, dt, causal) << backend(cudnn);
        }
}

TEST(CudaAttention, BackwardMatchesCpuFloat64) {
  TS_REQUIRE_GPU();
  for (bool cudnn : {true, false})
  for (ts::DType dt : {ts::kBFloat16, ts::kFloat16})
    for (int64_t d : {64, 128})
      for (const Dims& c : ragged(d))
        for (bool causal : {false, true}) {
          const ts::Tensor q = input(c.b, c.h, c.l, c.d, dt, 4), k = input(c.b, c.h, c.s, c.d, dt, 5),
                           v = input(c.b, c.h, c.s, c.d, dt, 6), g = input(c.b, c.h, c.l, c.d, dt, 7);
          const double scale = 1.0 / std::sqrt(static_cast<double>(d));
          CudnnSdp use(cudnn);
          auto [out, lse] = ts::flash_attention_forward(q, k, v, causal, scale);
          auto [dq, dk, dv] = ts::flash_attention_backward(g, q, k, v, out, lse, causal, scale);
          EXPECT_TRUE(dq.is_contiguous() && dk.is_contiguous() && dv.is_contiguous());
          auto [ro, rl] = ts::flash_attention_forward(f64(q), f64(k), f64(v), causal, scale);
          auto [rq, rk, rv] = ts::flash_attention_backward(f64(g), f64(q), f64(k), f64(v), ro, rl, causal, scale);
          // With one key (S = 1) the softmax is constant: dq and dk are exactly 0, and the GPU's
          // dS = P (dP - rowsum(dO * O)) leaves float32 rounding of terms of size |dO| |v| (O is v
          // rounded to dt): an absolute floor of 1e-5 of that size.
          const double floor = 1e-5 * max_abs(g) * std::max({max_abs(q), max_abs(k), max_abs(v)}) *
                               std::max({max_abs(q), max_abs(k), max_abs(v), 1.0});
          EXPECT_TRUE(near(dq, rq, grad_tol(dt), grad_tol(dt), floor)) << "dq " << what(c, dt, causal) << backend(cudnn);
          EXPECT_TRUE(near(dk, rk, grad_tol(dt), grad_tol(dt), floor)) << "dk " << what(c, dt, causal) << backend(cudnn);
          EXPECT_TRUE(near(dv, rv, grad_tol(dt), grad_tol(dt), floor)) << "dv " << what(c, dt, causal) << backend(cudnn);
        }
}

TEST(CudaAttention, TransposedViewsMatchContiguousBitwise) {
  TS_REQUIRE_GPU();
  CudnnSdp use(false);  // tessera's kernels: bitwise (cuDNN's plans differ per layout; CudnnMatchesOwnKernels)
  for (int64_t d : {64, 128}) {
    const int64_t b = 2, t = 77, h = 3;
    const ts::Tensor q = input(b, h, t, d, ts::kBFloat16, 8, true), k = input(b, h, t, d, ts::kBFloat16, 9, true),
                     v = input(b, h, t, d, ts::kBFloat16, 10, true), g = input(b, h, t, d, ts::kBFloat16, 11);
    ASSERT_FALSE(q.is_contiguous());
    auto [out, lse] = ts::flash_attention_forward(q, k, v, true, 0.125);
    auto [oc, lc] = ts::flash_attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), true, 0.125);
    EXPECT_TRUE(all_close(out.cpu(), oc.cpu(), {0, 0})) << d;
    EXPECT_TRUE(all_close(lse.cpu(), lc.cpu(), {0, 0})) << d;
    auto [dq, dk, dv] = ts::flash_attention_backward(g, q, k, v, out, lse, true, 0.125);
    // (B, L, H, D) memory like the transposed inputs: the head transposes back are views.
    EXPECT_TRUE(out.transpose(1, 2).is_contiguous() && dq.transpose(1, 2).is_contiguous() &&
                dk.transpose(1, 2).is_contiguous() && dv.transpose(1, 2).is_contiguous());
    EXPECT_TRUE(oc.is_contiguous());
    auto [dq2, dk2, dv2] =
        ts::flash_attention_backward(g, q.contiguous(), k.contiguous(), v.contiguous(), oc, lc, true, 0.125);
    EXPECT_TRUE(all_close(dq.cpu(), dq2.cpu(), {0, 0})) << d;
    EXPECT_TRUE(all_close(dk.cpu(), dk2.cpu(), {0, 0})) << d;
    EXPECT_TRUE(all_close(dv.cpu(), dv2.cpu(), {0, 0})) << d;
    // And against float64.
    auto [ro, rl] = ts::flash_attention_forward(f64(q), f64(k), f64(v), true, 0.125);
    EXPECT_TRUE(near(out, ro, out_tol(ts::kBFloat16), out_tol(ts::kBFloat16))) << d;
  }
}

TEST(CudaAttention, MisalignedStorageIsCopied) {
  TS_REQUIRE_GPU();
  const int64_t b = 1, h = 2, l = 33, d = 64, n = b * h * l * d;
  const ts::Tensor flat = test_data({n + 1}, ts::kFloat16, 12).to("cuda");
  const ts::Tensor q = flat.narrow(0, 1, n).view({b, h, l, d});  // 2-byte offset: rows not 16-byte aligned
  const ts::Tensor k = input(b, h, l, d, ts::kFloat16, 13), v = input(b, h, l, d, ts::kFloat16, 14);
  auto [out, lse] = ts::flash_attention_forward(q, k, v, false, 0.125);
  auto [oc, lc] = ts::flash_attention_forward(q.contiguous(), k, v, false, 0.125);
  EXPECT_TRUE(all_close(out.cpu(), oc.cpu(), {0, 0}));
}

// GPT-2's q, k, v cut from one (B, T, 3C) projection (Note [Packed attention gradients]): the backward
// writes dq, dk, dv side by side in one buffer, the split's backward joins them as a view, and the
// projection's gradient equals the one of three separate contiguous leaves (bitwise on tessera's
// kernels, which are layout-independent; within the bf16 gradient tolerance through cuDNN).
TEST(CudaAttention, PackedQkvGradientsLieInOneBuffer) {
  TS_REQUIRE_GPU();
  for (bool cudnn : {true, false})
    for (int64_t d : {64, 128}) {
      CudnnSdp use(cudnn);
      const int64_t b = 2, h = 3, t = 256, c = h * d;
      const ts::Tensor x = test_data({b, t, 3 * c}, ts::kBFloat16, 40).to("cuda").requires_grad_();
      const ts::Tensor g = test_data({b, t, c}, ts::kBFloat16, 41).to("cuda");
      auto heads = [&](const ts::Tensor& y) { return y.view({b, t, h, d}).transpose(1, 2); };
      std::vector<ts::Tensor> qkv = x.split(c, 2);
      const ts::Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
      {  // the op's outputs: slices of one buffer, k's c elements after q's
        ts::NoGradGuard no_grad;
        auto [out, lse] = ts::flash_attention_forward(q, k, v, true, 0.125);
        auto [dq, dk, dv] = ts::flash_attention_backward(heads(g), q, k, v, out, lse, true, 0.125);
        EXPECT_EQ(static_cast<char*>(dk.data_ptr()) - static_cast<char*>(dq.data_ptr()), c * 2);
        EXPECT_EQ(static_cast<char*>(dv.data_ptr()) - static_cast<char*>(dk.data_ptr()), c * 2);
        EXPECT_EQ(dq.strides(), q.strides());
      }
      {  // a projection with 8 more columns: the gradients' pack would have holes, so three buffers
        ts::NoGradGuard no_grad;
        const ts::Tensor wide = test_data({b, t, 3 * c + 8}, ts::kBFloat16, 42).to("cuda");
        const ts::Tensor wq = heads(wide.narrow(2, 0, c)), wk = heads(wide.narrow(2, c, c)),
                         wv = heads(wide.narrow(2, 2 * c, c));
        auto [out, lse] = ts::flash_attention_forward(wq, wk, wv, true, 0.125);
        auto [dq, dk, dv] = ts::flash_attention_backward(heads(g), wq, wk, wv, out, lse, true, 0.125);
        EXPECT_FALSE(dq.is_alias_of(dk));
        auto [dq2, dk2, dv2] = ts::flash_attention_backward(heads(g), wq.contiguous(), wk.contiguous(),
                                                            wv.contiguous(), out, lse, true, 0.125);
        if (!cudnn) {
          EXPECT_TRUE(all_close(dq.cpu(), dq2.cpu(), {0, 0})) << d;
          EXPECT_TRUE(all_close(dv.cpu(), dv2.cpu(), {0, 0})) << d;
        }
      }
      ts::Tensor y = ts::nn::functional::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true);
      y.transpose(1, 2).reshape({b, t, c}).backward(g);
      // The same with three contiguous leaves.
      ts::Tensor q2 = q.detach().contiguous().requires_grad_(), k2 = k.detach().contiguous().requires_grad_(),
                 v2 = v.detach().contiguous().requires_grad_();
      ts::Tensor y2 = ts::nn::functional::scaled_dot_product_attention(q2, k2, v2, std::nullopt, 0.0, true);
      y2.backward(heads(g));
      auto back = [&](const ts::Tensor& gh) { return gh.transpose(1, 2).reshape({b, t, c}); };
      const ts::Tensor want = ts::cat({back(q2.grad()), back(k2.grad()), back(v2.grad())}, 2);
      if (cudnn)
        EXPECT_TRUE(near(x.grad(), f64(want), grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16))) << d;
      else
        EXPECT_TRUE(all_close(x.grad().cpu(), want.cpu(), {0, 0})) << d;
    }
}

// With the determinism switch on, the backward is bitwise repeatable on both paths (cuDNN's through its
// deterministic graph, or tessera's kernels, which are deterministic always).
TEST(CudaAttention, BackwardIsDeterministic) {
  TS_REQUIRE_GPU();
  ts::set_deterministic(true);
  for (bool cudnn : {true, false})
  for (int64_t d : {64, 128}) {
    CudnnSdp use(cudnn);
    const int64_t b = 2, h = 4, t = cudnn ? 384 : 333;  // S a multiple of 128: cuDNN's case on every version
    const ts::Tensor q = input(b, h, t, d, ts::kBFloat16, 15, true), k = input(b, h, t, d, ts::kBFloat16, 16, true),
                     v = input(b, h, t, d, ts::kBFloat16, 17, true), g = input(b, h, t, d, ts::kBFloat16, 18);
    auto [out, lse] = ts::flash_attention_forward(q, k, v, true, 0.1);
    const int64_t before = cudnn_runs();
    auto [dq1, dk1, dv1] = ts::flash_attention_backward(g, q, k, v, out, lse, true, 0.1);
    if (cudnn)  // cuDNN's deterministic graph where an engine takes it (and is not marked otherwise)
      std::printf("d = %lld: the deterministic backward %s\n", static_cast<long long>(d),
                  cudnn_runs() > before ? "ran through cuDNN" : ("fell back: " + cudnn_failure()).c_str());
    auto [dq2, dk2, dv2] = ts::flash_attention_backward(g, q, k, v, out, lse, true, 0.1);
    {  // and it is right: against tessera's kernels
      CudnnSdp off(false);
      auto [dq3, dk3, dv3] = ts::flash_attention_backward(g, q, k, v, out, lse, true, 0.1);
      EXPECT_TRUE(near(dq1, f64(dq3), grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16))) << d << backend(cudnn);
      EXPECT_TRUE(near(dk1, f64(dk3), grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16))) << d << backend(cudnn);
      EXPECT_TRUE(near(dv1, f64(dv3), grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16))) << d << backend(cudnn);
    }
    EXPECT_TRUE(all_close(dq1.cpu(), dq2.cpu(), {0, 0})) << d << backend(cudnn);
    EXPECT_TRUE(all_close(dk1.cpu(), dk2.cpu(), {0, 0})) << d << backend(cudnn);
    EXPECT_TRUE(all_close(dv1.cpu(), dv2.cpu(), {0, 0})) << d << backend(cudnn);
  }
  ts::set_deterministic(false);
}

// On an sm_80+ GPU the GPT-2 case (bf16 and fp16, head dims 64 and 128, causal, transposed (B, T, H, D)
// views) runs through cuDNN, forward and backward, and agrees with tessera's own kernels.
TEST(CudaAttention, CudnnMatchesOwnKernels) {
  TS_REQUIRE_GPU();
  if (!sm80()) GTEST_SKIP() << "cuDNN's fused attention needs compute capability 8.0";
  for (ts::DType dt : {ts::kBFloat16, ts::kFloat16})
    for (int64_t d : {64, 128})
      for (bool causal : {true, false}) {
        const int64_t b = 2, h = 3, t = 256;  // S a multiple of 128: cuDNN 9.15 and older need it
        const ts::Tensor q = input(b, h, t, d, dt, 30, true), k = input(b, h, t, d, dt, 31, true),
                         v = input(b, h, t, d, dt, 32, true), g = input(b, h, t, d, dt, 33, true);
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const int64_t before = cudnn_runs();
        auto [out, lse] = ts::flash_attention_forward(q, k, v, causal, scale);
        auto [dq, dk, dv] = ts::flash_attention_backward(g, q, k, v, out, lse, causal, scale);
        ASSERT_EQ(cudnn_runs(), before + 2)
            << "cuDNN declined: " << cudnn_failure();
        CudnnSdp off(false);
        auto [o2, l2] = ts::flash_attention_forward(q, k, v, causal, scale);
        auto [dq2, dk2, dv2] = ts::flash_attention_backward(g, q, k, v, o2, l2, causal, scale);
        EXPECT_EQ(cudnn_runs(), before + 2);
        const std::string w = what({b, h, t, t, d}, dt, causal);
        EXPECT_TRUE(near(out, f64(o2), out_tol(dt), out_tol(dt))) << w;
        EXPECT_TRUE(near(lse, f64(l2), 1e-4, 1e-5)) << w;
        EXPECT_TRUE(near(dq, f64(dq2), grad_tol(dt), grad_tol(dt))) << w;
        EXPECT_TRUE(near(dk, f64(dk2), grad_tol(dt), grad_tol(dt))) << w;
        EXPECT_TRUE(near(dv, f64(dv2), grad_tol(dt), grad_tol(dt))) << w;
      }
}

// A forward + backward captured in a CUDA graph after an eager warm-up (which builds the cuDNN plans)
// replays to the eager results; with no plan yet, a capture falls back to tessera's kernels.
TEST(CudaAttention, CudnnInCudaGraph) {
  TS_REQUIRE_GPU();
  if (!sm80()) GTEST_SKIP() << "cuDNN's fused attention needs compute capability 8.0";
  const int64_t b = 2, h = 4, t = 128, d = 64;
  const ts::Tensor q = input(b, h, t, d, ts::kBFloat16, 34, true), k = input(b, h, t, d, ts::kBFloat16, 35, true),
                   v = input(b, h, t, d, ts::kBFloat16, 36, true), g = input(b, h, t, d, ts::kBFloat16, 37, true);
  auto [out, lse] = ts::flash_attention_forward(q, k, v, true, 0.125);
  auto [dq, dk, dv] = ts::flash_attention_backward(g, q, k, v, out, lse, true, 0.125);
  ts::cuda::Stream side = ts::cuda::Stream::create();
  ts::cuda::Graph graph;
  ts::Tensor go, gdq, gdk, gdv;
  const int64_t before = cudnn_runs();
  {
    ts::cuda::StreamGuard guard(side);
    graph.capture_begin();
    auto [o2, l2] = ts::flash_attention_forward(q, k, v, true, 0.125);
    std::tie(gdq, gdk, gdv) = ts::flash_attention_backward(g, q, k, v, o2, l2, true, 0.125);
    go = o2;
    graph.capture_end();
    side.synchronize();
  }
  const int64_t captured = cudnn_runs() - before;
  graph.replay();
  ts::cuda::synchronize();
  EXPECT_EQ(captured, 2) << cudnn_failure();  // forward and backward, both cuDNN's
  EXPECT_TRUE(all_close(go.cpu(), out.cpu(), {0, 0}));
  // The backward adds dQ with float atomics (the order varies): within the bf16 tolerance.
  EXPECT_TRUE(near(gdq, f64(dq), grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16)));
  EXPECT_TRUE(near(gdk, f64(dk), grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16)));
  EXPECT_TRUE(near(gdv, f64(dv), grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16)));
}

TEST(CudaAttention, ScaledDotProductAttentionTakesTheFlashPath) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kBFloat16, ts::kFloat16}) {
    const int64_t b = 2, t = 100, h = 3, d = 64;
    ts::Tensor qb = test_data({b, t, h, d}, dt, 19).reshape({b, t, h, d}).to("cuda").requires_grad_();
    ts::Tensor kb = test_data({b, t, h, d}, dt, 20).reshape({b, t, h, d}).to("cuda").requires_grad_();
    ts::Tensor vb = test_data({b, t, h, d}, dt, 21).reshape({b, t, h, d}).to("cuda").requires_grad_();
    const ts::Tensor g = input(b, h, t, d, dt, 22);
    ts::Tensor out = ts::nn::functional::scaled_dot_product_attention(qb.transpose(1, 2), kb.transpose(1, 2),
                                                                      vb.transpose(1, 2), std::nullopt, 0.0, true);
    // The flash op's result, bitwise.
    auto [fo, fl] = ts::flash_attention_forward(qb.detach().transpose(1, 2), kb.detach().transpose(1, 2),
                                                vb.detach().transpose(1, 2), true, 0.125);
    EXPECT_TRUE(all_close(out.cpu(), fo.cpu(), {0, 0})) << ts::dtype_name(dt);
    out.backward(g);
    // Against the composite's float64 gradients on the CPU.
    ts::Tensor q2 = f64(qb.detach()).requires_grad_(), k2 = f64(kb.detach()).requires_grad_(),
               v2 = f64(vb.detach()).requires_grad_();
    ts::nn::functional::scaled_dot_product_attention(q2.transpose(1, 2), k2.transpose(1, 2), v2.transpose(1, 2),
                                                     std::nullopt, 0.0, true)
        .backward(f64(g));
    EXPECT_TRUE(near(qb.grad(), q2.grad(), grad_tol(dt), grad_tol(dt))) << ts::dtype_name(dt);
    EXPECT_TRUE(near(kb.grad(), k2.grad(), grad_tol(dt), grad_tol(dt))) << ts::dtype_name(dt);
    EXPECT_TRUE(near(vb.grad(), v2.grad(), grad_tol(dt), grad_tol(dt))) << ts::dtype_name(dt);
  }
}

TEST(CudaAttention, OtherCasesUseTheComposite) {
  TS_REQUIRE_GPU();
  // float32 and head dim 80 are not the flash kernel's; the functional API still answers.
  for (auto [dt, d] : std::vector<std::pair<ts::DType, int64_t>>{{ts::kFloat32, 64}, {ts::kBFloat16, 80}}) {
    const ts::Tensor q = input(1, 2, 9, d, dt, 23), k = input(1, 2, 9, d, dt, 24);
    ts::Tensor out = ts::nn::functional::scaled_dot_product_attention(q, k, k, std::nullopt, 0.0, true);
    const ts::Tensor ref =
        ts::nn::functional::scaled_dot_product_attention(f64(q), f64(k), f64(k), std::nullopt, 0.0, true);
    EXPECT_TRUE(near(out, ref, 2e-2, 2e-2)) << ts::dtype_name(dt) << " " << d;
    EXPECT_THROW(ts::flash_attention_forward(q, k, k, true, 0.1), ts::NotImplementedError);
  }
  // 3-D inputs go through the flash path too.
  const ts::Tensor q = input(1, 2, 9, 64, ts::kFloat16, 25), k = input(1, 2, 9, 64, ts::kFloat16, 26);
  ts::Tensor out3 = ts::nn::functional::scaled_dot_product_attention(q.squeeze(0), k.squeeze(0), k.squeeze(0),
                                                                     std::nullopt, 0.0, false);
  EXPECT_EQ(out3.sizes(), ts::Shape({2, 9, 64}));
  EXPECT_TRUE(all_close(out3.cpu(), std::get<0>(ts::flash_attention_forward(q, k, k, false, 0.125)).squeeze(0).cpu(),
                        {0, 0}));
}

// cuda::enable_flash_sdp(false) sends the flash-eligible case through the composite (PyTorch's
// torch.backends.cuda.enable_flash_sdp): the same values within the 16-bit tolerance, another node.
TEST(CudaAttention, FlashCanBeTurnedOff) {
  TS_REQUIRE_GPU();
  ASSERT_TRUE(ts::cuda::flash_sdp_enabled());
  const ts::Tensor q = input(2, 3, 40, 64, ts::kBFloat16, 27).requires_grad_();
  const ts::Tensor k = input(2, 3, 40, 64, ts::kBFloat16, 28), v = input(2, 3, 40, 64, ts::kBFloat16, 29);
  const ts::Tensor flash = ts::nn::functional::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true);
  ts::cuda::enable_flash_sdp(false);
  const ts::Tensor math = ts::nn::functional::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true);
  ts::cuda::enable_flash_sdp(true);
  ASSERT_TRUE(flash.grad_fn() && math.grad_fn());
  EXPECT_NE(flash.grad_fn()->name(), math.grad_fn()->name());
  EXPECT_TRUE(near(math, f64(flash), 2e-2, 2e-2));
}

TEST(CudaAttention, DeviceErrors) {
  TS_REQUIRE_GPU();
  const ts::Tensor q = input(1, 1, 4, 64, ts::kBFloat16, 27);
  EXPECT_THROW(ts::flash_attention_forward(q, q.cpu(), q, false, 1.0), ts::DeviceError);
  auto [out, lse] = ts::flash_attention_forward(q, q, q, false, 1.0);
  EXPECT_THROW(ts::flash_attention_backward(q, q, q, q, out, lse.cpu(), false, 1.0), ts::DeviceError);
}

TEST(CudaAttention, LargePast2e31Elements) {
  TS_REQUIRE_GPU();
  // (2^14, 8, 128, 128) bfloat16: 2^31 elements (4 GiB) per tensor; checks the last heads, whose
  // offsets pass 2^31, against the CPU.
  const int64_t b = 16384, h = 8, l = 128, d = 128;
  const ts::TensorOptions o(ts::kBFloat16, ts::Device("cuda"));
  const ts::Tensor q = ts::randn({b, h, l, d}, o), k = ts::randn({b, h, l, d}, o), v = ts::randn({b, h, l, d}, o);
  auto [out, lse] = ts::flash_attention_forward(q, k, v, true, 0.088);
  auto [dq, dk, dv] = ts::flash_attention_backward(out, q, k, v, out, lse, true, 0.088);
  const auto last = [&](const ts::Tensor& t) { return t.narrow(0, b - 1, 1); };
  auto [ro, rl] = ts::flash_attention_forward(f64(last(q)), f64(last(k)), f64(last(v)), true, 0.088);
  EXPECT_TRUE(near(last(out), ro, out_tol(ts::kBFloat16), out_tol(ts::kBFloat16)));
  auto [rq, rk, rv] =
      ts::flash_attention_backward(f64(last(out)), f64(last(q)), f64(last(k)), f64(last(v)), ro, rl, true, 0.088);
  EXPECT_TRUE(near(last(dq), rq, grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16)));
  EXPECT_TRUE(near(last(dk), rk, grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16)));
  EXPECT_TRUE(near(last(dv), rv, grad_tol(ts::kBFloat16), grad_tol(ts::kBFloat16)));
}
