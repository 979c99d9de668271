// Advanced indexing, index (x[i0, i1, ...]) and index_put (x[i0, i1, ...] = v), against a host
// reference written from NumPy's rules (ops/index_ref.h): integer and boolean indices, broadcasting
// index tensors, adjacent and separated index blocks, negative indices, 0-dim and zero-size cases,
// duplicate positions with and without accumulate, and the errors each raises.
#include "common/test_util.h"
#include "ops/index_ref.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

using Indices = std::vector<std::optional<ts::Tensor>>;

const std::vector<ts::DType> kDTypes = {ts::kFloat32, ts::kFloat16, ts::kBFloat16, ts::kFloat64,
                                        ts::kInt64,   ts::kInt32,   ts::kUInt8,    ts::kBool};

// Host entries of an index list: masks expand into coordinate lists, integers pass through.
std::vector<HostIndex> host_indices(const Indices& idx) {
  std::vector<HostIndex> out;
  for (const auto& t : idx) {
    if (!t) {
      out.push_back(HostIndex{});
    } else if (t->dtype() == ts::kBool || t->dtype() == ts::kUInt8) {
      for (auto& h : host_mask(*t)) out.push_back(h);
    } else {
      out.push_back(host_index(*t));
    }
  }
  return out;
}

ts::Tensor ref_index(const ts::Tensor& x, const Indices& idx) {
  HostIndexMap m = host_index_map(x.sizes(), host_indices(idx));
  std::vector<double> xv = x.tolist<double>(), out;
  for (int64_t s : m.src) out.push_back(xv[s]);
  return ref_tensor(out, m.shape);
}

// Writes in row-major order of the indexing result, so the last duplicate wins (the kernel's order).
ts::Tensor ref_index_put(const ts::Tensor& x, const Indices& idx, const ts::Tensor& values, bool accumulate) {
  HostIndexMap m = host_index_map(x.sizes(), host_indices(idx));
  std::vector<double> out = x.tolist<double>(), vv = values.expand(m.shape).tolist<double>();
  for (size_t r = 0; r < m.src.size(); ++r) out[m.src[r]] = accumulate ? out[m.src[r]] + vv[r] : vv[r];
  return ref_tensor(out, x.sizes()).to(x.dtype());
}


bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The index lists every value test runs over x of shape (5, 4, 3); `l` lays out the index tensors.
std::vector<std::pair<std::string, Indices>> cases(const Layout& l) {
  auto I = [&](std::vector<int64_t> v, ts::Shape s, ts::DType d = ts::kInt64) { return l.apply(int_tensor(v, s, d)); };
  ts::Tensor mask54 = l.apply(test_data({5, 4}, ts::kBool, 8));
  ts::Tensor mask4 = test_data({4}, ts::kBool, 9);
  return {
      {"first dim, 2-D index with negatives", {I({0, -1, 3, 2, -5, 4}, {2, 3})}},
      {"middle dim", {std::nullopt, I({3, 0, -2}, {3})}},
      {"last dim int32", {std::nullopt, std::nullopt, I({2, 0, 1, 1}, {2, 2}, ts::kInt32)}},
      {"adjacent broadcast", {std::nullopt, I({0, 3}, {2, 1}), I({2, 0, 1}, {3})}},
      {"separated", {I({1, 4}, {2, 1}), std::nullopt, I({0, 2, -1}, {3})}},
      {"all three", {I({1, 4, 0}, {3}), I({3}, {1}), I({2, 2, 0}, {3})}},
      {"0-dim index", {I({2}, {})}},
      {"0-dim index separated", {I({-1}, {}), std::nullopt, I({1}, {})}},
      {"zero-size index", {std::nullopt, I({}, {0})}},
      {"2-D bool mask", {mask54}},
      {"1-D bool mask on dim 1", {std::nullopt, mask4}},
      {"uint8 mask", {std::nullopt, mask4.to(ts::kUInt8)}},
      {"mask separated from index",
       {l.apply(ts::tensor(std::vector<bool>{false, true, false, false, true})), std::nullopt, I({0, 2}, {2})}},
      {"only slices", {std::nullopt, std::nullopt}},
      {"empty list", {}},
  };
}

}  // namespace

TEST(Index, ValuesAllDTypesLayouts) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts()) {
      ts::Tensor x = l.apply(test_data({5, 4, 3}, dt, 1));
      for (const auto& [name, idx] : cases(l)) {
        ts::Tensor out = ts::index(x, idx);
        EXPECT_TRUE(all_close(out, ref_index(x, idx))) << name << " " << dtype_name(dt) << " " << l.name;
        EXPECT_TRUE(all_close(x.index(idx), out)) << name;
      }
    }
}

TEST(Index, ResultLayoutOfSeparatedAndAdjacentIndices) {
  ts::Tensor x = test_data({5, 4, 3, 2}, ts::kFloat32, 2);
  ts::Tensor i23 = int_tensor(rand_ints(6, 0, 3), {2, 3});
  // x[i, :, j]: separated, the index block goes first.
  EXPECT_EQ(ts::index(x, {i23, std::nullopt, i23}).sizes(), (ts::Shape{2, 3, 4, 2}));
  // x[:, i, j]: adjacent, the block stays in place.
  EXPECT_EQ(ts::index(x, {std::nullopt, i23, i23}).sizes(), (ts::Shape{5, 2, 3, 2}));
  // x[:, i, :, j]: separated again.
  Indices sep = {std::nullopt, i23, std::nullopt, int_tensor({1, 0, 1}, {3})};
  ts::Tensor out = ts::index(x, sep);
  EXPECT_EQ(out.sizes(), (ts::Shape{2, 3, 5, 3}));
  EXPECT_TRUE(all_close(out, ref_index(x, sep)));
  // A 2-D mask forms one block with a following index.
  ts::Tensor m = test_data({5, 4}, ts::kBool, 3);
  Indices mi = {m, int_tensor({2}, {1})};
  EXPECT_TRUE(all_close(ts::index(x, mi), ref_index(x, mi)));
}

TEST(Index, BoolScalarMasksAndZeroDim) {
  ts::Tensor x = test_data({3, 4}, ts::kFloat32, 4);
  ts::Tensor t = ts::index(x, {ts::scalar_tensor(true)});  // x[True] adds a dim
  EXPECT_EQ(t.sizes(), (ts::Shape{1, 3, 4}));
  EXPECT_TRUE(all_close(t.squeeze(0), x));
  EXPECT_EQ(ts::index(x, {ts::scalar_tensor(false)}).sizes(), (ts::Shape{0, 3, 4}));
  EXPECT_EQ(ts::index(x, {std::nullopt, ts::scalar_tensor(true)}).sizes(), (ts::Shape{3, 1, 4}));
  ts::Tensor sc = ts::scalar_tensor(7.0);
  EXPECT_EQ(ts::index(sc, {ts::scalar_tensor(true)}).tolist<double>(), (std::vector<double>{7.0}));
  EXPECT_TRUE(all_close(ts::index(sc, {}), sc));
  // x[i, j] with 0-dim i, j: a 0-dim result.
  ts::Tensor e = ts::index(x, {int_tensor({2}), int_tensor({-1})});
  EXPECT_EQ(e.dim(), 0);
  EXPECT_EQ(e.item<double>(), x.tolist<double>()[2 * 4 + 3]);
  // All-false mask and zero-size tensors.
  EXPECT_EQ(ts::index(x, {ts::zeros({3}, ts::kBool)}).sizes(), (ts::Shape{0, 4}));
  EXPECT_EQ(ts::index(ts::zeros({0, 4}), {std::nullopt, int_tensor({1, 2}, {2})}).sizes(), (ts::Shape{0, 2}));
}

TEST(Index, LargeParallel) {
  ts::Tensor x = test_data({1000, 64}, ts::kFloat32, 5);
  ts::Tensor i = int_tensor(rand_ints(3000, -1000, 1000, 6), {3000});
  EXPECT_TRUE(all_close(ts::index(x, {i}), ref_index(x, {i})));
  ts::Tensor xt = x.t();  // strided rows: the inner walk is not unit-stride
  Indices both = {std::nullopt, i};
  EXPECT_TRUE(all_close(ts::index(xt, both), ref_index(xt, both)));
}

TEST(Index, Errors) {
  ts::Tensor x = test_data({5, 4}, ts::kFloat32);
  std::string m = message_of<ts::IndexError>([&] { ts::index(x, {std::nullopt, int_tensor({0, 4}, {2})}); });
  EXPECT_TRUE(contains(m, "index") && contains(m, "index 4 is out of bounds for dimension 1 with size 4")) << m;
  m = message_of<ts::IndexError>([&] { ts::index(x, {int_tensor({-6}, {1})}); });
  EXPECT_TRUE(contains(m, "index -6 is out of bounds for dimension 0 with size 5")) << m;
  EXPECT_THROW(ts::index(x, {std::nullopt, std::nullopt, std::nullopt}), ts::IndexError);  // too many
  EXPECT_THROW(ts::index(x, {ts::ones({5, 4, 1}, ts::kBool)}), ts::IndexError);
  EXPECT_THROW(ts::index(x, {ts::ones({4}, ts::kBool)}), ts::IndexError);  // mask shape mismatch
  EXPECT_THROW(ts::index(x, {ts::zeros({2})}), ts::DTypeError);
  EXPECT_THROW(ts::index(x, {ts::zeros({2}, ts::kInt8)}), ts::DTypeError);
  EXPECT_THROW(ts::index(x, {int_tensor({0, 1}, {2}), int_tensor({0, 1, 2}, {3})}), ts::ShapeError);
  EXPECT_THROW(ts::index(x, {ts::zeros({2}, {ts::kInt64, "meta"})}), ts::DeviceError);
  EXPECT_THROW(ts::index(ts::scalar_tensor(1.0), {int_tensor({0})}), ts::IndexError);
}

TEST(Index, Meta) {
  ts::Tensor x = ts::empty({5, 4, 3}, {ts::kBFloat16, "meta"});
  ts::Tensor i = ts::empty({2, 6}, {ts::kInt64, "meta"});
  ts::Tensor out = ts::index(x, {i, std::nullopt, i});
  EXPECT_TRUE(out.is_meta());
  EXPECT_EQ(out.sizes(), (ts::Shape{2, 6, 4}));
  EXPECT_EQ(out.dtype(), ts::kBFloat16);
  std::string m = message_of<ts::NotImplementedError>([&] { ts::index(x, {ts::empty({5}, {ts::kBool, "meta"})}); });
  EXPECT_TRUE(contains(m, "index")) << m;
  ts::Tensor v = ts::empty({4}, {ts::kBFloat16, "meta"});
  EXPECT_EQ(ts::index_put(x, {i, std::nullopt, i}, v).sizes(), (ts::Shape{5, 4, 3}));
}

// ---- index_put ----------------------------------------------------------------------------------

TEST(IndexPut, ValuesAllDTypesLayoutsBothModes) {
  for (ts::DType dt : kDTypes)
    for (const Layout& l : layouts()) {
      ts::Tensor x = l.apply(int_data({5, 4, 3}, dt, 11));
      for (const auto& [name, idx] : cases(l)) {
        HostIndexMap m = host_index_map(x.sizes(), host_indices(idx));
        // Full-shape values (laid out by l) and values broadcasting from the trailing dims.
        std::vector<ts::Tensor> vals = {l.apply(int_data(m.shape, dt, 12))};
        if (!m.shape.empty()) vals.push_back(int_data({m.shape.back()}, dt, 13));
        vals.push_back(ts::scalar_tensor(3, dt));
        for (const ts::Tensor& v : vals)
          for (bool acc : {false, true}) {
            ts::Tensor out = ts::index_put(x, idx, v, acc);
            EXPECT_TRUE(all_close(out, ref_index_put(x, idx, v, acc)))
                << name << " " << dtype_name(dt) << " " << l.name << " values " << ::testing::PrintToString(v.sizes()) << " acc " << acc;
          }
      }
      EXPECT_TRUE(all_close(x, int_data({5, 4, 3}, dt, 11))) << "index_put must not write into its input";
    }
}

TEST(IndexPut, DuplicatesAccumulateAndLastWins) {
  ts::Tensor x = ts::zeros({4});
  ts::Tensor i = int_tensor({1, 3, 1, 1, -1}, {5});
  ts::Tensor v = ts::tensor({1.0, 2.0, 3.0, 4.0, 5.0});
  EXPECT_EQ(ts::index_put(x, {i}, v, true).tolist<double>(), (std::vector<double>{0, 8, 0, 7}));
  EXPECT_EQ(ts::index_put(x, {i}, v, false).tolist<double>(), (std::vector<double>{0, 4, 0, 5}));
  // float16 accumulation of many duplicates
  ts::Tensor h = ts::index_put(ts::zeros({3}, ts::kFloat16), {ts::zeros({200}, ts::kInt64)},
                               ts::full({200}, 0.25, ts::kFloat16), true);
  EXPECT_EQ(h.tolist<double>(), (std::vector<double>{50, 0, 0}));
  // Large: duplicates across the serial index dim, parallel over the 500 columns.
  ts::Tensor big = int_data({300, 500}, ts::kFloat32, 14);
  Indices bi = {int_tensor(rand_ints(2000, -300, 300, 15), {2000})};
  ts::Tensor bv = int_data({2000, 500}, ts::kFloat32, 16);
  EXPECT_TRUE(all_close(ts::index_put(big, bi, bv, true), ref_index_put(big, bi, bv, true)));
  EXPECT_TRUE(all_close(ts::index_put(big, bi, bv, false), ref_index_put(big, bi, bv, false)));
  // Full indexing: no non-indexed dim, so the kernel runs serially in index order.
  Indices full = {int_tensor(rand_ints(5000, 0, 300, 17), {5000}), int_tensor(rand_ints(5000, 0, 500, 18), {5000})};
  ts::Tensor fv = int_data({5000}, ts::kFloat32, 19);
  EXPECT_TRUE(all_close(ts::index_put(big, full, fv, true), ref_index_put(big, full, fv, true)));
}

TEST(IndexPut, InPlaceMasksAndZeroDim) {
  ts::Tensor x = test_data({3, 4}, ts::kFloat32, 20);
  ts::Tensor y = x.clone();
  ts::Tensor mask = test_data({3, 4}, ts::kBool, 21);
  y.index_put_({mask}, ts::scalar_tensor(0.0));  // x[mask] = 0
  std::vector<double> ref = x.tolist<double>(), mv = mask.tolist<double>();
  for (size_t k = 0; k < ref.size(); ++k) if (mv[k] != 0) ref[k] = 0;
  EXPECT_TRUE(all_close(y, ref_tensor(ref, {3, 4})));
  ts::Tensor sc = ts::scalar_tensor(1.0);
  EXPECT_EQ(ts::index_put(sc, {ts::scalar_tensor(true)}, ts::scalar_tensor(5.0)).item<double>(), 5.0);
  EXPECT_EQ(ts::index_put(sc, {ts::scalar_tensor(false)}, ts::scalar_tensor(5.0)).item<double>(), 1.0);
  EXPECT_EQ(ts::index_put(sc, {}, ts::scalar_tensor(5.0), true).item<double>(), 6.0);
  // Values with extra leading size-1 dims are accepted, as x[i] = v in PyTorch.
  ts::Tensor r = ts::index_put(x, {int_tensor({0}, {1})}, ts::ones({1, 1, 4}));
  EXPECT_EQ(r.tolist<double>()[3], 1.0);
  // zero-size index: nothing written
  EXPECT_TRUE(all_close(ts::index_put(x, {ts::empty({0}, ts::kInt64)}, ts::ones({4})), x));
}

TEST(IndexPut, Errors) {
  ts::Tensor x = ts::zeros({5, 4});
  std::string m = message_of<ts::IndexError>([&] { x.index_put_({int_tensor({1, 5}, {2})}, ts::ones({4})); });
  EXPECT_TRUE(contains(m, "index_put") && contains(m, "index 5 is out of bounds for dimension 0 with size 5")) << m;
  EXPECT_TRUE(all_close(x, ts::zeros({5, 4}))) << "a failed index_put_ leaves self unchanged";
  EXPECT_THROW(ts::index_put(x, {int_tensor({1}, {1})}, ts::ones({4}, ts::kFloat64)), ts::DTypeError);
  EXPECT_THROW(ts::index_put(x, {int_tensor({1}, {1})}, ts::ones({3})), ts::ShapeError);
  EXPECT_THROW(ts::index_put(x, {int_tensor({1, 2}, {2})}, ts::ones({3, 4})), ts::ShapeError);
  EXPECT_THROW(ts::index_put(x, {ts::zeros({1})}, ts::ones({4})), ts::DTypeError);
  EXPECT_THROW(ts::index_put(x, {int_tensor({1}, {1})}, ts::ones({4}, "meta")), ts::DeviceError);
  EXPECT_THROW(ts::index_put(x, {ts::zeros({1}, {ts::kInt64, "meta"})}, ts::ones({4})), ts::DeviceError);
  EXPECT_THROW(ts::index_put(x, {std::nullopt, std::nullopt, std::nullopt}, ts::ones({4})), ts::IndexError);
}
