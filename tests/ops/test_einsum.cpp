// einsum against a naive float64 evaluator written here (a loop over every combination of subscript
// values), on the equations a transformer uses and the corner cases of the notation: implicit and
// explicit output, batch dims, ellipsis broadcasting, transposes, traces and diagonals, sums, outer
// products, three operands; in every dtype, on transposed and sliced operands, zero-size and 0-dim
// operands, on the meta device; and the errors of malformed equations and mismatched operands.
#include <cmath>
#include <map>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

// Evaluates an einsum whose terms use letters only and an explicit "->" output, with every operand of
// its full (already broadcast) size. Returns float64.
ts::Tensor ref_einsum(const std::string& eq, const std::vector<ts::Tensor>& ops) {
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow), out = eq.substr(arrow + 2);
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::map<char, int64_t> size;
  std::vector<std::vector<double>> vals;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t d = 0; d < terms[i].size(); ++d) size[terms[i][d]] = ops[i].size(static_cast<int64_t>(d));
    vals.push_back(ops[i].tolist<double>());
  }
  std::vector<char> labels;
  for (auto& [c, s] : size) labels.push_back(c);
  ts::Shape out_shape;
  for (char c : out) out_shape.push_back(size[c]);
  std::vector<double> res(ts::numel_of(out_shape), 0.0);
  int64_t total = 1;
  for (char c : labels) total *= size[c];
  std::map<char, int64_t> idx;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t r = flat;
    for (auto it = labels.rbegin(); it != labels.rend(); ++it) {
      idx[*it] = r % size[*it];
      r /= size[*it];
    }
    double p = 1;
    for (size_t i = 0; i < ops.size(); ++i) {
      int64_t off = 0;
      for (char c : terms[i]) off = off * size[c] + idx[c];
      p *= vals[i][off];
    }
    int64_t o = 0;
    for (char c : out) o = o * size[c] + idx[c];
    res[o] += p;
  }
  return ts::tensor(res, {static_cast<int64_t>(res.size())}, ts::kFloat64).reshape(out_shape);
}

ts::Tensor data(const ts::Shape& s, ts::DType dt, uint64_t seed) {
  return is_floating_point(dt) ? test_data(s, dt, seed) : test_data(s, dt, seed, -3, 3);
}

// Sums of up to `k` products: DESIGN.md's tolerance scaled by sqrt(k), as in test_matmul.cpp (the
// rounding error of a k-term sum of random products grows like sqrt(k) relative to the terms).
Tolerance tol_k(ts::DType dt, int64_t k) {
  Tolerance t = tolerance_for(dt);
  const double f = std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  return {t.rtol * f, t.atol * f};
}

struct Case {
  std::string eq;       // the equation under test
  std::string ref_eq;   // the same with explicit letters and output, for ref_einsum
  std::vector<ts::Shape> shapes;
  ts::Shape out;
  int64_t k;            // terms per output element, for the tolerance
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"ij,jk->ik", "ij,jk->ik", {{3, 4}, {4, 5}}, {3, 5}, 4},
      {"ij,jk", "ij,jk->ik", {{3, 4}, {4, 5}}, {3, 5}, 4},
      {"bij,bjk->bik", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, {2, 3, 5}, 4},
      {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}, {2, 3, 4, 6}, 5},
      {"bhqk,bhkd->bhqd", "bhqk,bhkd->bhqd", {{2, 3, 4, 6}, {2, 3, 6, 5}}, {2, 3, 4, 5}, 6},
      {"bqhd,bkhd->bhqk", "bqhd,bkhd->bhqk", {{2, 4, 3, 5}, {2, 6, 3, 5}}, {2, 3, 4, 6}, 5},
      {"ij->ji", "ij->ji", {{3, 4}}, {4, 3}, 1},
      {"ii->i", "ii->i", {{4, 4}}, {4}, 1},
      {"ii", "ii->", {{4, 4}}, {}, 4},
      {"bii->bi", "bii->bi", {{2, 3, 3}}, {2, 3}, 1},
      {"ij->i", "ij->i", {{3, 5}}, {3}, 5},
      {"ij->j", "ij->j", {{3, 5}}, {5}, 3},
      {"ij->", "ij->", {{3, 5}}, {}, 15},
      {"i,j->ij", "i,j->ij", {{3}, {4}}, {3, 4}, 1},
      {"i,j", "i,j->ij", {{3}, {4}}, {3, 4}, 1},
      {"i,i->", "i,i->", {{6}, {6}}, {}, 6},
      {"i,i", "i,i->", {{6}, {6}}, {}, 6},
      {"ij,ij->ij", "ij,ij->ij", {{3, 4}, {3, 4}}, {3, 4}, 1},
      {"ij,ij->", "ij,ij->", {{3, 4}, {3, 4}}, {}, 12},
      {"ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}, {2, 5}, 12},
      {"abc,cd,de->abe", "abc,cd,de->abe", {{2, 3, 4}, {4, 5}, {5, 2}}, {2, 3, 2}, 20},
      {"ij,jk,k->i", "ij,jk,k->i", {{2, 3}, {3, 4}, {4}}, {2}, 12},
      {"ijk->kji", "ijk->kji", {{2, 3, 4}}, {4, 3, 2}, 1},
      {"ijk,ik->j", "ijk,ik->j", {{2, 3, 4}, {2, 4}}, {3}, 8},
      {"Ab,ba", "Ab,ba->Aa", {{2, 3}, {3, 4}}, {2, 4}, 3},
      {"...ij,...jk->...ik", "xyij,xyjk->xyik", {{2, 3, 4, 5}, {2, 3, 5, 6}}, {2, 3, 4, 6}, 5},
      {"...ij->...ji", "xij->xji", {{2, 3, 4}}, {2, 4, 3}, 1},
      {"...i->i", "xyi->i", {{2, 3, 4}}, {4}, 6},
      {"b...,b...->b", "bxy,bxy->b", {{2, 3, 4}, {2, 3, 4}}, {2}, 12},
      {"...ij,jk", "xij,jk->xik", {{2, 3, 4}, {4, 5}}, {2, 3, 5}, 4},
  };
  return c;
}

}  // namespace

TEST(Einsum, EquationsEveryDtype) {
  for (ts::DType dt : {ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64, ts::kInt64, ts::kInt32})
    for (const Case& c : cases()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.eq);
      std::vector<ts::Tensor> ops;
      for (size_t i = 0; i < c.shapes.size(); ++i) ops.push_back(data(c.shapes[i], dt, 10 + i));
      ts::Tensor r = ts::einsum(c.eq, ops);
      EXPECT_EQ(r.dtype(), dt);
      EXPECT_EQ(r.sizes(), c.out);
      EXPECT_TRUE(all_close(r, ref_einsum(c.ref_eq, ops), tol_k(dt, c.k)));
    }
}

TEST(Einsum, TransposedAndSlicedOperands) {
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kInt64})
    for (const Case& c : cases())
      for (const Layout& l : layouts()) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.eq + " " + l.name);
        std::vector<ts::Tensor> ops;
        for (size_t i = 0; i < c.shapes.size(); ++i) ops.push_back(l.apply(data(c.shapes[i], dt, 20 + i)));
        EXPECT_TRUE(all_close(ts::einsum(c.eq, ops), ref_einsum(c.ref_eq, ops), tol_k(dt, c.k)));
      }
}

TEST(Einsum, EllipsisBroadcastsBatchDims) {
  // (2, 1, 4, 5) x (3, 5, 6): the ellipsis dims broadcast to (2, 3).
  ts::Tensor a = data({2, 1, 4, 5}, ts::kFloat32, 30), b = data({3, 5, 6}, ts::kFloat32, 31);
  ts::Tensor r = ts::einsum("...ij,...jk->...ik", {a, b});
  EXPECT_EQ(r.sizes(), (ts::Shape{2, 3, 4, 6}));
  ts::Tensor want = ref_einsum("xyij,xyjk->xyik", {a.expand({2, 3, 4, 5}), b.expand({2, 3, 5, 6})});
  EXPECT_TRUE(all_close(r, want, tol_k(ts::kFloat32, 5)));
  // Size-1 label dims broadcast too, as in PyTorch.
  ts::Tensor c = data({1, 4}, ts::kFloat64, 32), d = data({3, 4}, ts::kFloat64, 33);
  EXPECT_TRUE(all_close(ts::einsum("ij,ij->ij", {c, d}), ref_einsum("ij,ij->ij", {c.expand({3, 4}), d})));
  // Implicit output puts the ellipsis first.
  EXPECT_EQ(ts::einsum("i...,i", {data({3, 2, 5}, ts::kFloat32, 34), data({3}, ts::kFloat32, 35)}).sizes(),
            (ts::Shape{2, 5}));
}

TEST(Einsum, ScalarOperandAndSpaces) {
  ts::Tensor s = ts::scalar_tensor(2.5, ts::kFloat64), m = data({2, 3}, ts::kFloat64, 36);
  ts::Tensor r = ts::einsum(",ij->ij", {s, m});
  std::vector<double> mv = m.tolist<double>(), rv = r.tolist<double>();
  ASSERT_EQ(rv.size(), mv.size());
  for (size_t i = 0; i < mv.size(); ++i) EXPECT_DOUBLE_EQ(rv[i], 2.5 * mv[i]);
  ts::Tensor p = ts::einsum(",->", {s, s});
  EXPECT_EQ(p.dim(), 0);
  EXPECT_DOUBLE_EQ(p.item<double>(), 6.25);
  EXPECT_DOUBLE_EQ(ts::einsum("->", {s}).item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(ts::einsum("...,...", {s, s}).item<double>(), 6.25);
  ts::Tensor v = data({4}, ts::kFloat64, 39);
  EXPECT_TRUE(all_close(ts::einsum("i,->i", {v, s}), ref_einsum("i,x->i", {v, s.reshape({1})})));
  ts::Tensor a = data({3, 4}, ts::kFloat64, 37), b = data({4, 2}, ts::kFloat64, 38);
  EXPECT_TRUE(all_close(ts::einsum(" ij , jk -> ik ", {a, b}), ref_einsum("ij,jk->ik", {a, b})));
}

TEST(Einsum, LargerAttentionShapes) {
  // Large enough for the threaded BLAS path and batch-parallel small GEMMs.
  ts::Tensor q = data({2, 4, 33, 16}, ts::kFloat32, 39), k = data({2, 4, 40, 16}, ts::kFloat32, 40);
  ts::Tensor s = ts::einsum("bhqd,bhkd->bhqk", {q, k});
  EXPECT_TRUE(all_close(s, ref_einsum("bhqd,bhkd->bhqk", {q, k}), tol_k(ts::kFloat32, 16)));
  ts::Tensor v = data({2, 4, 40, 16}, ts::kFloat32, 41);
  EXPECT_TRUE(all_close(ts::einsum("bhqk,bhkd->bhqd", {s, v}), ref_einsum("bhqk,bhkd->bhqd", {s, v}),
                        tol_k(ts::kFloat32, 40 * 16)));
}

TEST(Einsum, ZeroSize) {
  ts::Tensor r = ts::einsum("ij,jk->ik", {ts::zeros({2, 0}), ts::zeros({0, 3})});  // empty sum
  EXPECT_TRUE(all_close(r, ts::zeros({2, 3}, ts::kFloat64)));
  EXPECT_EQ(ts::einsum("ij,jk->ik", {ts::zeros({0, 4}), ts::zeros({4, 3})}).sizes(), (ts::Shape{0, 3}));
  EXPECT_TRUE(all_close(ts::einsum("ij->", {ts::zeros({0, 3})}), ts::zeros({}, ts::kFloat64)));
  EXPECT_EQ(ts::einsum("ij->j", {ts::zeros({3, 0})}).sizes(), (ts::Shape{0}));
  EXPECT_TRUE(all_close(ts::einsum("ij->j", {ts::ones({0, 3})}), ts::zeros({3}, ts::kFloat64)));
  EXPECT_EQ(ts::einsum("bij,bjk->bik", {ts::zeros({0, 2, 3}), ts::zeros({0, 3, 4})}).sizes(), (ts::Shape{0, 2, 4}));
}

TEST(Einsum, MetaShapes) {
  auto meta = [](ts::Shape s) { return ts::empty(s, ts::TensorOptions(ts::kFloat16, "meta")); };
  ts::Tensor r = ts::einsum("bhqd,bhkd->bhqk", {meta({2, 8, 16, 64}), meta({2, 8, 32, 64})});
  EXPECT_TRUE(r.is_meta());
  EXPECT_EQ(r.sizes(), (ts::Shape{2, 8, 16, 32}));
  EXPECT_EQ(r.dtype(), ts::kFloat16);
  EXPECT_EQ(ts::einsum("...ij,...jk", {meta({5, 1, 2, 3}), meta({4, 3, 6})}).sizes(), (ts::Shape{5, 4, 2, 6}));
  EXPECT_EQ(ts::einsum("ii->i", {meta({4, 4})}).sizes(), (ts::Shape{4}));
  EXPECT_EQ(ts::einsum("ij->", {meta({4, 5})}).sizes(), (ts::Shape{}));
  EXPECT_THROW(ts::einsum("ij,jk->ik", {meta({2, 3}), meta({4, 5})}), ts::ShapeError);
}

namespace {
// Expects `fn` to throw E with the equation quoted in the message.
template <class E, class F>
void expect_error_naming(const std::string& eq, F fn) {
  try {
    fn();
    ADD_FAILURE() << "expected an error for '" << eq << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(eq), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Einsum, MalformedEquationsRaiseValueError) {
  ts::Tensor m = ts::zeros({2, 3}), n = ts::zeros({3, 4});
  for (const std::string eq : {"ij,jk->ik", "ij,jk", "ij,,jk->ik"})
    expect_error_naming<ts::ValueError>(eq, [&] { ts::einsum(eq, {m}); });  // fewer operands
  expect_error_naming<ts::ValueError>("ij", [&] { ts::einsum("ij", {m, n}); });  // more operands
  expect_error_naming<ts::ValueError>("i$->i", [&] { ts::einsum("i$->i", {m}); });
  expect_error_naming<ts::ValueError>("i..j->i", [&] { ts::einsum("i..j->i", {m}); });
  expect_error_naming<ts::ValueError>("......->", [&] { ts::einsum("......->", {m}); });
  expect_error_naming<ts::ValueError>("ij->ik", [&] { ts::einsum("ij->ik", {m}); });  // k not an input
  expect_error_naming<ts::ValueError>("ij->ii", [&] { ts::einsum("ij->ii", {m}); });  // repeated output
  expect_error_naming<ts::ValueError>("ij->i->j", [&] { ts::einsum("ij->i->j", {m}); });
  expect_error_naming<ts::ValueError>("ij-i", [&] { ts::einsum("ij-i", {m}); });
  expect_error_naming<ts::ValueError>("i1", [&] { ts::einsum("i1", {m}); });
  EXPECT_THROW(ts::einsum("ij", {}), ts::ValueError);
}

TEST(Einsum, ShapeDTypeDeviceErrors) {
  expect_error_naming<ts::ShapeError>("ij,jk->ik", [] { ts::einsum("ij,jk->ik", {ts::zeros({2, 3}), ts::zeros({4, 5})}); });
  expect_error_naming<ts::ShapeError>("ij->i", [] { ts::einsum("ij->i", {ts::zeros({2, 3, 4})}); });
  expect_error_naming<ts::ShapeError>("ijk...->i", [] { ts::einsum("ijk...->i", {ts::zeros({2, 3})}); });
  expect_error_naming<ts::ShapeError>("ii->i", [] { ts::einsum("ii->i", {ts::zeros({2, 3})}); });
  expect_error_naming<ts::ShapeError>("...i,...i", [] { ts::einsum("...i,...i", {ts::zeros({2, 3}), ts::zeros({4, 3})}); });
  EXPECT_THROW(ts::einsum("ij,jk", {ts::zeros({2, 3}), ts::zeros({3, 4}, ts::kFloat64)}), ts::DTypeError);
  EXPECT_THROW(ts::einsum("ij,jk", {ts::ones({2, 3}, ts::kBool), ts::ones({3, 4}, ts::kBool)}), ts::DTypeError);
  EXPECT_THROW(ts::einsum("ij,jk", {ts::zeros({2, 3}), ts::empty({3, 4}, "meta")}), ts::DeviceError);
}
