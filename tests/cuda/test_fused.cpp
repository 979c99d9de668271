// GPU fused ops of a transformer step against the unfused composition run on the CPU on the same
// inputs (in float64, then rounded to the dtype): add_layer_norm (the register kernels for N up to
// 16384, the looped ones past that, 16-byte and element loads, a misaligned view), linear_gelu (the
// cuBLASLt GELU_AUX epilogue where N % 8 == 0, the fallback elsewhere; 3-D inputs, no bias), the
// bias gradient of linear from the weight-gradient GEMM (BGRADB), mlp_gelu (the DGELU_BGRAD epilogue
// in its backward), linear_cross_entropy over chunks
// with ignored targets, under bfloat16 autocast too, and GPT-2's fused loss against its logits path.
// Every dtype the ops take: float32, float16, bfloat16, float64.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "ops/fused_ops.h"
#include "tessera/amp.h"
#include "tessera/autograd.h"
#include "tessera/cuda.h"
#include "tessera/models.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using namespace tessera::testing;

namespace {

std::optional<ts::Tensor> opt(const ts::Tensor& t) { return t.defined() ? std::optional<ts::Tensor>(t) : std::nullopt; }
ts::Tensor leaf(const ts::Tensor& t) { return t.defined() ? t.detach().clone().requires_grad_() : ts::Tensor(); }
ts::Tensor on(const ts::Tensor& t, const char* dev, ts::DType d) {
  return t.defined() ? t.to(ts::Device(dev), d) : ts::Tensor();
}

const std::vector<ts::DType> kDtypes{ts::kFloat32, ts::kFloat16, ts::kBFloat16, ts::kFloat64};

// atol grows to rtol * max|expected| (sums rounded to a 16-bit dtype).
::testing::AssertionResult near(const ts::Tensor& gpu, const ts::Tensor& ref, ts::DType d, double scale = 1.0) {
  if (gpu.defined() != ref.defined()) return ::testing::AssertionFailure() << "defined mismatch";
  if (!gpu.defined()) return ::testing::AssertionSuccess();
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "the result is not on the GPU";
  Tolerance tol = d == ts::kFloat64 ? Tolerance{1e-9, 1e-9}
                  : d == ts::kFloat32 ? Tolerance{1e-4, 1e-4}
                  : d == ts::kFloat16 ? Tolerance{1e-2, 1e-2}
                                      : Tolerance{5e-2, 5e-2};
  tol.rtol *= scale;
  if (ref.numel() > 0) {
    const double m = ref.to(ts::kFloat64).abs().max().item<double>();
    if (std::isfinite(m)) tol.atol = std::max(tol.atol, tol.rtol * m);
  }
  return all_close(gpu.cpu().to(ts::kFloat64), ref.to(ts::kFloat64), tol);
}

// Gradients of sum(out_i * seed_i) in ins (all defined-or-not as given).
std::vector<ts::Tensor> grads_of(const std::vector<ts::Tensor>& outs, const std::vector<ts::Tensor>& seeds,
                                 const std::vector<ts::Tensor>& ins) {
  ts::Tensor loss;
  for (size_t i = 0; i < outs.size(); ++i) {
    ts::Tensor term = (outs[i].to(ts::kFloat64) * seeds[i].to(outs[i].device(), ts::kFloat64)).sum();
    loss = loss.defined() ? loss + term : term;
  }
  std::vector<ts::Tensor> defined;
  for (const ts::Tensor& t : ins)
    if (t.defined()) defined.push_back(t);
  std::vector<ts::Tensor> g = ts::autograd::grad({loss}, defined);
  std::vector<ts::Tensor> out;
  size_t j = 0;
  for (const ts::Tensor& t : ins) out.push_back(t.defined() ? g[j++] : ts::Tensor());
  return out;
}

// ---- add_layer_norm -------------------------------------------------------------------------------

struct AddLnOut {
  ts::Tensor s, y, dx, dr, dw, db;
};

AddLnOut add_ln(bool fused, const char* dev, ts::DType d, const ts::Tensor& x0, const ts::Tensor& r0,
                const ts::Tensor& w0, const ts::Tensor& b0, const ts::Tensor& gs, const ts::Tensor& gy,
                int64_t n) {
  ts::Tensor x = leaf(on(x0, dev, d)), r = leaf(on(r0, dev, d)), w = leaf(on(w0, dev, d)), b = leaf(on(b0, dev, d));
  AddLnOut o;
  if (fused) {
    std::tie(o.s, o.y) = F::add_layer_norm(x, r, {n}, opt(w), opt(b), 1e-5);
  } else {
    o.s = x + r;
    o.y = F::layer_norm(o.s, {n}, opt(w), opt(b), 1e-5);
  }
  auto g = grads_of({o.s, o.y}, {gs, gy}, {x, r, w, b});
  o.dx = g[0];
  o.dr = g[1];
  o.dw = g[2];
  o.db = g[3];
  return o;
}

TEST(CudaFused, AddLayerNormMatchesComposite) {
  TS_REQUIRE_GPU();
  struct C {
    int64_t m, n;
  };
  for (const C& c : std::vector<C>{{4, 1}, {33, 7}, {64, 768}, {5, 1025}, {8, 4096}, {3, 16385}, {2, 65537}}) {
    for (int affine : {0, 3, 1}) {
      const ts::Tensor x = test_data({c.m, c.n}, ts::kFloat64, 1).reshape({c.m, c.n}) * 2.0 + 0.5;
      const ts::Tensor r = test_data({c.m, c.n}, ts::kFloat64, 2).reshape({c.m, c.n});
      const ts::Tensor w = affine & 1 ? test_data({c.n}, ts::kFloat64, 3) : ts::Tensor();
      const ts::Tensor b = affine & 2 ? test_data({c.n}, ts::kFloat64, 4) : ts::Tensor();
      const ts::Tensor gs = test_data({c.m, c.n}, ts::kFloat64, 5).reshape({c.m, c.n});
      const ts::Tensor gy = test_data({c.m, c.n}, ts::kFloat64, 6).reshape({c.m, c.n});
      for (ts::DType d : kDtypes) {
        SCOPED_TRACE(ts::detail::str_cat(c.m, "x", c.n, " affine ", affine, " ", ts::dtype_name(d)));
        const AddLnOut g = add_ln(true, "cuda", d, x, r, w, b, gs, gy, c.n);
        // The reference: the CPU composite on the same rounded inputs, in float64.
        const AddLnOut ref = add_ln(false, "cpu", ts::kFloat64, x.to(d), r.to(d), on(w, "cpu", d), on(b, "cpu", d),
                                    gs.to(d), gy.to(d), c.n);
        // The sum rounds once, as the unfused add: bitwise the CPU add in d.
        EXPECT_TRUE(ts::equal(g.s.cpu(), x.to(d) + r.to(d)));
        EXPECT_TRUE(near(g.y, ref.y, d));
        EXPECT_TRUE(near(g.dx, ref.dx, d));
        EXPECT_TRUE(ts::equal(g.dx.cpu(), g.dr.cpu()));
        EXPECT_TRUE(near(g.dw, ref.dw, d, 2.0));
        EXPECT_TRUE(near(g.db, ref.db, d, 2.0));
      }
    }
  }
}

TEST(CudaFused, AddLayerNormMisalignedAndAutocast) {
  TS_REQUIRE_GPU();
  const int64_t m = 7, n = 768;
  for (ts::DType d : {ts::kBFloat16, ts::kFloat32}) {
    // Storage offset 1: contiguous views that defeat the 16-byte loads.
    ts::Tensor xb = test_data({m * n + 1}, d, 7).to("cuda"), rb = test_data({m * n + 1}, d, 8).to("cuda");
    ts::Tensor x = xb.narrow(0, 1, m * n).view({m, n}), r = rb.narrow(0, 1, m * n).view({m, n});
    ts::Tensor w = test_data({n}, d, 9).to("cuda"), b = test_data({n}, d, 10).to("cuda");
    auto [s, y] = F::add_layer_norm(x, r, {n}, w, b);
    EXPECT_TRUE(ts::equal(s.cpu(), x.cpu() + r.cpu()));
    ts::Tensor ref = F::layer_norm(s.cpu().to(ts::kFloat64), {n}, w.cpu().to(ts::kFloat64), b.cpu().to(ts::kFloat64));
    EXPECT_TRUE(near(y, ref, d)) << ts::dtype_name(d);
  }
  // Autocast: float32 stream + bfloat16 branch -> a float32 sum and y in bfloat16 (Note [Mixed add +
  // layer norm]), as x + r then layer_norm, rounded once.
  ts::Tensor x = test_data({4, 64}, ts::kFloat32, 11).reshape({4, 64}).to("cuda");
  ts::Tensor r = test_data({4, 64}, ts::kBFloat16, 12).reshape({4, 64}).to("cuda");
  ts::amp::autocast guard(ts::Device("cuda"), ts::kBFloat16);
  auto [s, y] = F::add_layer_norm(x, r, {64});
  EXPECT_EQ(s.dtype(), ts::kFloat32);
  EXPECT_EQ(y.dtype(), ts::kBFloat16);
  EXPECT_TRUE(all_close(y.cpu().to(ts::kFloat32), F::layer_norm(x + r, {64}).cpu(), {1e-2, 1e-2}));
}

// Note [Mixed add + layer norm]: a 16-bit branch x, float32 residual and parameters, under autocast (y in
// the low dtype): every value and gradient bitwise equal to the float32 fused op between explicit casts
// (what autocast ran before), through the persistent and one-row kernels, the looped ones (16385
// columns), element loads (odd N) and a misaligned branch.
TEST(CudaFused, AddLayerNormMixedEqualsCastsBitwise) {
  TS_REQUIRE_GPU();
  struct C {
    int64_t m, n;
    bool misaligned;
  };
  for (const C& c : std::vector<C>{{64, 768, false}, {33, 7, false}, {8, 4096, false}, {5, 1025, false},
                                   {3, 16385, false}, {7, 768, true}}) {
    for (ts::DType low : {ts::kBFloat16, ts::kFloat16}) {
      for (int affine : {3, 0}) {
        SCOPED_TRACE(ts::detail::str_cat(c.m, "x", c.n, c.misaligned ? " misaligned " : " ", ts::dtype_name(low),
                                         " affine ", affine));
        ts::Tensor xs = test_data({c.m * c.n + 1}, low, 41).to("cuda");
        const ts::Tensor x0 = xs.narrow(0, c.misaligned ? 1 : 0, c.m * c.n).view({c.m, c.n});
        const ts::Tensor r0 = test_data({c.m, c.n}, ts::kFloat32, 42).reshape({c.m, c.n}).to("cuda");
        const ts::Tensor w0 = affine & 1 ? test_data({c.n}, ts::kFloat32, 43).to("cuda") : ts::Tensor();
        const ts::Tensor b0 = affine & 2 ? test_data({c.n}, ts::kFloat32, 44).to("cuda") : ts::Tensor();
        const ts::Tensor gs = test_data({c.m, c.n}, ts::kFloat32, 45).reshape({c.m, c.n});
        const ts::Tensor gy = test_data({c.m, c.n}, low, 46).reshape({c.m, c.n});
        std::vector<ts::Tensor> out[2];
        for (int mixed = 0; mixed < 2; ++mixed) {
          ts::Tensor x = leaf(x0), r = leaf(r0), w = leaf(w0), b = leaf(b0);
          ts::Tensor s, y;
          const bool stream_first = affine == 3;  // GPT-2's order: x + attn(...)
          if (mixed) {
            ts::amp::autocast guard(ts::Device("cuda"), low);
            std::tie(s, y) = stream_first ? F::add_layer_norm(r, x, {c.n}, opt(w), opt(b), 1e-5)
                                          : F::add_layer_norm(x, r, {c.n}, opt(w), opt(b), 1e-5);
          } else {
            std::tie(s, y) = stream_first ? F::add_layer_norm(r, x.to(ts::kFloat32), {c.n}, opt(w), opt(b), 1e-5)
                                          : F::add_layer_norm(x.to(ts::kFloat32), r, {c.n}, opt(w), opt(b), 1e-5);
            y = y.to(low);
          }
          out[mixed] = {s, y};
          for (const ts::Tensor& g : grads_of({s, y}, {gs, gy}, {x, r, w, b})) out[mixed].push_back(g);
        }
        const ts::DType want[6] = {ts::kFloat32, low, low, ts::kFloat32, ts::kFloat32, ts::kFloat32};
        for (size_t i = 0; i < 6; ++i) {
          ASSERT_EQ(out[1][i].defined(), out[0][i].defined()) << "#" << i;
          if (!out[1][i].defined()) continue;
          EXPECT_EQ(out[1][i].dtype(), want[i]) << "#" << i;
          EXPECT_TRUE(ts::equal(out[1][i].cpu(), out[0][i].cpu())) << "#" << i;
        }
      }
    }
  }
}

// ---- linear_gelu and linear's bias gradient -------------------------------------------------------

struct LinOut {
  ts::Tensor y, dx, dw, db;
};

LinOut lin(bool gelu_fused, bool gelu, const char* dev, ts::DType d, const ts::Tensor& x0, const ts::Tensor& w0,
           const ts::Tensor& b0, const ts::Tensor& gy) {
  ts::Tensor x = leaf(on(x0, dev, d)), w = leaf(on(w0, dev, d)), b = leaf(on(b0, dev, d));
  LinOut o;
  if (gelu_fused)
    o.y = F::linear_gelu(x, w, opt(b));
  else
    o.y = gelu ? F::gelu(F::linear(x, w, opt(b)), "tanh") : F::linear(x, w, opt(b));
  auto g = grads_of({o.y}, {gy}, {x, w, b});
  o.dx = g[0];
  o.dw = g[1];
  o.db = g[2];
  return o;
}

TEST(CudaFused, LinearGeluMatchesComposite) {
  TS_REQUIRE_GPU();
  struct C {
    ts::Shape x;
    int64_t n;
  };
  // N % 8 == 0: the GELU_AUX epilogue; N = 30 and a single row: the unfused fallback.
  const std::vector<C> cases{{{64, 96}, 128}, {{2, 33, 40}, 64}, {{33, 17}, 30}, {{1, 24}, 16}, {{256, 768}, 3072}};
  for (const C& c : cases) {
    for (bool bias : {true, false}) {
      const int64_t k = c.x.back();
      const ts::Tensor x = test_data(c.x, ts::kFloat64, 21).reshape(c.x);
      const ts::Tensor w = test_data({c.n, k}, ts::kFloat64, 22).reshape({c.n, k}) * (1.0 / std::sqrt(double(k)));
      const ts::Tensor b = bias ? test_data({c.n}, ts::kFloat64, 23) : ts::Tensor();
      ts::Shape ys(c.x.begin(), c.x.end() - 1);
      ys.push_back(c.n);
      const ts::Tensor gy = test_data(ys, ts::kFloat64, 24).reshape(ys);
      for (ts::DType d : kDtypes) {
        SCOPED_TRACE(ts::detail::str_cat(c.x, " -> ", c.n, " bias ", bias, " ", ts::dtype_name(d)));
        const LinOut g = lin(true, true, "cuda", d, x, w, b, gy);
        const LinOut ref = lin(false, true, "cpu", ts::kFloat64, x.to(d), w.to(d), on(b, "cpu", d), gy.to(d));
        EXPECT_TRUE(near(g.y, ref.y, d));
        {
          ts::NoGradGuard no_grad;  // nothing recorded: the GELU_BIAS epilogue, no pre-activation kept
          const ts::Tensor bd = on(on(b, "cpu", d), "cuda", d);
          EXPECT_TRUE(near(F::linear_gelu(on(x.to(d), "cuda", d), on(w.to(d), "cuda", d), opt(bd)), ref.y, d));
        }
        EXPECT_TRUE(near(g.dx, ref.dx, d, 2.0));
        EXPECT_TRUE(near(g.dw, ref.dw, d, 2.0));
        EXPECT_TRUE(near(g.db, ref.db, d, 2.0));
      }
    }
  }
}

// mlp_gelu: linear(linear_gelu(x, w1, b1), w2, b2); the backward's DGELU_BGRAD epilogue where N1 % 8 == 0.
TEST(CudaFused, MlpGeluMatchesComposite) {
  TS_REQUIRE_GPU();
  struct C {
    ts::Shape x;
    int64_t n1, n2;
  };
  for (const C& c : std::vector<C>{{{64, 96}, 128, 40}, {{2, 33, 40}, 64, 24}, {{33, 17}, 30, 9}, {{1, 24}, 16, 8},
                                   {{512, 768}, 3072, 768}}) {
    for (bool bias : {true, false}) {
      const int64_t k = c.x.back();
      const ts::Tensor x = test_data(c.x, ts::kFloat64, 25).reshape(c.x);
      const ts::Tensor w1 = test_data({c.n1, k}, ts::kFloat64, 26).reshape({c.n1, k}) * (1.0 / std::sqrt(double(k)));
      const ts::Tensor b1 = bias ? test_data({c.n1}, ts::kFloat64, 27) : ts::Tensor();
      const ts::Tensor w2 = test_data({c.n2, c.n1}, ts::kFloat64, 28).reshape({c.n2, c.n1}) *
                            (1.0 / std::sqrt(double(c.n1)));
      const ts::Tensor b2 = bias ? test_data({c.n2}, ts::kFloat64, 29) : ts::Tensor();
      ts::Shape ys(c.x.begin(), c.x.end() - 1);
      ys.push_back(c.n2);
      const ts::Tensor gy = test_data(ys, ts::kFloat64, 30).reshape(ys);
      for (ts::DType d : kDtypes) {
        SCOPED_TRACE(ts::detail::str_cat(c.x, " -> ", c.n1, " -> ", c.n2, " bias ", bias, " ", ts::dtype_name(d)));
        auto run = [&](bool fused, const char* dev, ts::DType dt) {
          ts::Tensor xx = leaf(on(x.to(d), dev, dt)), a = leaf(on(w1.to(d), dev, dt));
          ts::Tensor bb = leaf(on(on(b1, "cpu", d), dev, dt));
          ts::Tensor w = leaf(on(w2.to(d), dev, dt)), b = leaf(on(on(b2, "cpu", d), dev, dt));
          ts::Tensor y = fused ? F::mlp_gelu(xx, a, opt(bb), w, opt(b))
                               : F::linear(F::gelu(F::linear(xx, a, opt(bb)), "tanh"), w, opt(b));
          std::vector<ts::Tensor> out{y};
          for (const ts::Tensor& t : grads_of({y}, {gy.to(d)}, {xx, a, bb, w, b})) out.push_back(t);
          return out;
        };
        const auto g = run(true, "cuda", d);
        const auto ref = run(false, "cpu", ts::kFloat64);
        for (size_t i = 0; i < g.size(); ++i) EXPECT_TRUE(near(g[i], ref[i], d, i == 0 ? 1.0 : 2.0)) << "output " << i;
      }
    }
  }
}

TEST(CudaFused, LinearBiasGradientFromWeightGemm) {
  TS_REQUIRE_GPU();
  // linear's backward: dW and db from one GEMM (BGRADB) where cuBLASLt has it; a fallback otherwise.
  struct C {
    ts::Shape x;
    int64_t n;
  };
  for (const C& c : std::vector<C>{{{128, 64}, 96}, {{4, 50, 32}, 48}, {{7, 5}, 3}, {{1, 8}, 8}, {{16384, 64}, 32}}) {
    const int64_t k = c.x.back();
    const ts::Tensor x = test_data(c.x, ts::kFloat64, 31).reshape(c.x);
    const ts::Tensor w = test_data({c.n, k}, ts::kFloat64, 32).reshape({c.n, k});
    const ts::Tensor b = test_data({c.n}, ts::kFloat64, 33);
    ts::Shape ys(c.x.begin(), c.x.end() - 1);
    ys.push_back(c.n);
    const ts::Tensor gy = test_data(ys, ts::kFloat64, 34).reshape(ys);
    for (ts::DType d : kDtypes) {
      SCOPED_TRACE(ts::detail::str_cat(c.x, " -> ", c.n, " ", ts::dtype_name(d)));
      const LinOut g = lin(false, false, "cuda", d, x, w, b, gy);
      const LinOut ref = lin(false, false, "cpu", ts::kFloat64, x.to(d), w.to(d), b.to(d), gy.to(d));
      EXPECT_TRUE(near(g.dw, ref.dw, d, 2.0));
      EXPECT_TRUE(near(g.db, ref.db, d, 2.0));
      EXPECT_TRUE(near(g.dx, ref.dx, d, 2.0));
    }
  }
  // The op directly, both outputs and each alone.
  ts::Tensor g = test_data({300, 40}, ts::kBFloat16, 35).reshape({300, 40}).to("cuda");
  ts::Tensor x = test_data({300, 24}, ts::kBFloat16, 36).reshape({300, 24}).to("cuda");
  auto [dw, db] = ts::linear_weight_bias_grad(g, x, {true, true});
  const ts::Tensor g64 = g.cpu().to(ts::kFloat64), x64 = x.cpu().to(ts::kFloat64);
  EXPECT_TRUE(near(dw, ts::mm(g64.t(), x64), ts::kBFloat16));
  EXPECT_TRUE(near(db, g64.sum(0), ts::kBFloat16));
}

// ---- linear_cross_entropy ---------------------------------------------------------------------------

struct CeOut {
  ts::Tensor loss, dx, dw;
};

CeOut lin_ce(int64_t chunk, const char* dev, ts::DType d, const ts::Tensor& x0, const ts::Tensor& w0,
             const ts::Tensor& t, const std::string& red) {
  ts::Tensor x = leaf(on(x0, dev, d)), w = leaf(on(w0, dev, d));
  ts::Tensor tt = t.to(ts::Device(dev));
  ts::Tensor loss = chunk > 0 ? F::linear_cross_entropy(x, w, tt, -100, red, chunk)
                              : F::cross_entropy(F::linear(x, w), tt, std::nullopt, -100, red);
  auto g = ts::autograd::grad({loss * 0.75}, {x, w});
  return {loss, g[0], g[1]};
}

// V = 1003 fills no whole number of 16-byte vectors in any dtype, so the GPU pads the logits rows
// (Note [Padded logits rows]); V = 1000 does in every dtype, so it runs unpadded.
TEST(CudaFused, LinearCrossEntropyMatchesComposite) {
  TS_REQUIRE_GPU();
  const int64_t n = 300, c = 64;
  for (int64_t v : {1000, 1003}) {
    const ts::Tensor x = test_data({n, c}, ts::kFloat64, 41).reshape({n, c});
    const ts::Tensor w = test_data({v, c}, ts::kFloat64, 42).reshape({v, c}) * 0.125;
    ts::Tensor t = test_data({n}, ts::kInt64, 43, 0, v);
    t.narrow(0, 10, 20).fill_(-100);
    t.narrow(0, 40, 1).fill_(v - 1);  // the last class: next to the pad columns
    for (const char* red : {"mean", "sum"}) {
      for (int64_t chunk : {128, 300, 4096}) {
        for (ts::DType d : kDtypes) {
          SCOPED_TRACE(ts::detail::str_cat("V ", v, " ", red, " chunk ", chunk, " ", ts::dtype_name(d)));
          const CeOut g = lin_ce(chunk, "cuda", d, x, w, t, red);
          const CeOut ref = lin_ce(0, "cpu", ts::kFloat64, x.to(d), w.to(d), t, red);
          EXPECT_EQ(g.loss.dtype(), d == ts::kFloat64 ? ts::kFloat64 : ts::kFloat32);
          EXPECT_TRUE(near(g.loss, ref.loss, d));
          EXPECT_TRUE(near(g.dx, ref.dx, d, 2.0));
          EXPECT_TRUE(near(g.dw, ref.dw, d, 2.0));
          EXPECT_EQ(g.dw.sizes(), ts::Shape({v, c}));
        }
      }
    }
  }
}

// Note [Padded logits rows]: a target among the pad classes (V <= t < Vp) is out of bounds, as on the
// CPU, and raises at the next synchronization (Note [Deferred device checks]).
TEST(CudaFused, LinearCrossEntropyTargetInThePadRaises) {
  TS_REQUIRE_GPU();
  const int64_t n = 8, c = 16, v = 1003;
  const ts::Tensor x = test_data({n, c}, ts::kBFloat16, 44).reshape({n, c}).cuda();
  const ts::Tensor w = test_data({v, c}, ts::kBFloat16, 45).reshape({v, c}).cuda();
  ts::Tensor t = ts::zeros({n}, ts::TensorOptions(ts::kInt64, "cuda"));
  t.narrow(0, 3, 1).fill_(v);  // the first pad column (Vp = 1008 in bfloat16)
  try {
    (void)F::linear_cross_entropy(x, w, t);
    ts::cuda::synchronize();
    ADD_FAILURE() << "no IndexError";
  } catch (const ts::IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("Target 1003 is out of bounds"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ts::cuda::synchronize());
}

TEST(CudaFused, LinearCrossEntropyUnderAutocast) {
  TS_REQUIRE_GPU();
  const int64_t n = 200, c = 32, v = 500;
  ts::Tensor x = leaf(test_data({n, c}, ts::kFloat32, 44).reshape({n, c}).to("cuda"));
  ts::Tensor w = leaf((test_data({v, c}, ts::kFloat32, 45).reshape({v, c}) * 0.2).to("cuda"));
  ts::Tensor t = test_data({n}, ts::kInt64, 46, 0, v).to("cuda");
  ts::Tensor loss, ref;
  {
    ts::amp::autocast guard(ts::Device("cuda"), ts::kBFloat16);
    loss = F::linear_cross_entropy(x, w, t, -100, "mean", 64);
    ref = F::cross_entropy(F::linear(x, w), t);
  }
  EXPECT_EQ(loss.dtype(), ts::kFloat32);
  EXPECT_TRUE(all_close(loss.cpu(), ref.cpu(), {1e-2, 1e-3}));
  auto g = ts::autograd::grad({loss}, {x, w});
  auto gr = ts::autograd::grad({ref}, {x, w});
  EXPECT_EQ(g[1].dtype(), ts::kFloat32);
  EXPECT_TRUE(near(g[0], gr[0].cpu(), ts::kBFloat16, 2.0));
  EXPECT_TRUE(near(g[1], gr[1].cpu(), ts::kBFloat16, 2.0));
}

// ---- GPT-2 -------------------------------------------------------------------------------------------

TEST(CudaFused, Gpt2LossMatchesLogitsPath) {
  TS_REQUIRE_GPU();
  ts::manual_seed(0);
  ts::models::GPT2Config cfg;
  cfg.n_layer = 2;
  cfg.n_head = 2;
  cfg.n_embd = 64;
  cfg.n_positions = 32;
  cfg.vocab_size = 300;
  cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = 0.0;
  ts::models::GPT2 model(cfg);
  model.to(ts::Device("cuda"));
  ts::Tensor idx = test_data({2, 16}, ts::kInt64, 51, 0, 300).reshape({2, 16}).to("cuda");
  ts::Tensor tgt = test_data({2, 16}, ts::kInt64, 52, 0, 300).reshape({2, 16}).to("cuda");
  ts::Tensor fused = model.loss(idx, tgt, /*chunk_rows=*/10);
  fused.backward();
  ts::Tensor g_fused = model.transformer.wte.weight.grad().clone();
  model.zero_grad();
  auto [logits, loss] = model.forward(idx, tgt);
  loss.backward();
  EXPECT_TRUE(all_close(fused.cpu(), loss.cpu(), {1e-5, 1e-5}));
  EXPECT_TRUE(all_close(g_fused.cpu(), model.transformer.wte.weight.grad().cpu(), {1e-4, 1e-5}));
}

}  // namespace
