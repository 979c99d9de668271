// native_batch_norm / native_batch_norm_backward (src/ops/batch_norm_ops.h) and the functional
// batch_norm built on them, against a float64 reference computed here on the host: forward in training
// (statistics, running-stat updates) and evaluation, backward in both, on 2-D to 5-D inputs, row-major
// and channels-last, every float dtype (16-bit inputs with float32 parameters), with and without
// weight / bias / running statistics; gradcheck and gradgradcheck in float64; errors.
#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "kernels/cpu/onednn/onednn.h"
#include "nn/batch_norm_ref.h"
#include "ops/batch_norm_ops.h"
#include "tessera/autograd.h"
#include "tessera/nn.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using ts::Tensor;

namespace {

using batch_norm_ref::f64;
using batch_norm_ref::Ref;
using batch_norm_ref::reference;
using batch_norm_ref::values;

ts::DType param_dtype(ts::DType d) { return d == ts::kFloat16 || d == ts::kBFloat16 ? ts::kFloat32 : d; }

ts::testing::Tolerance tol(ts::DType d) {
  switch (d) {
    case ts::kFloat64: return {1e-10, 1e-10};
    case ts::kFloat32: return {1e-5, 2e-5};
    case ts::kFloat16: return {2e-3, 2e-3};
    default: return {1.6e-2, 1e-2};
  }
}

struct Case {
  ts::Shape sizes;
  bool channels_last;
};
std::vector<Case> cases() {
  return {{{6, 3}, false}, {{4, 3, 5}, false}, {{2, 3, 4, 5}, false}, {{2, 3, 4, 5}, true},
          {{3, 20, 2, 3}, true}, {{2, 3, 2, 3, 2}, false}, {{2, 1, 7}, false}};
}

Tensor make_x(const Case& k, ts::DType d, uint64_t seed, double offset = 0) {
  Tensor x = ts::testing::test_data(k.sizes, ts::kFloat64, seed) * 2.0 + offset;
  x = x.to(d);
  return k.channels_last ? x.contiguous(ts::MemoryFormat::ChannelsLast) : x;
}

}  // namespace

TEST(BatchNormOp, ForwardTrainingMatchesFloat64Reference) {
  for (ts::DType d : ts::testing::float_dtypes())
    for (const Case& k : cases())
      for (bool affine : {true, false})
        for (bool stats : {true, false}) {
          SCOPED_TRACE(std::string(ts::dtype_name(d)) + " " + ::testing::PrintToString(k.sizes) +
                       (k.channels_last ? " channels_last" : "") + (affine ? " affine" : "") +
                       (stats ? " running" : ""));
          const int64_t c = k.sizes[1];
          const ts::DType p = param_dtype(d);
          Tensor x = make_x(k, d, 3, d == ts::kFloat64 || d == ts::kFloat32 ? 50.0 : 0.0);
          Tensor w = affine ? ts::testing::test_data({c}, p, 5) : Tensor();
          Tensor b = affine ? ts::testing::test_data({c}, p, 6) : Tensor();
          Tensor rm = stats ? ts::testing::test_data({c}, p, 7) : Tensor();
          Tensor rv = stats ? ts::testing::test_data({c}, p, 8).abs() + 0.5 : Tensor();
          Ref r = reference(x, w, b, rm, rv, true, 0.1, 1e-5);
          auto [y, sm, si] = ts::native_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
          EXPECT_EQ(y.dtype(), d);
          EXPECT_EQ(y.sizes(), x.sizes());
          EXPECT_EQ(sm.dtype(), p);
          EXPECT_EQ(si.dtype(), p);
          if (k.channels_last) {
            EXPECT_TRUE(y.is_contiguous(ts::MemoryFormat::ChannelsLast));
            EXPECT_FALSE(y.is_contiguous());
          } else {
            EXPECT_TRUE(y.is_contiguous());
          }
          EXPECT_TRUE(ts::testing::all_close(y, f64(r.y, x.sizes()), tol(d)));
          const ts::testing::Tolerance stat_tol = d == ts::kFloat64 ? tol(d) : ts::testing::Tolerance{1e-5, 1e-5};
          EXPECT_TRUE(ts::testing::all_close(sm, f64(r.mean, {c}), stat_tol));
          EXPECT_TRUE(ts::testing::all_close(si, f64(r.invstd, {c}), stat_tol));
          if (stats) {
            EXPECT_TRUE(ts::testing::all_close(rm, f64(r.rm, {c}), stat_tol));
            EXPECT_TRUE(ts::testing::all_close(rv, f64(r.rv, {c}), stat_tol));
          }
        }
}

TEST(BatchNormOp, ForwardInferenceMatchesFloat64Reference) {
  for (ts::DType d : ts::testing::float_dtypes())
    for (const Case& k : cases())
      for (bool affine : {true, false}) {
        SCOPED_TRACE(std::string(ts::dtype_name(d)) + " " + ::testing::PrintToString(k.sizes) +
                     (k.channels_last ? " channels_last" : "") + (affine ? " affine" : ""));
        const int64_t c = k.sizes[1];
        const ts::DType p = param_dtype(d);
        Tensor x = make_x(k, d, 4);
        Tensor w = affine ? ts::testing::test_data({c}, p, 5) : Tensor();
        Tensor b = affine ? ts::testing::test_data({c}, p, 6) : Tensor();
        Tensor rm = ts::testing::test_data({c}, p, 7);
        Tensor rv = ts::testing::test_data({c}, p, 8).abs() + 0.5;
        Tensor rm0 = rm.clone(), rv0 = rv.clone();
        Ref r = reference(x, w, b, rm, rv, false, 0.1, 1e-3);
        auto [y, sm, si] = ts::native_batch_norm(x, w, b, rm, rv, false, 0.1, 1e-3);
        EXPECT_EQ(sm.numel(), 0);
        EXPECT_EQ(si.numel(), 0);
        EXPECT_EQ(y.is_contiguous(ts::MemoryFormat::ChannelsLast) && !y.is_contiguous(), k.channels_last);
        EXPECT_TRUE(ts::testing::all_close(y, f64(r.y, x.sizes()), tol(d)));
        EXPECT_TRUE(ts::equal(rm, rm0));  // evaluation leaves the statistics alone
        EXPECT_TRUE(ts::equal(rv, rv0));
      }
}

TEST(BatchNormOp, BackwardMatchesFloat64Reference) {
  for (ts::DType d : ts::testing::float_dtypes())
    for (const Case& k : cases())
      for (bool training : {true, false})
        for (bool affine : {true, false}) {
          SCOPED_TRACE(std::string(ts::dtype_name(d)) + " " + ::testing::PrintToString(k.sizes) +
                       (k.channels_last ? " channels_last" : "") + (training ? " training" : " eval") +
                       (affine ? " affine" : ""));
          const int64_t c = k.sizes[1];
          const ts::DType p = param_dtype(d);
          Tensor x = make_x(k, d, 9);
          Tensor g = ts::testing::test_data(k.sizes, d, 10);  // row-major while x may be channels-last
          Tensor w = affine ? ts::testing::test_data({c}, p, 5) : Tensor();
          Tensor rm = ts::testing::test_data({c}, p, 7);
          Tensor rv = ts::testing::test_data({c}, p, 8).abs() + 0.5;
          Ref r = reference(x, w, Tensor(), rm, rv, training, 0.1, 1e-5, g);
          Tensor sm, si;
          if (training) std::tie(std::ignore, sm, si) = ts::native_batch_norm(x, w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
          auto [dx, dw, db] = ts::native_batch_norm_backward(g, x, w, rm, rv, sm, si, training, 1e-5, {true, true, true});
          EXPECT_EQ(dx.dtype(), d);
          EXPECT_EQ(dw.dtype(), p);
          EXPECT_EQ(dx.is_contiguous(ts::MemoryFormat::ChannelsLast) && !dx.is_contiguous(), k.channels_last);
          // dx of a training step is a difference of terms of the size of g: an absolute tolerance.
          ts::testing::Tolerance t = tol(d);
          t.atol = std::max(t.atol, t.rtol);
          EXPECT_TRUE(ts::testing::all_close(dx, f64(r.dx, x.sizes()), t));
          const double m = double(x.numel() / c);
          const ts::testing::Tolerance sum_tol = d == ts::kFloat64 ? tol(d) : ts::testing::Tolerance{1e-4, 1e-4 * m};
          EXPECT_TRUE(ts::testing::all_close(dw, f64(r.dw, {c}), sum_tol));
          EXPECT_TRUE(ts::testing::all_close(db, f64(r.db, {c}), sum_tol));
          // Only what the mask asks for.
          auto [dx2, dw2, db2] = ts::native_batch_norm_backward(g, x, w, rm, rv, sm, si, training, 1e-5, {false, true, false});
          EXPECT_FALSE(dx2.defined());
          EXPECT_FALSE(db2.defined());
          EXPECT_TRUE(ts::equal(dw2, dw));
        }
}

TEST(BatchNormOp, AutogradThroughFunctionalMatchesReference) {
  for (const Case& k : cases())
    for (bool training : {true, false}) {
      SCOPED_TRACE(::testing::PrintToString(k.sizes) + (k.channels_last ? " channels_last" : "") +
                   (training ? " training" : " eval"));
      const int64_t c = k.sizes[1];
      Tensor x = make_x(k, ts::kFloat64, 11).requires_grad_();
      Tensor w = ts::testing::test_data({c}, ts::kFloat64, 12).requires_grad_();
      Tensor b = ts::testing::test_data({c}, ts::kFloat64, 13).requires_grad_();
      Tensor rm = ts::testing::test_data({c}, ts::kFloat64, 7);
      Tensor rv = ts::testing::test_data({c}, ts::kFloat64, 8).abs() + 0.5;
      Tensor g = ts::testing::test_data(k.sizes, ts::kFloat64, 14);
      Ref r = reference(x.detach(), w.detach(), b.detach(), rm, rv, training, 0.1, 1e-5, g);
      Tensor y = F::batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
      EXPECT_TRUE(ts::testing::all_close(y, f64(r.y, x.sizes()), tol(ts::kFloat64)));
      if (training) {
        EXPECT_TRUE(ts::testing::all_close(rm, f64(r.rm, {c}), tol(ts::kFloat64)));
      }
      y.backward(g);
      EXPECT_TRUE(ts::testing::all_close(x.grad(), f64(r.dx, x.sizes()), {1e-9, 1e-9}));
      EXPECT_TRUE(ts::testing::all_close(w.grad(), f64(r.dw, {c}), {1e-9, 1e-9}));
      EXPECT_TRUE(ts::testing::all_close(b.grad(), f64(r.db, {c}), {1e-9, 1e-9}));
    }
}

TEST(BatchNormOp, GradcheckAndGradgradcheckFloat64) {
  for (const Case& k : {Case{{4, 3}, false}, Case{{3, 2, 4}, false}, Case{{2, 3, 2, 3}, true}, Case{{2, 2, 2, 1, 2}, false}})
    for (bool training : {true, false})
      for (bool affine : {true, false}) {
        SCOPED_TRACE(::testing::PrintToString(k.sizes) + (k.channels_last ? " channels_last" : "") +
                     (training ? " training" : " eval") + (affine ? " affine" : ""));
        const int64_t c = k.sizes[1];
        Tensor x = make_x(k, ts::kFloat64, 15).requires_grad_();
        Tensor w = ts::testing::test_data({c}, ts::kFloat64, 16).requires_grad_();
        Tensor b = ts::testing::test_data({c}, ts::kFloat64, 17).requires_grad_();
        Tensor rm = ts::testing::test_data({c}, ts::kFloat64, 7);
        Tensor rv = ts::testing::test_data({c}, ts::kFloat64, 8).abs() + 0.5;
        ts::autograd::GradcheckFn fn = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
          Tensor rmc = rm.clone(), rvc = rv.clone();  // every evaluation from the same running stats
          if (!affine) return {F::batch_norm(in[0], rmc, rvc, std::nullopt, std::nullopt, training, 0.1, 1e-5)};
          return {F::batch_norm(in[0], rmc, rvc, in[1], in[2], training, 0.1, 1e-5)};
        };
        std::vector<Tensor> inputs = affine ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x};
        std::string report;
        EXPECT_TRUE(ts::autograd::gradcheck(fn, inputs, {}, &report)) << report;
        EXPECT_TRUE(ts::autograd::gradgradcheck(fn, inputs, {}, &report)) << report;
      }
}

TEST(BatchNormOp, SixteenBitInputWithFloat32OrSixteenBitParameters) {
  for (ts::DType d : {ts::kBFloat16, ts::kFloat16}) {
    Case k{{4, 3, 3, 2}, true};
    Tensor x = make_x(k, d, 18);
    Tensor w32 = ts::testing::test_data({3}, ts::kFloat32, 19), b32 = ts::testing::test_data({3}, ts::kFloat32, 20);
    Tensor rm32 = ts::zeros({3}), rv32 = ts::ones({3});
    Tensor rm16 = ts::zeros({3}, d), rv16 = ts::ones({3}, d);
    Tensor y32 = F::batch_norm(x, rm32, rv32, w32, b32, true, 0.1, 1e-5);
    // Parameters and statistics of x's dtype are converted by the functional; statistics written back.
    Tensor y16 = F::batch_norm(x, rm16, rv16, w32.to(d), b32.to(d), true, 0.1, 1e-5);
    EXPECT_EQ(y32.dtype(), d);
    EXPECT_TRUE(y32.is_contiguous(ts::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(ts::testing::all_close(y16, y32, tol(d)));
    EXPECT_EQ(rm16.dtype(), d);
    EXPECT_TRUE(ts::testing::all_close(rm16, rm32, tol(d)));
    EXPECT_TRUE(ts::testing::all_close(rv16, rv32, tol(d)));
    EXPECT_FALSE(ts::equal(rv32, ts::ones({3})));
    // The native op itself wants float32 parameters for a 16-bit input.
    EXPECT_THROW(ts::native_batch_norm(x, w32.to(d), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5), ts::DTypeError);
  }
}

TEST(BatchNormOp, ResultsDoNotDependOnThreadCount) {
  // The native kernel's property: oneDNN's statistics, summed in float32, may differ in the last bits
  // between thread counts and between layouts (Note [oneDNN where it wins] in
  // kernels/cpu/onednn/onednn.h).
  ts::cpu::onednn::ScopedOnednn native(false);
  const int prev = ts::get_num_threads();
  for (const Case& k : {Case{{8, 37, 16, 16}, true}, Case{{8, 37, 256}, false}}) {
    Tensor x = make_x(k, ts::kFloat32, 21, 3.0), g = ts::testing::test_data(k.sizes, ts::kFloat32, 22);
    Tensor w = ts::testing::test_data({37}, ts::kFloat32, 23);
    std::vector<Tensor> first;
    for (int t : {1, 2, 3}) {
      ts::set_num_threads(t);
      auto [y, sm, si] = ts::native_batch_norm(x, w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
      auto [dx, dw, db] = ts::native_batch_norm_backward(g, x, w, Tensor(), Tensor(), sm, si, true, 1e-5, {true, true, true});
      std::vector<Tensor> now{y, sm, si, dx, dw, db};
      if (first.empty()) first = now;
      for (size_t i = 0; i < now.size(); ++i) EXPECT_TRUE(ts::equal(now[i], first[i])) << "threads " << t << " result " << i;
    }
  }
  ts::set_num_threads(prev);
  // Both layouts reduce in the same order: identical statistics.
  Tensor x = make_x({{4, 5, 3, 3}, false}, ts::kFloat32, 24, 7.0);
  auto [y1, m1, s1] = ts::native_batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  auto [y2, m2, s2] = ts::native_batch_norm(x.contiguous(ts::MemoryFormat::ChannelsLast), Tensor(), Tensor(), Tensor(),
                                            Tensor(), true, 0.1, 1e-5);
  EXPECT_TRUE(ts::equal(m1, m2));
  EXPECT_TRUE(ts::equal(s1, s2));
  EXPECT_TRUE(ts::equal(y1, y2));
}

TEST(BatchNormOp, StridedInputsAndRunningStats) {
  // A transposed (neither row-major nor channels-last) input and strided running statistics.
  Tensor base = ts::testing::test_data({5, 4, 3}, ts::kFloat64, 25);
  Tensor x = base.transpose(0, 2).transpose(1, 2);  // (3, 5, 4)... channels = 5
  Tensor stats = ts::stack({ts::zeros({5}, ts::kFloat64), ts::ones({5}, ts::kFloat64)}, 1);  // (5, 2)
  Tensor rm = stats.select(1, 0), rv = stats.select(1, 1);
  ASSERT_FALSE(rm.is_contiguous());
  Ref r = reference(x, Tensor(), Tensor(), rm, rv, true, 0.3, 1e-5);
  auto [y, sm, si] = ts::native_batch_norm(x, Tensor(), Tensor(), rm, rv, true, 0.3, 1e-5);
  EXPECT_TRUE(ts::testing::all_close(y, f64(r.y, x.sizes()), tol(ts::kFloat64)));
  EXPECT_TRUE(ts::testing::all_close(stats.select(1, 0), f64(r.rm, {5}), tol(ts::kFloat64)));
  EXPECT_TRUE(ts::testing::all_close(stats.select(1, 1), f64(r.rv, {5}), tol(ts::kFloat64)));
}

TEST(BatchNormOp, EmptyBatch) {
  Tensor x = ts::zeros({0, 3, 4});
  Tensor rm = ts::zeros({3}), rv = ts::ones({3});
  auto [y, sm, si] = ts::native_batch_norm(x, Tensor(), Tensor(), rm, rv, false, 0.1, 1e-5);
  EXPECT_EQ(y.sizes(), x.sizes());
  auto [dx, dw, db] = ts::native_batch_norm_backward(x, x, Tensor(), rm, rv, Tensor(), Tensor(), false, 1e-5, {true, true, true});
  EXPECT_EQ(dx.sizes(), x.sizes());
  EXPECT_TRUE(ts::equal(dw, ts::zeros({3})));
  EXPECT_TRUE(ts::equal(db, ts::zeros({3})));
  EXPECT_THROW(F::batch_norm(x, rm, rv, std::nullopt, std::nullopt, true, 0.1, 1e-5), ts::ValueError);
}

TEST(BatchNormOp, Errors) {
  Tensor x = ts::randn({4, 3, 2});
  Tensor c3 = ts::ones({3});
  EXPECT_THROW(ts::native_batch_norm(ts::ones({4}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5), ts::ShapeError);
  EXPECT_THROW(ts::native_batch_norm(ts::ones({2, 2, 2, 2, 2, 2}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5),
               ts::ShapeError);
  EXPECT_THROW(ts::native_batch_norm(ts::ones({4, 3}, ts::kInt64), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5),
               ts::DTypeError);
  EXPECT_THROW(ts::native_batch_norm(x, ts::ones({4}), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5), ts::ShapeError);
  EXPECT_THROW(ts::native_batch_norm(x, ts::ones({3}, ts::kFloat64), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5),
               ts::DTypeError);
  EXPECT_THROW(ts::native_batch_norm(x, c3, c3, c3, Tensor(), true, 0.1, 1e-5), ts::ValueError);
  EXPECT_THROW(ts::native_batch_norm(x, c3, c3, Tensor(), Tensor(), false, 0.1, 1e-5), ts::ValueError);
  EXPECT_THROW(ts::native_batch_norm(x, c3, c3, Tensor(), Tensor(), true, 0.1, -1.0), ts::ValueError);
  EXPECT_THROW(ts::native_batch_norm_backward(ts::ones({4, 3}), x, c3, Tensor(), Tensor(), c3, c3, true, 1e-5, {true, true, true}),
               ts::ShapeError);
  EXPECT_THROW(ts::native_batch_norm_backward(x, x, c3, Tensor(), Tensor(), Tensor(), Tensor(), true, 1e-5, {true, true, true}),
               ts::ValueError);
  EXPECT_THROW(ts::native_batch_norm_backward(x, x, c3, Tensor(), Tensor(), Tensor(), Tensor(), false, 1e-5, {true, true, true}),
               ts::ValueError);
  try {
    ts::native_batch_norm(x, ts::ones({5}), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
    FAIL() << "expected ShapeError";
  } catch (const ts::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("native_batch_norm: expected weight of shape [3]"), std::string::npos) << e.what();
  }
  // The functional keeps its own checks and messages.
  try {
    F::batch_norm(ts::ones({1, 3}), Tensor(), Tensor(), std::nullopt, std::nullopt, true, 0.1, 1e-5);
    FAIL() << "expected ValueError";
  } catch (const ts::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Expected more than 1 value per channel when training"), std::string::npos);
  }
  EXPECT_THROW(F::batch_norm(ts::ones({4}), Tensor(), Tensor(), std::nullopt, std::nullopt, true, 0.1, 1e-5), ts::ShapeError);
}

TEST(BatchNormOp, FunctionalTakesMoreThanFiveDims) {
  Tensor x = ts::testing::test_data({2, 3, 2, 1, 2, 2}, ts::kFloat64, 26);
  Tensor rm = ts::zeros({3}, ts::kFloat64), rv = ts::ones({3}, ts::kFloat64);
  Tensor y = F::batch_norm(x, rm, rv, std::nullopt, std::nullopt, true, 0.1, 1e-5);
  Ref r = reference(x, Tensor(), Tensor(), ts::zeros({3}, ts::kFloat64), ts::ones({3}, ts::kFloat64), true, 0.1, 1e-5);
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_TRUE(ts::testing::all_close(y, f64(r.y, x.sizes()), tol(ts::kFloat64)));
  EXPECT_TRUE(ts::testing::all_close(rv, f64(r.rv, {3}), tol(ts::kFloat64)));
}
