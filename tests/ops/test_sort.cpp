// sort, argsort, topk and unique against host references computed with std::stable_sort over
// tolist<double>() values (NaN largest, ties in input order), in every dtype, on contiguous /
// transposed / sliced-with-step inputs, along every dim, with ties, NaN, zero-size and 0-dim inputs,
// meta shapes and errors.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

// NaN-largest orders on doubles.
bool asc(double a, double b) { return a < b || (std::isnan(b) && !std::isnan(a)); }
bool desc(double a, double b) { return a > b || (std::isnan(a) && !std::isnan(b)); }

// Reference sort of `x` along `dim`: the stable permutation of each row. Returns (values, indices)
// as float64 / int64 host tensors of x's shape; `k` >= 0 keeps only the first k of each row.
std::pair<ts::Tensor, ts::Tensor> ref_sort(const ts::Tensor& x, int64_t dim, bool descending, int64_t k = -1) {
  const ts::Tensor xc = x.dim() == 0 ? x.reshape({1}) : x;
  const int64_t d = dim < 0 ? dim + xc.dim() : dim;
  // Move dim last so that rows are contiguous in the host copy.
  ts::Tensor moved = xc.movedim(d, -1).contiguous();
  std::vector<double> v = moved.tolist<double>();
  const int64_t n = moved.sizes().back(), rows = n ? moved.numel() / n : 0;
  const int64_t keep = k < 0 ? n : k;
  std::vector<double> ov;
  std::vector<int64_t> oi;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> perm(n);
    std::iota(perm.begin(), perm.end(), int64_t{0});
    const double* row = v.data() + r * n;
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int64_t a, int64_t b) { return descending ? desc(row[a], row[b]) : asc(row[a], row[b]); });
    for (int64_t j = 0; j < keep; ++j) {
      ov.push_back(row[perm[j]]);
      oi.push_back(perm[j]);
    }
  }
  ts::Shape ms = moved.sizes();
  ms.back() = keep;
  ts::Tensor tv = ts::tensor(ov, {static_cast<int64_t>(ov.size())}, ts::kFloat64).reshape(ms).movedim(-1, d);
  ts::Tensor ti = ts::tensor(oi, {static_cast<int64_t>(oi.size())}).reshape(ms).movedim(-1, d);
  if (x.dim() == 0) return {tv.reshape({}), ti.reshape({})};
  return {tv, ti};
}

::testing::AssertionResult exact(const ts::Tensor& actual, const ts::Tensor& expected) {
  return all_close(actual, expected, Tolerance{0, 0});
}

// Integers from a small range (many ties) for integral dtypes; floats rounded to halves (ties too).
ts::Tensor tied_data(const ts::Shape& s, ts::DType dt, uint64_t seed) {
  if (dt == ts::kBool) return test_data(s, dt, seed);
  if (!ts::is_floating_point(dt)) return test_data(s, dt, seed, -3, 3);
  std::vector<double> v = test_data(s, ts::kFloat64, seed).tolist<double>();
  for (double& e : v) e = std::round(e * 2) / 2;
  return ts::tensor(v, {static_cast<int64_t>(v.size())}, ts::kFloat64).reshape(s).to(dt);
}

ts::Tensor with_nans(ts::DType dt) {
  const double nan = std::nan(""), inf = INFINITY;
  return ts::tensor({3.0, nan, -1.0, inf, 0.0, nan, -inf, 3.0, -0.0, 2.5, nan, -1.0}, dt).view({3, 4});
}

}  // namespace

// ---- sort / argsort --------------------------------------------------------------------------------
TEST(Sort, AllDtypesLayoutsDimsWithTies) {
  for (ts::DType dt : all_dtypes()) {
    for (const auto& lay : layouts()) {
      ts::Tensor x = lay.apply(tied_data({3, 4, 6}, dt, 21));
      for (int64_t dim : {0, 1, 2, -1, -2}) {
        for (bool descending : {false, true}) {
          for (bool stable : {false, true}) {
            auto [v, i] = ts::sort(x, dim, descending, stable);
            auto [rv, ri] = ref_sort(x, dim, descending);
            EXPECT_EQ(v.dtype(), dt);
            EXPECT_EQ(i.dtype(), ts::kInt64);
            EXPECT_TRUE(exact(v, rv)) << ts::dtype_name(dt) << " " << lay.name << " dim " << dim << " desc " << descending;
            EXPECT_TRUE(exact(i, ri)) << ts::dtype_name(dt) << " " << lay.name << " dim " << dim << " desc " << descending;
          }
        }
        EXPECT_TRUE(exact(x.argsort(dim, true), ref_sort(x, dim, true).second));
      }
    }
  }
}

TEST(Sort, NaNIsLargest) {
  for (ts::DType dt : float_dtypes()) {
    ts::Tensor x = with_nans(dt);
    for (int64_t dim : {0, 1}) {
      for (bool descending : {false, true}) {
        auto [v, i] = x.sort(dim, descending);
        auto [rv, ri] = ref_sort(x, dim, descending);
        EXPECT_TRUE(exact(v, rv)) << ts::dtype_name(dt) << " dim " << dim << " desc " << descending;
        EXPECT_TRUE(exact(i, ri)) << ts::dtype_name(dt) << " dim " << dim << " desc " << descending;
      }
    }
  }
  // 1-D: NaNs after +inf ascending, before it descending.
  ts::Tensor x = ts::tensor({1.0, std::nan(""), -INFINITY, INFINITY}, ts::kFloat64);
  EXPECT_EQ(std::get<1>(ts::sort(x)).tolist<int64_t>(), (std::vector<int64_t>{2, 0, 3, 1}));
  EXPECT_EQ(std::get<1>(ts::sort(x, 0, true)).tolist<int64_t>(), (std::vector<int64_t>{1, 3, 0, 2}));
}

TEST(Sort, LongRowAndManyRows) {
  // A row long enough for the parallel path, and many short rows for the row-parallel one.
  ts::Tensor x = tied_data({200000}, ts::kFloat32, 22);
  auto [v, i] = ts::sort(x, 0, true);
  auto [rv, ri] = ref_sort(x, 0, true);
  EXPECT_TRUE(exact(v, rv));
  EXPECT_TRUE(exact(i, ri));
  ts::Tensor y = tied_data({5000, 17}, ts::kInt32, 23).t();
  auto [v2, i2] = ts::sort(y, 0);
  auto [rv2, ri2] = ref_sort(y, 0, false);
  EXPECT_TRUE(exact(v2, rv2));
  EXPECT_TRUE(exact(i2, ri2));
}

TEST(Sort, ZeroSizeScalarAndMeta) {
  auto [v0, i0] = ts::sort(ts::scalar_tensor(2.5), -1);
  EXPECT_EQ(v0.sizes(), (ts::Shape{}));
  EXPECT_EQ(v0.item<double>(), 2.5);
  EXPECT_EQ(i0.item<int64_t>(), 0);
  auto [ve, ie] = ts::sort(ts::zeros({3, 0}), 1);
  EXPECT_EQ(ve.sizes(), (ts::Shape{3, 0}));
  EXPECT_EQ(ie.dtype(), ts::kInt64);
  EXPECT_EQ(std::get<0>(ts::sort(ts::zeros({0, 4}), 1)).sizes(), (ts::Shape{0, 4}));
  auto [vm, im] = ts::sort(ts::empty({2, 5}, {ts::kFloat16, ts::Device::meta()}), 0);
  EXPECT_TRUE(vm.is_meta());
  EXPECT_EQ(vm.dtype(), ts::kFloat16);
  EXPECT_EQ(im.dtype(), ts::kInt64);
  EXPECT_EQ(im.sizes(), (ts::Shape{2, 5}));
}

TEST(Sort, Errors) {
  EXPECT_THROW(ts::sort(ts::zeros({2, 3}), 2), ts::IndexError);
  EXPECT_THROW(ts::sort(ts::zeros({2, 3}), -3), ts::IndexError);
  EXPECT_THROW(ts::argsort(ts::scalar_tensor(1.0), 1), ts::IndexError);
}

// ---- topk ----------------------------------------------------------------------------------------
TEST(Topk, LargestSmallestAllDtypesLayoutsDims) {
  for (ts::DType dt : all_dtypes()) {
    if (dt == ts::kBool) continue;  // not supported, as in PyTorch (Topk.Errors)
    for (const auto& lay : layouts()) {
      ts::Tensor x = lay.apply(tied_data({3, 5, 7}, dt, 24));
      for (int64_t dim : {0, 1, -1}) {
        const int64_t n = x.size(dim);
        for (int64_t k : {int64_t{0}, int64_t{1}, n / 2, n}) {
          for (bool largest : {true, false}) {
            // Ties go to the lower index, i.e. the first k of the stable sort.
            auto [v, i] = ts::topk(x, k, dim, largest);
            auto [rv, ri] = ref_sort(x, dim, largest, k);
            EXPECT_TRUE(exact(v, rv)) << ts::dtype_name(dt) << " " << lay.name << " dim " << dim << " k " << k;
            EXPECT_TRUE(exact(i, ri)) << ts::dtype_name(dt) << " " << lay.name << " dim " << dim << " k " << k;
          }
        }
      }
    }
  }
}

TEST(Topk, SmallKOfLongRows) {
  // k far below the row length takes the heap path; ties are plentiful in the rounded data.
  for (ts::DType dt : {ts::kFloat32, ts::kInt32, ts::kBFloat16}) {
    ts::Tensor x = tied_data({1000, 6}, dt, 26).t();
    for (int64_t k : {1, 5, 15, 16, 600}) {
      for (bool largest : {true, false}) {
        auto [v, i] = ts::topk(x, k, 1, largest);
        auto [rv, ri] = ref_sort(x, 1, largest, k);
        EXPECT_TRUE(exact(v, rv)) << ts::dtype_name(dt) << " k " << k << " largest " << largest;
        EXPECT_TRUE(exact(i, ri)) << ts::dtype_name(dt) << " k " << k << " largest " << largest;
      }
    }
  }
}

TEST(Topk, NaNZeroSizeScalarMeta) {
  for (ts::DType dt : float_dtypes()) {
    ts::Tensor x = with_nans(dt);
    for (int64_t k : {1, 3, 4}) {
      for (bool largest : {true, false}) {
        auto [v, i] = x.topk(k, 1, largest, false);
        auto [rv, ri] = ref_sort(x, 1, largest, k);
        EXPECT_TRUE(exact(v, rv)) << ts::dtype_name(dt) << " k " << k << " largest " << largest;
        EXPECT_TRUE(exact(i, ri)) << ts::dtype_name(dt) << " k " << k << " largest " << largest;
      }
    }
  }
  auto [v0, i0] = ts::topk(ts::scalar_tensor(7.0), 1);
  EXPECT_EQ(v0.sizes(), (ts::Shape{}));
  EXPECT_EQ(v0.item<double>(), 7.0);
  // k = 0 on a 0-dim input still gives the element back, as in PyTorch.
  auto [vk0, ik0] = ts::topk(ts::scalar_tensor(7.0), 0);
  EXPECT_EQ(vk0.sizes(), (ts::Shape{}));
  EXPECT_EQ(vk0.item<double>(), 7.0);
  EXPECT_EQ(ik0.item<int64_t>(), 0);
  EXPECT_EQ(std::get<0>(ts::topk(ts::zeros({0, 4}), 2)).sizes(), (ts::Shape{0, 2}));
  auto [vm, im] = ts::topk(ts::empty({4, 9}, ts::Device::meta()), 3, 1);
  EXPECT_TRUE(vm.is_meta());
  EXPECT_EQ(vm.sizes(), (ts::Shape{4, 3}));
  EXPECT_EQ(im.dtype(), ts::kInt64);
}

TEST(Topk, Errors) {
  try {
    ts::topk(ts::zeros({2, 3}), 4);
    ADD_FAILURE() << "expected IndexError";
  } catch (const ts::IndexError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("k (4)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("size of dimension 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 3]"), std::string::npos) << msg;
  }
  EXPECT_THROW(ts::topk(ts::zeros({2, 3}), -1), ts::IndexError);
  EXPECT_THROW(ts::topk(ts::zeros({2, 3}), 1, 2), ts::IndexError);
  EXPECT_THROW(ts::topk(ts::scalar_tensor(1.0), 2), ts::IndexError);
  EXPECT_THROW(ts::topk(ts::ones({3}, ts::kBool), 1), ts::DTypeError);
}

// ---- unique ----------------------------------------------------------------------------------------
namespace {

// Host unique over the flattened values: sorted distinct values (each NaN distinct), the group of
// every input element, and group sizes.
struct RefUnique {
  std::vector<double> values;
  std::vector<int64_t> inverse, counts;
};
RefUnique ref_unique(const std::vector<double>& v) {
  std::vector<int64_t> perm(v.size());
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return asc(v[a], v[b]); });
  RefUnique r;
  r.inverse.resize(v.size());
  for (size_t j = 0; j < perm.size(); ++j) {
    const double e = v[perm[j]];
    if (j == 0 || !(e == r.values.back())) {
      r.values.push_back(e);
      r.counts.push_back(0);
    }
    r.inverse[perm[j]] = static_cast<int64_t>(r.values.size()) - 1;
    r.counts.back()++;
  }
  return r;
}

}  // namespace

TEST(Unique, FlattenedWithInverseAndCounts) {
  for (ts::DType dt : all_dtypes()) {
    for (const auto& lay : layouts()) {
      ts::Tensor x = lay.apply(tied_data({4, 5}, dt, 25));
      RefUnique r = ref_unique(x.tolist<double>());
      auto [u, inv, cnt] = ts::unique(x, true, true, true);
      EXPECT_EQ(u.dtype(), dt);
      EXPECT_EQ(u.tolist<double>(), r.values) << ts::dtype_name(dt) << " " << lay.name;
      EXPECT_EQ(inv.sizes(), x.sizes());
      EXPECT_EQ(inv.tolist<int64_t>(), r.inverse) << ts::dtype_name(dt) << " " << lay.name;
      EXPECT_EQ(cnt.tolist<int64_t>(), r.counts) << ts::dtype_name(dt) << " " << lay.name;
      // Not asked: empty tensors; sorted=false still gives the values.
      auto [u2, inv2, cnt2] = ts::unique(x, false);
      EXPECT_EQ(u2.tolist<double>(), r.values);
      EXPECT_EQ(inv2.numel(), 0);
      EXPECT_EQ(cnt2.numel(), 0);
    }
  }
}

TEST(Unique, NaNZeroSizeScalarMeta) {
  for (ts::DType dt : float_dtypes()) {
    ts::Tensor x = with_nans(dt);
    RefUnique r = ref_unique(x.tolist<double>());
    auto [u, inv, cnt] = ts::unique(x, true, true, true);
    EXPECT_TRUE(all_close(u, ts::tensor(r.values, {}, ts::kFloat64), Tolerance{0, 0})) << ts::dtype_name(dt);
    EXPECT_EQ(inv.tolist<int64_t>(), r.inverse);
    EXPECT_EQ(cnt.tolist<int64_t>(), r.counts);
    EXPECT_EQ(u.numel(), 9);  // 6 numbers (3.0 and -1.0 twice; 0.0 == -0.0) and 3 distinct NaNs
  }
  auto [ue, ie, ce] = ts::unique(ts::zeros({0, 3}), true, true, true);
  EXPECT_EQ(ue.sizes(), (ts::Shape{0}));
  EXPECT_EQ(ie.sizes(), (ts::Shape{0, 3}));
  EXPECT_EQ(ce.sizes(), (ts::Shape{0}));
  auto [us, is, cs] = ts::unique(ts::scalar_tensor(4), true, true, true);
  EXPECT_EQ(us.tolist<int64_t>(), (std::vector<int64_t>{4}));
  EXPECT_EQ(is.sizes(), (ts::Shape{}));
  EXPECT_EQ(cs.tolist<int64_t>(), (std::vector<int64_t>{1}));
  try {
    ts::unique(ts::empty({3}, ts::Device::meta()));
    ADD_FAILURE() << "expected NotImplementedError";
  } catch (const ts::NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("unique"), std::string::npos) << e.what();
  }
}

TEST(Unique, AlongDim) {
  // Rows 0 and 2 are equal; columns 1 and 3 are equal.
  ts::Tensor x = ts::tensor(std::vector<int64_t>{1, 2, 0, 2, 0, 1, 1, 1, 1, 2, 0, 2}, {3, 4});
  auto [u0, inv0, cnt0] = ts::unique(x, true, true, true, 0);
  EXPECT_EQ(u0.sizes(), (ts::Shape{2, 4}));
  EXPECT_EQ(u0.tolist<int64_t>(), (std::vector<int64_t>{0, 1, 1, 1, 1, 2, 0, 2}));
  EXPECT_EQ(inv0.tolist<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(cnt0.tolist<int64_t>(), (std::vector<int64_t>{1, 2}));
  for (const auto& lay : layouts()) {
    auto [u1, inv1, cnt1] = ts::unique(lay.apply(x.to(ts::kFloat32)), true, true, true, -1);
    // Columns (1,0,1), (2,1,2), (0,1,0), (2,1,2) -> sorted (0,1,0), (1,0,1), (2,1,2).
    EXPECT_EQ(u1.sizes(), (ts::Shape{3, 3})) << lay.name;
    EXPECT_EQ(u1.tolist<double>(), (std::vector<double>{0, 1, 2, 1, 0, 1, 0, 1, 2})) << lay.name;
    EXPECT_EQ(inv1.tolist<int64_t>(), (std::vector<int64_t>{1, 2, 0, 2})) << lay.name;
    EXPECT_EQ(cnt1.tolist<int64_t>(), (std::vector<int64_t>{1, 1, 2})) << lay.name;
  }
  auto [ue, ie, ce] = ts::unique(ts::zeros({0, 3}), true, true, true, 0);
  EXPECT_EQ(ue.sizes(), (ts::Shape{0, 3}));
  EXPECT_THROW(ts::unique(x, true, false, false, 2), ts::IndexError);
  EXPECT_THROW(ts::unique(ts::scalar_tensor(3), true, false, false, 0), ts::IndexError);
  EXPECT_THROW(ts::unique(ts::zeros({2, 0}), true, false, false, 0), ts::ShapeError);
}
