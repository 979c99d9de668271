// index_select, gather, scatter, scatter_add, index_add, masked_fill, masked_select, nonzero,
// embedding, one_hot against host references computed from tolist<double>(), in several dtypes and
// layouts, with zero-size and 0-dim inputs, duplicate indices and the error classes each op raises.
#include <cmath>

#include "common/test_util.h"
#include "ops/index_ref.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

const std::vector<ts::DType> kDTypes = {ts::kFloat32, ts::kFloat16, ts::kBFloat16, ts::kFloat64,
                                        ts::kInt64,   ts::kInt32,   ts::kInt8,     ts::kUInt8, ts::kBool};


bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Host reference of index_select.
ts::Tensor ref_index_select(const ts::Tensor& x, int64_t d, const std::vector<int64_t>& idx) {
  std::vector<double> xv = x.tolist<double>();
  ts::Shape shape = x.sizes();
  shape[d] = static_cast<int64_t>(idx.size());
  std::vector<double> out(ts::numel_of(shape));
  for (int64_t r = 0; r < static_cast<int64_t>(out.size()); ++r) {
    auto c = unravel(r, shape);
    c[d] = idx[c[d]];
    out[r] = xv[ravel(c, x.sizes())];
  }
  return ref_tensor(out, shape);
}

// Host reference of gather.
ts::Tensor ref_gather(const ts::Tensor& x, int64_t d, const ts::Tensor& index) {
  std::vector<double> xv = x.tolist<double>();
  std::vector<int64_t> iv = index.tolist<int64_t>();
  std::vector<double> out(iv.size());
  for (int64_t r = 0; r < static_cast<int64_t>(out.size()); ++r) {
    auto c = unravel(r, index.sizes());
    c[d] = iv[r];
    out[r] = xv[ravel(c, x.sizes())];
  }
  return ref_tensor(out, index.sizes());
}

// Host reference of scatter / scatter_add: writes in row-major order of index (so along a line of
// `dim`, a later index position wins, which is the kernel's documented order).
ts::Tensor ref_scatter(const ts::Tensor& x, int64_t d, const ts::Tensor& index, const ts::Tensor& src, bool add) {
  std::vector<double> out = x.tolist<double>(), sv = src.tolist<double>();
  std::vector<int64_t> iv = index.tolist<int64_t>();
  for (int64_t r = 0; r < static_cast<int64_t>(iv.size()); ++r) {
    auto c = unravel(r, index.sizes());
    double v = sv[ravel(c, src.sizes())];
    c[d] = iv[r];
    double& o = out[ravel(c, x.sizes())];
    o = add ? o + v : v;
  }
  return ref_tensor(out, x.sizes()).to(x.dtype());
}

}  // namespace

// ---- index_select -------------------------------------------------------------------------------

TEST(IndexSelect, ValuesAllDTypesLayoutsDims) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts())
      for (int64_t d : {0, 1, 2, -1}) {
        ts::Tensor x = l.apply(test_data({3, 4, 5}, dt, 11));
        int64_t w = d < 0 ? d + 3 : d;
        std::vector<int64_t> iv = rand_ints(6, 0, x.size(w), 5 + w);  // duplicates included
        for (ts::DType it : {ts::kInt64, ts::kInt32}) {
          ts::Tensor idx = l.apply(int_tensor(iv, {6}, it));
          ts::Tensor out = ts::index_select(x, d, idx);
          EXPECT_TRUE(all_close(out, ref_index_select(x, w, iv))) << dtype_name(dt) << " " << l.name << " dim " << d;
          EXPECT_EQ(out.dtype(), dt);
        }
      }
}

TEST(IndexSelect, ZeroSizeScalarIndexAndZeroDimSelf) {
  ts::Tensor x = test_data({3, 4}, ts::kFloat32);
  ts::Tensor e = ts::index_select(x, 1, ts::empty({0}, ts::kInt64));
  EXPECT_EQ(e.sizes(), (ts::Shape{3, 0}));
  ts::Tensor s = ts::index_select(x, 0, int_tensor({2}));  // 0-dim index: a length-1 dim
  EXPECT_EQ(s.sizes(), (ts::Shape{1, 4}));
  EXPECT_TRUE(all_close(s, ref_index_select(x, 0, {2})));
  ts::Tensor z = ts::index_select(ts::zeros({0, 4}), 1, int_tensor({3, 1}, {2}));
  EXPECT_EQ(z.sizes(), (ts::Shape{0, 2}));
  ts::Tensor sc = ts::scalar_tensor(2.5);
  ts::Tensor r = ts::index_select(sc, 0, int_tensor({0}, {1}));
  EXPECT_EQ(r.dim(), 0);
  EXPECT_EQ(r.item<double>(), 2.5);
  EXPECT_TRUE(all_close(x.index_select(-1, int_tensor({3, 0}, {2})), ref_index_select(x, 1, {3, 0})));
}

TEST(IndexSelect, Errors) {
  ts::Tensor x = test_data({3, 4}, ts::kFloat32);
  std::string m = message_of<ts::IndexError>([&] { ts::index_select(x, 0, int_tensor({0, 5}, {2})); });
  EXPECT_TRUE(contains(m, "index_select") && contains(m, "index 5 is out of bounds for dimension 0 with size 3")) << m;
  // PyTorch's CPU index_select does not wrap negative indices.
  EXPECT_THROW(ts::index_select(x, 0, int_tensor({-1}, {1})), ts::IndexError);
  EXPECT_THROW(ts::index_select(x, 2, int_tensor({0}, {1})), ts::IndexError);
  EXPECT_THROW(ts::index_select(x, 0, ts::tensor({0.0})), ts::DTypeError);
  EXPECT_THROW(ts::index_select(x, 0, ts::zeros({2}, ts::kBool)), ts::DTypeError);
  EXPECT_THROW(ts::index_select(x, 0, ts::zeros({2, 2}, ts::kInt64)), ts::ShapeError);
  EXPECT_THROW(ts::index_select(x, 0, ts::zeros({2}, {ts::kInt64, "meta"})), ts::DeviceError);
  EXPECT_THROW(ts::index_select(ts::scalar_tensor(1.0), 0, int_tensor({0, 0}, {2})), ts::IndexError);
}

TEST(IndexSelect, MetaComputesShape) {
  ts::Tensor x = ts::empty({3, 4}, {ts::kFloat16, "meta"});
  ts::Tensor out = ts::index_select(x, 1, ts::empty({7}, {ts::kInt64, "meta"}));
  EXPECT_TRUE(out.is_meta());
  EXPECT_EQ(out.sizes(), (ts::Shape{3, 7}));
  EXPECT_EQ(out.dtype(), ts::kFloat16);
}

// ---- gather -------------------------------------------------------------------------------------

TEST(Gather, ValuesAllDTypesLayoutsDims) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts())
      for (int64_t d : {0, 1, 2}) {
        ts::Tensor x = l.apply(test_data({3, 4, 5}, dt, 13));
        ts::Shape is = {2, 3, 4};
        is[d] = 7;  // longer than x along dim is fine
        ts::Tensor index = l.apply(int_tensor(rand_ints(ts::numel_of(is), 0, x.size(d), 3 + d), is));
        ts::Tensor out = ts::gather(x, d, index);
        EXPECT_TRUE(all_close(out, ref_gather(x, d, index))) << dtype_name(dt) << " " << l.name << " dim " << d;
        EXPECT_EQ(out.sizes(), is);
      }
}

TEST(Gather, LargeParallelZeroSizeAndZeroDim) {
  ts::Tensor x = test_data({64, 1000}, ts::kFloat32, 4);
  ts::Tensor index = int_tensor(rand_ints(64 * 2000, 0, 1000), {64, 2000});
  EXPECT_TRUE(all_close(x.gather(1, index), ref_gather(x, 1, index)));
  EXPECT_EQ(ts::gather(x, 0, ts::empty({0, 5}, ts::kInt64)).sizes(), (ts::Shape{0, 5}));
  ts::Tensor sc = ts::scalar_tensor(3.5);
  ts::Tensor g = ts::gather(sc, 0, int_tensor({0}));
  EXPECT_EQ(g.dim(), 0);
  EXPECT_EQ(g.item<double>(), 3.5);
  ts::Tensor g1 = ts::gather(sc, -1, int_tensor({0, 0}, {2}));
  EXPECT_EQ(g1.tolist<double>(), (std::vector<double>{3.5, 3.5}));
}

TEST(Gather, Errors) {
  ts::Tensor x = test_data({3, 4}, ts::kFloat32);
  std::string m = message_of<ts::IndexError>([&] { ts::gather(x, 1, int_tensor({0, 9, 1}, {1, 3})); });
  EXPECT_TRUE(contains(m, "gather") && contains(m, "index 9 is out of bounds for dimension 1 with size 4")) << m;
  EXPECT_THROW(ts::gather(x, 0, int_tensor({-1}, {1, 1})), ts::IndexError);  // not wrapped
  EXPECT_THROW(ts::gather(x, 2, int_tensor({0}, {1, 1})), ts::IndexError);
  EXPECT_THROW(ts::gather(x, 0, int_tensor({0}, {1, 1}, ts::kInt32)), ts::DTypeError);
  EXPECT_THROW(ts::gather(x, 0, int_tensor({0}, {1})), ts::ShapeError);        // dims differ
  EXPECT_THROW(ts::gather(x, 0, ts::zeros({2, 5}, ts::kInt64)), ts::ShapeError);  // 5 > 4 at dim 1
  EXPECT_THROW(ts::gather(x, 0, ts::zeros({1, 1}, {ts::kInt64, "meta"})), ts::DeviceError);
  ts::Tensor mx = ts::empty({3, 4}, "meta");
  EXPECT_EQ(ts::gather(mx, 0, ts::empty({5, 2}, {ts::kInt64, "meta"})).sizes(), (ts::Shape{5, 2}));
}

// ---- scatter / scatter_add ----------------------------------------------------------------------

TEST(Scatter, SrcAndValueAllDTypesLayouts) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts())
      for (int64_t d : {0, 1}) {
        ts::Tensor x = l.apply(int_data({4, 5}, dt, 21));
        ts::Tensor src = l.apply(int_data({3, 6}, dt, 22));
        ts::Shape is = {3, 4};
        ts::Tensor index = l.apply(int_tensor(rand_ints(12, 0, x.size(d), 9 + d), is));  // with duplicates
        ts::Tensor out = ts::scatter(x, d, index, src);
        EXPECT_TRUE(all_close(out, ref_scatter(x, d, index, src, false))) << dtype_name(dt) << " " << l.name << " " << d;
        ts::Tensor added = ts::scatter_add(x, d, index, src);
        EXPECT_TRUE(all_close(added, ref_scatter(x, d, index, src, true))) << dtype_name(dt) << " " << l.name << " " << d;
        ts::Tensor v = ts::scatter(x, d, index, ts::Scalar(3));
        EXPECT_TRUE(all_close(v, ref_scatter(x, d, index, ts::full(is, 3, dt), false))) << dtype_name(dt);
        // x itself is untouched by the out-of-place forms
        EXPECT_TRUE(all_close(x, int_data({4, 5}, dt, 21)));
      }
}

TEST(Scatter, FloatValuesDuplicatesInPlaceAndLarge) {
  ts::Tensor x = test_data({5, 300}, ts::kFloat32, 1);
  ts::Tensor src = test_data({40, 300}, ts::kFloat32, 2);
  ts::Tensor index = int_tensor(rand_ints(40 * 300, 0, 5), {40, 300});  // many duplicates per column
  EXPECT_TRUE(all_close(ts::scatter_add(x, 0, index, src), ref_scatter(x, 0, index, src, true)));
  ts::Tensor y = x.clone();
  y.scatter_add_(0, index, src);
  EXPECT_TRUE(all_close(y, ref_scatter(x, 0, index, src, true)));
  ts::Tensor z = x.clone();
  z.scatter_(1, int_tensor({2, 0}, {1, 2}), src.slice(0, 0, 1).slice(1, 0, 2));
  EXPECT_TRUE(all_close(z, ref_scatter(x, 1, int_tensor({2, 0}, {1, 2}), src.slice(0, 0, 1).slice(1, 0, 2), false)));
  // float16 sums of many terms accumulate within a rounding per step
  ts::Tensor h = ts::scatter_add(ts::zeros({2}, ts::kFloat16), 0, ts::zeros({100}, ts::kInt64), ts::full({100}, 0.5, ts::kFloat16));
  EXPECT_EQ(h.tolist<double>(), (std::vector<double>{50.0, 0.0}));
  // Large: parallel over lines, serial along dim.
  ts::Tensor big = int_data({200, 400}, ts::kInt64, 5);
  ts::Tensor bidx = int_tensor(rand_ints(150 * 400, 0, 200, 3), {150, 400});
  ts::Tensor bsrc = int_data({150, 400}, ts::kInt64, 6);
  EXPECT_TRUE(all_close(ts::scatter_add(big, 0, bidx, bsrc), ref_scatter(big, 0, bidx, bsrc, true)));
  EXPECT_TRUE(all_close(ts::scatter(big, 0, bidx, bsrc), ref_scatter(big, 0, bidx, bsrc, false)));
}

TEST(Scatter, ZeroSizeAndZeroDim) {
  ts::Tensor x = test_data({3, 4}, ts::kFloat32);
  EXPECT_TRUE(all_close(ts::scatter(x, 0, ts::empty({0}, ts::kInt64), ts::zeros({2})), x));  // empty index: no checks
  EXPECT_TRUE(all_close(ts::scatter_add(x, 1, ts::empty({3, 0}, ts::kInt64), ts::zeros({3, 4})), x));
  ts::Tensor sc = ts::scalar_tensor(1.5);
  ts::Tensor r = ts::scatter_add(sc, 0, int_tensor({0}), ts::scalar_tensor(2.0));
  EXPECT_EQ(r.dim(), 0);
  EXPECT_EQ(r.item<double>(), 3.5);
  EXPECT_EQ(ts::scatter(sc, 0, int_tensor({0}), ts::Scalar(7.0)).item<double>(), 7.0);
}

TEST(Scatter, Errors) {
  ts::Tensor x = test_data({3, 4}, ts::kFloat32);
  ts::Tensor src = test_data({3, 4}, ts::kFloat32, 2);
  std::string m = message_of<ts::IndexError>([&] { ts::scatter(x, 0, int_tensor({0, 3}, {1, 2}), src); });
  EXPECT_TRUE(contains(m, "scatter") && contains(m, "index 3 is out of bounds for dimension 0 with size 3")) << m;
  m = message_of<ts::IndexError>([&] { ts::scatter_add(x, 1, int_tensor({-1}, {1, 1}), src); });
  EXPECT_TRUE(contains(m, "scatter_add") && contains(m, "index -1")) << m;
  EXPECT_THROW(ts::scatter(x, 2, int_tensor({0}, {1, 1}), src), ts::IndexError);
  EXPECT_THROW(ts::scatter(x, 0, int_tensor({0}, {1, 1}, ts::kInt32), src), ts::DTypeError);
  EXPECT_THROW(ts::scatter(x, 0, int_tensor({0}, {1, 1}), src.to(ts::kFloat64)), ts::DTypeError);
  EXPECT_THROW(ts::scatter_add(x, 0, int_tensor({0}, {1, 1}), src.to(ts::kInt64)), ts::DTypeError);
  EXPECT_THROW(ts::scatter(x, 0, int_tensor({0}, {1}), src), ts::ShapeError);              // index dims
  EXPECT_THROW(ts::scatter(x, 0, ts::zeros({1, 5}, ts::kInt64), ts::zeros({1, 5})), ts::ShapeError);  // > self
  EXPECT_THROW(ts::scatter(x, 0, ts::zeros({2, 2}, ts::kInt64), ts::zeros({1, 4})), ts::ShapeError);  // > src
  EXPECT_THROW(ts::scatter(x, 0, ts::zeros({1, 1}, {ts::kInt64, "meta"}), src), ts::DeviceError);
  EXPECT_THROW(ts::scatter(x, 0, int_tensor({0}, {1, 1}), ts::empty({3, 4}, "meta")), ts::DeviceError);
  ts::Tensor mx = ts::empty({3, 4}, "meta");
  ts::Tensor mo = ts::scatter_add(mx, 1, ts::empty({2, 2}, {ts::kInt64, "meta"}), ts::empty({2, 2}, "meta"));
  EXPECT_TRUE(mo.is_meta());
  EXPECT_EQ(mo.sizes(), (ts::Shape{3, 4}));
}

// ---- index_add ----------------------------------------------------------------------------------

TEST(IndexAdd, AllDTypesLayoutsDuplicatesAlpha) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts())
      for (int64_t d : {0, 1, 2}) {
        ts::Tensor x = l.apply(int_data({3, 4, 5}, dt, 31));
        ts::Shape ss = x.sizes();
        ss[d] = 6;
        ts::Tensor source = l.apply(int_data(ss, dt, 32));
        std::vector<int64_t> iv = rand_ints(6, 0, x.size(d), 40 + d);
        ts::Scalar alpha = dt == ts::kBool ? ts::Scalar(true) : ts::Scalar(2);
        for (ts::DType it : {ts::kInt64, ts::kInt32}) {
          ts::Tensor out = ts::index_add(x, d, int_tensor(iv, {6}, it), source, alpha);
          std::vector<double> ref = x.tolist<double>(), sv = source.tolist<double>();
          double a = dt == ts::kBool ? 1 : 2;
          for (int64_t r = 0; r < static_cast<int64_t>(sv.size()); ++r) {
            auto c = unravel(r, ss);
            c[d] = iv[c[d]];
            ref[ravel(c, x.sizes())] += a * sv[r];
          }
          EXPECT_TRUE(all_close(out, ref_tensor(ref, x.sizes()).to(dt))) << dtype_name(dt) << " " << l.name << " " << d;
        }
      }
}

TEST(IndexAdd, FloatAlphaInPlaceZeroSizeZeroDim) {
  ts::Tensor x = test_data({4, 3}, ts::kFloat32, 1);
  ts::Tensor src = test_data({3, 3}, ts::kFloat32, 2);
  ts::Tensor y = x.clone();
  y.index_add_(0, int_tensor({1, 1, 3}, {3}), src, 0.5);
  std::vector<double> ref = x.tolist<double>(), sv = src.tolist<double>();
  const int64_t rows[3] = {1, 1, 3};
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) ref[rows[i] * 3 + j] += 0.5 * sv[i * 3 + j];
  EXPECT_TRUE(all_close(y, ref_tensor(ref, {4, 3})));
  EXPECT_TRUE(all_close(ts::index_add(x, 0, ts::empty({0}, ts::kInt64), ts::zeros({0, 3})), x));
  ts::Tensor sc = ts::scalar_tensor(1.0);
  ts::Tensor r = ts::index_add(sc, 0, int_tensor({0}), ts::scalar_tensor(4.0), 2);
  EXPECT_EQ(r.dim(), 0);
  EXPECT_EQ(r.item<double>(), 9.0);
  // Large with heavy duplication: parallel over the columns, serial over the index.
  ts::Tensor big = int_data({50, 2000}, ts::kFloat32, 7);
  ts::Tensor bsrc = int_data({500, 2000}, ts::kFloat32, 8);
  std::vector<int64_t> biv = rand_ints(500, 0, 50, 9);
  std::vector<double> bref = big.tolist<double>(), bsv = bsrc.tolist<double>();
  for (int64_t i = 0; i < 500; ++i)
    for (int64_t j = 0; j < 2000; ++j) bref[biv[i] * 2000 + j] += bsv[i * 2000 + j];
  EXPECT_TRUE(all_close(ts::index_add(big, 0, int_tensor(biv, {500}), bsrc), ref_tensor(bref, {50, 2000})));
}

TEST(IndexAdd, Errors) {
  ts::Tensor x = ts::zeros({3, 4});
  std::string m = message_of<ts::IndexError>([&] { ts::index_add(x, 0, int_tensor({4}, {1}), ts::ones({1, 4})); });
  EXPECT_TRUE(contains(m, "index_add") && contains(m, "index 4 is out of bounds for dimension 0 with size 3")) << m;
  EXPECT_THROW(ts::index_add(x, 0, int_tensor({-1}, {1}), ts::ones({1, 4})), ts::IndexError);
  EXPECT_THROW(ts::index_add(x, 2, int_tensor({0}, {1}), ts::ones({1, 4})), ts::IndexError);
  EXPECT_THROW(ts::index_add(x, 0, ts::zeros({1}), ts::ones({1, 4})), ts::DTypeError);
  EXPECT_THROW(ts::index_add(x, 0, int_tensor({0}, {1}), ts::ones({1, 4}, ts::kFloat64)), ts::DTypeError);
  EXPECT_THROW(ts::index_add(ts::zeros({3}, ts::kInt64), 0, int_tensor({0}, {1}), ts::ones({1}, ts::kInt64), 0.5),
               ts::DTypeError);
  EXPECT_THROW(ts::index_add(x, 0, int_tensor({0, 1}, {2}), ts::ones({1, 4})), ts::ShapeError);  // count
  EXPECT_THROW(ts::index_add(x, 0, int_tensor({0}, {1}), ts::ones({1, 5})), ts::ShapeError);     // slice
  EXPECT_THROW(ts::index_add(x, 0, int_tensor({0}, {1}), ts::ones({4})), ts::ShapeError);        // dims
  EXPECT_THROW(ts::index_add(x, 0, int_tensor({0}, {1}), ts::ones({1, 4}, "meta")), ts::DeviceError);
  EXPECT_EQ(ts::index_add(ts::empty({3, 4}, "meta"), 1, ts::empty({2}, {ts::kInt64, "meta"}), ts::empty({3, 2}, "meta")).sizes(),
            (ts::Shape{3, 4}));
}

// ---- masked_fill --------------------------------------------------------------------------------

TEST(MaskedFill, AllDTypesLayoutsBroadcast) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts()) {
      ts::Tensor x = l.apply(test_data({3, 4}, dt, 41));
      ts::Tensor full_mask = l.apply(test_data({3, 4}, ts::kBool, 42));
      ts::Tensor row_mask = test_data({4}, ts::kBool, 43);
      ts::Scalar value = dt == ts::kBool ? ts::Scalar(true) : ts::is_floating_point(dt) ? ts::Scalar(2.5) : ts::Scalar(7);
      double v = dt == ts::kBool ? 1 : ts::is_floating_point(dt) ? 2.5 : 7;
      for (const ts::Tensor& mask : {full_mask, row_mask}) {
        ts::Tensor out = ts::masked_fill(x, mask, value);
        std::vector<double> xv = x.tolist<double>(), mv = mask.expand({3, 4}).tolist<double>();
        for (size_t i = 0; i < xv.size(); ++i) if (mv[i] != 0) xv[i] = v;
        EXPECT_TRUE(all_close(out, ref_tensor(xv, {3, 4}).to(dt))) << dtype_name(dt) << " " << l.name;
        ts::Tensor y = x.clone();
        y.masked_fill_(mask, value);
        EXPECT_TRUE(all_close(y, out));
      }
    }
}

TEST(MaskedFill, ResultBroadcastsZeroDimZeroSize) {
  ts::Tensor x = ts::tensor({1.0, 2.0, 3.0});
  ts::Tensor mask = ts::tensor(std::vector<bool>{true, false, false, true, false, true}, {2, 3});
  ts::Tensor out = ts::masked_fill(x, mask, -1.0);  // out-of-place broadcasts both, as PyTorch
  EXPECT_EQ(out.sizes(), (ts::Shape{2, 3}));
  EXPECT_EQ(out.tolist<double>(), (std::vector<double>{-1, 2, 3, -1, 2, -1}));
  ts::Tensor y = x.clone();
  EXPECT_THROW(y.masked_fill_(mask, 0.0), ts::ShapeError);  // in place cannot grow self
  ts::Tensor sc = ts::scalar_tensor(4.0);
  EXPECT_EQ(ts::masked_fill(sc, ts::scalar_tensor(true), 9.0).item<double>(), 9.0);
  EXPECT_EQ(ts::masked_fill(sc, ts::scalar_tensor(false), 9.0).item<double>(), 4.0);
  EXPECT_EQ(ts::masked_fill(ts::zeros({0, 3}), ts::ones({3}, ts::kBool), 1.0).sizes(), (ts::Shape{0, 3}));
  EXPECT_EQ(ts::masked_fill(ts::tensor({1.0, 2.0}, ts::kInt32), ts::ones({2}, ts::kBool), 2.7).tolist<int64_t>(),
            (std::vector<int64_t>{2, 2}));
}

TEST(MaskedFill, Errors) {
  ts::Tensor x = ts::zeros({3, 4});
  EXPECT_THROW(ts::masked_fill(x, ts::ones({3, 4}, ts::kUInt8), 1.0), ts::DTypeError);
  EXPECT_THROW(ts::masked_fill(x, ts::ones({3, 4}), 1.0), ts::DTypeError);
  EXPECT_THROW(ts::masked_fill(x, ts::ones({3}, ts::kBool), 1.0), ts::ShapeError);
  EXPECT_THROW(ts::masked_fill(x, ts::ones({3, 4}, {ts::kBool, "meta"}), 1.0), ts::DeviceError);
  ts::Tensor m = ts::masked_fill(ts::empty({3, 1}, "meta"), ts::empty({4}, {ts::kBool, "meta"}), 1.0);
  EXPECT_EQ(m.sizes(), (ts::Shape{3, 4}));
}

// ---- masked_select, nonzero ---------------------------------------------------------------------

TEST(MaskedSelect, AllDTypesLayoutsBroadcast) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts()) {
      ts::Tensor x = l.apply(test_data({3, 4}, dt, 51));
      for (const ts::Tensor& mask : {l.apply(test_data({3, 4}, ts::kBool, 52)), test_data({4}, ts::kBool, 53)}) {
        std::vector<double> xv = x.tolist<double>(), mv = mask.expand({3, 4}).tolist<double>(), ref;
        for (size_t i = 0; i < xv.size(); ++i) if (mv[i] != 0) ref.push_back(xv[i]);
        ts::Tensor out = ts::masked_select(x, mask);
        EXPECT_TRUE(all_close(out, ref_tensor(ref, {static_cast<int64_t>(ref.size())}))) << dtype_name(dt) << " " << l.name;
        EXPECT_EQ(out.dtype(), dt);
      }
    }
  // self broadcasts to the mask too
  ts::Tensor out = ts::masked_select(ts::tensor({1.0, 2.0}), ts::tensor(std::vector<bool>{true, true, false, true}, {2, 2}));
  EXPECT_EQ(out.tolist<double>(), (std::vector<double>{1, 2, 2}));
}

TEST(MaskedSelect, LargeZeroDimZeroSizeErrors) {
  ts::Tensor x = test_data({300, 1000}, ts::kFloat32, 3);
  ts::Tensor mask = test_data({300, 1000}, ts::kBool, 4).t().contiguous().t();  // strided mask
  std::vector<double> xv = x.tolist<double>(), mv = mask.tolist<double>(), ref;
  for (size_t i = 0; i < xv.size(); ++i) if (mv[i] != 0) ref.push_back(xv[i]);
  EXPECT_TRUE(all_close(ts::masked_select(x, mask), ref_tensor(ref, {static_cast<int64_t>(ref.size())})));
  EXPECT_EQ(ts::masked_select(ts::scalar_tensor(5.0), ts::scalar_tensor(true)).tolist<double>(), (std::vector<double>{5}));
  EXPECT_EQ(ts::masked_select(ts::scalar_tensor(5.0), ts::scalar_tensor(false)).sizes(), (ts::Shape{0}));
  EXPECT_EQ(ts::masked_select(ts::zeros({0, 4}), ts::ones({4}, ts::kBool)).sizes(), (ts::Shape{0}));
  EXPECT_THROW(ts::masked_select(ts::zeros({3}), ts::ones({3}, ts::kInt64)), ts::DTypeError);
  EXPECT_THROW(ts::masked_select(ts::zeros({3}), ts::ones({4}, ts::kBool)), ts::ShapeError);
  EXPECT_THROW(ts::masked_select(ts::zeros({3}), ts::ones({3}, {ts::kBool, "meta"})), ts::DeviceError);
  std::string m = message_of<ts::NotImplementedError>(
      [] { ts::masked_select(ts::empty({3}, "meta"), ts::empty({3}, {ts::kBool, "meta"})); });
  EXPECT_TRUE(contains(m, "masked_select")) << m;
}

TEST(Nonzero, AllDTypesLayouts) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts()) {
      ts::Tensor x = l.apply(int_data({3, 4, 5}, dt, 61));  // about a tenth are zero
      std::vector<double> xv = x.tolist<double>();
      std::vector<int64_t> ref;
      for (int64_t i = 0; i < static_cast<int64_t>(xv.size()); ++i)
        if (xv[i] != 0)
          for (int64_t c : unravel(i, {3, 4, 5})) ref.push_back(c);
      ts::Tensor nz = ts::nonzero(x);
      EXPECT_EQ(nz.dtype(), ts::kInt64);
      EXPECT_EQ(nz.sizes(), (ts::Shape{static_cast<int64_t>(ref.size() / 3), 3}));
      EXPECT_EQ(nz.tolist<int64_t>(), ref) << dtype_name(dt) << " " << l.name;
      EXPECT_TRUE(all_close(x.nonzero(), nz));
    }
}

TEST(Nonzero, LargeZeroDimZeroSizeMeta) {
  // Enough elements for several chunks: the output must still be in row-major order.
  ts::Tensor x = int_data({400, 500}, ts::kInt32, 9).t();
  std::vector<double> xv = x.tolist<double>();
  std::vector<int64_t> ref;
  for (int64_t i = 0; i < static_cast<int64_t>(xv.size()); ++i)
    if (xv[i] != 0) {
      ref.push_back(i / 400);
      ref.push_back(i % 400);
    }
  EXPECT_EQ(ts::nonzero(x).tolist<int64_t>(), ref);
  EXPECT_EQ(ts::nonzero(ts::scalar_tensor(2.0)).sizes(), (ts::Shape{1, 0}));
  EXPECT_EQ(ts::nonzero(ts::scalar_tensor(0.0)).sizes(), (ts::Shape{0, 0}));
  EXPECT_EQ(ts::nonzero(ts::zeros({0, 3})).sizes(), (ts::Shape{0, 2}));
  EXPECT_EQ(ts::nonzero(ts::tensor({0.0, NAN, -0.0, 1.0})).tolist<int64_t>(), (std::vector<int64_t>{1, 3}));
  std::string m = message_of<ts::NotImplementedError>([] { ts::nonzero(ts::empty({3}, "meta")); });
  EXPECT_TRUE(contains(m, "nonzero")) << m;
}

// ---- embedding, one_hot -------------------------------------------------------------------------

TEST(Embedding, DTypesLayoutsShapes) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts())
      for (ts::DType it : {ts::kInt64, ts::kInt32}) {
        ts::Tensor w = l.apply(test_data({10, 4}, dt, 71));
        std::vector<int64_t> iv = rand_ints(6, 0, 10, 2);
        ts::Tensor idx = l.apply(int_tensor(iv, {2, 3}, it));
        ts::Tensor out = ts::embedding(w, idx, /*padding_idx=*/0);
        std::vector<double> wv = w.tolist<double>(), ref;
        for (int64_t i : iv)
          for (int64_t j = 0; j < 4; ++j) ref.push_back(wv[i * 4 + j]);
        EXPECT_TRUE(all_close(out, ref_tensor(ref, {2, 3, 4}))) << dtype_name(dt) << " " << l.name;
      }
  ts::Tensor w = test_data({5, 3}, ts::kFloat32);
  EXPECT_EQ(ts::embedding(w, int_tensor({2})).sizes(), (ts::Shape{3}));
  EXPECT_TRUE(all_close(ts::embedding(w, int_tensor({2})), w.select(0, 2)));
  EXPECT_EQ(ts::embedding(w, ts::empty({0, 7}, ts::kInt64)).sizes(), (ts::Shape{0, 7, 3}));
  EXPECT_EQ(ts::embedding(ts::empty({5, 3}, "meta"), ts::empty({2, 2}, {ts::kInt64, "meta"})).sizes(),
            (ts::Shape{2, 2, 3}));
}

TEST(Embedding, Errors) {
  ts::Tensor w = test_data({5, 3}, ts::kFloat32);
  std::string m = message_of<ts::IndexError>([&] { ts::embedding(w, int_tensor({1, 5}, {2})); });
  EXPECT_TRUE(contains(m, "embedding") && contains(m, "index 5 is out of bounds for dimension 0 with size 5")) << m;
  EXPECT_THROW(ts::embedding(w, int_tensor({-1}, {1})), ts::IndexError);
  EXPECT_THROW(ts::embedding(w, int_tensor({0}, {1}), 5), ts::IndexError);
  EXPECT_NO_THROW(ts::embedding(w, int_tensor({0}, {1}), -5));
  EXPECT_THROW(ts::embedding(w, ts::zeros({2})), ts::DTypeError);
  EXPECT_THROW(ts::embedding(ts::zeros({5}), int_tensor({0}, {1})), ts::ShapeError);
  EXPECT_THROW(ts::embedding(w, ts::zeros({2}, {ts::kInt64, "meta"})), ts::DeviceError);
}

TEST(OneHot, ValuesShapesErrors) {
  ts::Tensor idx = int_tensor({0, 3, 1, 3, 2, 0}, {2, 3});
  ts::Tensor out = ts::one_hot(idx);
  EXPECT_EQ(out.sizes(), (ts::Shape{2, 3, 4}));
  EXPECT_EQ(out.dtype(), ts::kInt64);
  std::vector<int64_t> ref(24, 0);
  std::vector<int64_t> iv = idx.tolist<int64_t>();
  for (int64_t i = 0; i < 6; ++i) ref[i * 4 + iv[i]] = 1;
  EXPECT_EQ(out.tolist<int64_t>(), ref);
  ts::Tensor strided = idx.t();  // (3, 2)
  ts::Tensor o2 = ts::one_hot(strided, 6);
  EXPECT_EQ(o2.sizes(), (ts::Shape{3, 2, 6}));
  std::vector<int64_t> sv = strided.tolist<int64_t>(), ref2(36, 0);
  for (int64_t i = 0; i < 6; ++i) ref2[i * 6 + sv[i]] = 1;
  EXPECT_EQ(o2.tolist<int64_t>(), ref2);
  EXPECT_EQ(ts::one_hot(int_tensor({2}), 3).tolist<int64_t>(), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(ts::one_hot(ts::empty({0}, ts::kInt64), 5).sizes(), (ts::Shape{0, 5}));
  EXPECT_THROW(ts::one_hot(ts::empty({0}, ts::kInt64)), ts::ValueError);
  EXPECT_THROW(ts::one_hot(int_tensor({0, -1}, {2})), ts::IndexError);
  std::string m = message_of<ts::IndexError>([] { ts::one_hot(int_tensor({0, 4}, {2}), 3); });
  EXPECT_TRUE(contains(m, "one_hot") && contains(m, "4")) << m;
  EXPECT_THROW(ts::one_hot(int_tensor({0, 1}, {2}, ts::kInt32)), ts::DTypeError);
  EXPECT_THROW(ts::one_hot(int_tensor({0, 1}, {2}), -2), ts::ValueError);
  EXPECT_EQ(ts::one_hot(ts::empty({2, 3}, {ts::kInt64, "meta"}), 7).sizes(), (ts::Shape{2, 3, 7}));
  EXPECT_THROW(ts::one_hot(ts::empty({2, 3}, {ts::kInt64, "meta"})), ts::NotImplementedError);
}
