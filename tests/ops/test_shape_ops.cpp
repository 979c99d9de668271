// cat, stack, pad, flip, roll, repeat, repeat_interleave, tril, triu against host references built
// from tolist<double>() values, in every dtype, on contiguous / transposed / sliced-with-step inputs,
// with zero-size and 0-dim cases, negative dims, meta shapes and the errors PyTorch raises.
#include <algorithm>
#include <functional>
#include <string>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

// A host tensor: row-major float64 values with their sizes.
struct Host {
  ts::Shape sizes;
  std::vector<double> v;
};

Host host(const ts::Tensor& t) { return {t.sizes(), t.tolist<double>()}; }

int64_t flat_index(const ts::Shape& sizes, const ts::Shape& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < sizes.size(); ++d) f = f * sizes[d] + idx[d];
  return f;
}

double at(const Host& h, const ts::Shape& idx) { return h.v[flat_index(h.sizes, idx)]; }

// Builds an output of `sizes` with out[o] = f(o) for every multi-index o.
Host build(const ts::Shape& sizes, const std::function<double(const ts::Shape&)>& f) {
  Host h{sizes, std::vector<double>(ts::numel_of(sizes))};
  ts::Shape idx(sizes.size(), 0);
  for (int64_t i = 0; i < static_cast<int64_t>(h.v.size()); ++i) {
    h.v[i] = f(idx);
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  return h;
}

ts::Tensor to_tensor(const Host& h) {
  return ts::tensor(h.v, {static_cast<int64_t>(h.v.size())}, ts::kFloat64).reshape(h.sizes);
}

// Pure data movement: values must match exactly, in the result's dtype.
::testing::AssertionResult same(const ts::Tensor& actual, const Host& expected) {
  return all_close(actual, to_tensor(expected), Tolerance{0, 0});
}

template <class E, class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception containing '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

ts::Tensor meta(const ts::Shape& s, ts::DType d = ts::kFloat32) { return ts::empty(s, {d, ts::Device::meta()}); }

}  // namespace

// ---- cat / stack ------------------------------------------------------------------------------------
TEST(Cat, ValuesAllDtypesLayoutsDims) {
  for (ts::DType dt : all_dtypes()) {
    for (const auto& lay : layouts()) {
      for (int64_t dim : {0, 1, 2, -1, -3}) {
        ts::Shape sa{2, 3, 4}, sb{2, 3, 4};
        const int64_t w = dim < 0 ? dim + 3 : dim;
        sb[w] = 5;
        ts::Tensor a = lay.apply(test_data(sa, dt, 1)), b = lay.apply(test_data(sb, dt, 2));
        ts::Tensor c = ts::cat({a, b, a}, dim);
        EXPECT_EQ(c.dtype(), dt);
        Host ha = host(a), hb = host(b);
        ts::Shape so = sa;
        so[w] = sa[w] * 2 + sb[w];
        Host ref = build(so, [&](const ts::Shape& o) {
          ts::Shape i = o;
          if (i[w] < sa[w]) return at(ha, i);
          i[w] -= sa[w];
          if (i[w] < sb[w]) return at(hb, i);
          i[w] -= sb[w];
          return at(ha, i);
        });
        EXPECT_TRUE(same(c, ref)) << ts::dtype_name(dt) << " " << lay.name << " dim " << dim;
      }
    }
  }
}

TEST(Cat, TypePromotion) {
  ts::Tensor i32 = ts::tensor(std::vector<int32_t>{1, 2}), f16 = ts::tensor({0.5, 1.5}, ts::kFloat16);
  EXPECT_EQ(ts::cat({i32, f16}).dtype(), ts::kFloat16);
  EXPECT_EQ(ts::cat({i32, f16}).tolist<double>(), (std::vector<double>{1, 2, 0.5, 1.5}));
  ts::Tensor b = ts::tensor(std::vector<bool>{true, false});
  ts::Tensor i64 = ts::tensor(std::vector<int64_t>{7});
  EXPECT_EQ(ts::cat({b, i64}).dtype(), ts::kInt64);
  EXPECT_EQ(ts::cat({b, i64}).tolist<int64_t>(), (std::vector<int64_t>{1, 0, 7}));
  EXPECT_EQ(ts::cat({i32, i64}).dtype(), ts::kInt64);
  EXPECT_EQ(ts::cat({f16, ts::tensor({2.0}, ts::kBFloat16)}).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::cat({i32, ts::tensor({2.5}, ts::kFloat64)}).dtype(), ts::kFloat64);
  EXPECT_EQ(ts::cat({b, b}).dtype(), ts::kBool);
}

TEST(Cat, LegacyEmptyAndZeroSize) {
  ts::Tensor a = test_data({2, 3}, ts::kInt32, 3), b = test_data({4, 3}, ts::kInt32, 4);
  // (0,) tensors are skipped for the shape check but still promote the dtype.
  ts::Tensor c = ts::cat({a, ts::empty({0}, ts::kFloat64), b}, 0);
  EXPECT_EQ(c.sizes(), (ts::Shape{6, 3}));
  EXPECT_EQ(c.dtype(), ts::kFloat64);
  std::vector<double> want = a.tolist<double>(), bv = b.tolist<double>();
  want.insert(want.end(), bv.begin(), bv.end());
  EXPECT_EQ(c.tolist<double>(), want);
  EXPECT_EQ(ts::cat({ts::empty({0}), a}, 1).sizes(), (ts::Shape{2, 3}));
  EXPECT_EQ(ts::cat({ts::empty({0}), ts::empty({0})}).sizes(), (ts::Shape{0}));
  // A zero-size part along the dim contributes nothing; zero-size in another dim gives an empty result.
  EXPECT_EQ(ts::cat({ts::zeros({0, 3}), a.to(ts::kFloat32)}).tolist<double>(), a.tolist<double>());
  EXPECT_EQ(ts::cat({ts::zeros({2, 0}), ts::zeros({2, 0})}, 0).sizes(), (ts::Shape{4, 0}));
}

TEST(Cat, MetaShapes) {
  ts::Tensor c = ts::cat({meta({2, 3}), meta({2, 5}, ts::kFloat64)}, -1);
  EXPECT_TRUE(c.is_meta());
  EXPECT_EQ(c.sizes(), (ts::Shape{2, 8}));
  EXPECT_EQ(c.dtype(), ts::kFloat64);
  EXPECT_EQ(ts::stack({meta({2, 3}), meta({2, 3})}, 1).sizes(), (ts::Shape{2, 2, 3}));
}

TEST(Cat, Errors) {
  ts::Tensor a = ts::zeros({2, 3}), b = ts::zeros({2, 4});
  expect_error<ts::ShapeError>([&] { ts::cat({a, b}, 0); }, "Sizes of tensors must match except in dimension 0");
  expect_error<ts::ShapeError>([&] { ts::cat({a, ts::zeros({2, 3, 1})}, 0); }, "same number of dimensions");
  expect_error<ts::ShapeError>([&] { ts::cat({a, ts::scalar_tensor(1.0)}, 0); }, "zero-dimensional");
  expect_error<ts::ValueError>([&] { ts::cat({}, 0); }, "non-empty");
  expect_error<ts::DeviceError>([&] { ts::cat({a, meta({2, 3})}, 0); }, "same device");
  expect_error<ts::IndexError>([&] { ts::cat({a, a}, 2); }, "dimension out of range");
  EXPECT_THROW(ts::cat({a, a}, -3), ts::IndexError);
  EXPECT_NO_THROW(ts::cat({a, b}, 1));
}

TEST(Stack, ValuesDimsAndScalars) {
  for (ts::DType dt : {ts::kBool, ts::kInt8, ts::kFloat16, ts::kFloat32}) {
    for (const auto& lay : layouts()) {
      ts::Tensor a = lay.apply(test_data({3, 4}, dt, 5)), b = lay.apply(test_data({3, 4}, dt, 6));
      Host ha = host(a), hb = host(b);
      for (int64_t dim : {0, 1, 2, -1, -3}) {
        const int64_t w = dim < 0 ? dim + 3 : dim;
        ts::Shape so{3, 4};
        so.insert(so.begin() + w, 2);
        Host ref = build(so, [&](const ts::Shape& o) {
          ts::Shape i = o;
          i.erase(i.begin() + w);
          return o[w] == 0 ? at(ha, i) : at(hb, i);
        });
        EXPECT_TRUE(same(ts::stack({a, b}, dim), ref)) << ts::dtype_name(dt) << " " << lay.name << " dim " << dim;
      }
    }
  }
  ts::Tensor s = ts::stack({ts::scalar_tensor(1.5), ts::scalar_tensor(2)});
  EXPECT_EQ(s.sizes(), (ts::Shape{2}));
  EXPECT_EQ(s.dtype(), ts::kFloat32);
  EXPECT_EQ(s.tolist<double>(), (std::vector<double>{1.5, 2}));
  EXPECT_EQ(ts::stack({ts::zeros({0}), ts::zeros({0})}).sizes(), (ts::Shape{2, 0}));
}

TEST(Stack, Errors) {
  expect_error<ts::ShapeError>([] { ts::stack({ts::zeros({2, 3}), ts::zeros({3, 2})}); }, "equal size");
  EXPECT_THROW(ts::stack({}), ts::ValueError);
  EXPECT_THROW(ts::stack({ts::zeros({2}), ts::zeros({2})}, 2), ts::IndexError);
  EXPECT_THROW(ts::stack({ts::zeros({2}), meta({2})}), ts::DeviceError);
}

// ---- pad -------------------------------------------------------------------------------------------
namespace {

// torch.nn.functional.pad on the host: out position o reads input o - left, folded back by `mode`.
Host ref_pad(const Host& x, const std::vector<int64_t>& pad, const std::string& mode, double value) {
  const int64_t nd = static_cast<int64_t>(x.sizes.size()), k = static_cast<int64_t>(pad.size()) / 2;
  ts::Shape so = x.sizes;
  std::vector<int64_t> left(nd, 0);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t d = nd - 1 - j;
    left[d] = pad[2 * j];
    so[d] += pad[2 * j] + pad[2 * j + 1];
  }
  return build(so, [&](const ts::Shape& o) {
    ts::Shape i = o;
    for (int64_t d = 0; d < nd; ++d) {
      int64_t p = o[d] - left[d];
      const int64_t s = x.sizes[d];
      if (mode == "constant") {
        if (p < 0 || p >= s) return value;
      } else if (mode == "reflect") {
        if (p < 0) p = -p;
        if (p >= s) p = 2 * (s - 1) - p;
      } else if (mode == "replicate") {
        p = std::clamp<int64_t>(p, 0, s - 1);
      } else {
        p = ((p % s) + s) % s;
      }
      i[d] = p;
    }
    return at(x, i);
  });
}

}  // namespace

TEST(Pad, ConstantAllDtypesWithCrop) {
  const std::vector<std::vector<int64_t>> pads = {{1, 2}, {0, 0, 2, 1}, {-1, 2, 1, -1}, {1, 1, 0, 2, 1, 0}, {-2, -1}};
  for (ts::DType dt : all_dtypes()) {
    for (const auto& lay : layouts()) {
      ts::Tensor x = lay.apply(test_data({2, 3, 4}, dt, 7));
      for (const auto& p : pads) {
        const double value = dt == ts::kBool ? 1 : (dt == ts::kUInt8 ? 3 : -2.5);
        ts::Tensor out = ts::pad(x, p, "constant", value);
        Host ref = ref_pad(host(x), p, "constant", host(ts::full({}, value, dt)).v[0]);
        EXPECT_TRUE(same(out, ref)) << ts::dtype_name(dt) << " " << lay.name << " pad " << ::testing::PrintToString(p);
        EXPECT_EQ(out.dtype(), dt);
      }
    }
  }
  // 0-dim with no padding, zero-size input padded, cropping to nothing.
  EXPECT_EQ(ts::pad(ts::scalar_tensor(3.0), {}).item<double>(), 3.0);
  EXPECT_EQ(ts::pad(ts::zeros({0, 2}), {1, 1, 1, 0}, "constant", 4).tolist<double>(), (std::vector<double>(4, 4.0)));
  EXPECT_EQ(ts::pad(ts::ones({2, 3}), {-2, -1}).sizes(), (ts::Shape{2, 0}));
}

TEST(Pad, ReflectReplicateCircular) {
  struct Case {
    ts::Shape sizes;
    std::vector<int64_t> pad;
  };
  const std::vector<Case> cases = {
      {{2, 5}, {2, 3}},              // 1-D pad, unbatched
      {{2, 3, 5}, {4, 1}},           // 1-D pad, batched
      {{2, 3, 4}, {1, 2, 2, 1}},     // 2-D pad, unbatched
      {{1, 2, 3, 4}, {3, 0, 0, 2}},  // 2-D pad, batched
      {{2, 3, 4, 5}, {1, 1, 2, 0, 1, 2}},  // 3-D pad, unbatched
      {{1, 2, 3, 3, 4}, {1, 2, 1, 1, 2, 1}},  // 3-D pad, batched
      {{2, 6}, {-1, 2}},             // negative pads crop
  };
  for (const std::string mode : {"reflect", "replicate", "circular"}) {
    for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kInt64, ts::kUInt8}) {
      for (const auto& lay : layouts()) {
        for (const auto& c : cases) {
          ts::Tensor x = lay.apply(test_data(c.sizes, dt, 8));
          EXPECT_TRUE(same(ts::pad(x, c.pad, mode), ref_pad(host(x), c.pad, mode, 0)))
              << mode << " " << ts::dtype_name(dt) << " " << lay.name << " " << ::testing::PrintToString(c.sizes);
        }
      }
    }
  }
  // Zero batch is allowed.
  EXPECT_EQ(ts::pad(ts::zeros({0, 2, 3}), {1, 1}, "reflect").sizes(), (ts::Shape{0, 2, 5}));
  ts::Tensor m = ts::pad(meta({2, 3, 4, 5}), {1, 2, 3, 3}, "reflect");
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.sizes(), (ts::Shape{2, 3, 10, 8}));
  EXPECT_EQ(ts::pad(meta({2, 3}), {1, 1, -1, 0}, "constant", 2).sizes(), (ts::Shape{1, 5}));
}

TEST(Pad, Errors) {
  ts::Tensor x = ts::zeros({1, 2, 3});
  expect_error<ts::ValueError>([&] { ts::pad(x, {1, 1}, "mirror"); }, "mirror");
  expect_error<ts::ValueError>([&] { ts::pad(x, {1, 1, 1}); }, "divisible by 2");
  expect_error<ts::ValueError>([&] { ts::pad(x, {1, 1, 1, 1, 1, 1, 1, 1}); }, "padding length");
  expect_error<ts::ValueError>([&] { ts::pad(x, {3, 0}, "reflect"); }, "padding (3, 0) at dimension 2");
  EXPECT_NO_THROW(ts::pad(x, {2, 2}, "reflect"));
  EXPECT_THROW(ts::pad(x, {4, 0}, "circular"), ts::ValueError);
  expect_error<ts::ShapeError>([&] { ts::pad(x, {-2, -2}); }, "negative output size");
  // reflect/replicate need a (k+1)-D or (k+2)-D input for k padded dims.
  EXPECT_THROW(ts::pad(ts::zeros({3}), {1, 1}, "replicate"), ts::NotImplementedError);
  EXPECT_THROW(ts::pad(ts::zeros({1, 1, 1, 3}), {1, 1}, "reflect"), ts::NotImplementedError);
  EXPECT_THROW(ts::pad(ts::zeros({2, 0}), {1, 1}, "replicate"), ts::ShapeError);
}

// ---- flip / roll -----------------------------------------------------------------------------------
TEST(Flip, ValuesDtypesLayouts) {
  const std::vector<ts::Shape> dim_sets = {{0}, {-1}, {0, 2}, {1, -1, 0}, {}};
  for (ts::DType dt : all_dtypes()) {
    for (const auto& lay : layouts()) {
      ts::Tensor x = lay.apply(test_data({2, 3, 4}, dt, 9));
      Host hx = host(x);
      for (const auto& dims : dim_sets) {
        Host ref = build(x.sizes(), [&](const ts::Shape& o) {
          ts::Shape i = o;
          for (int64_t d : dims) {
            const int64_t w = d < 0 ? d + 3 : d;
            i[w] = x.sizes()[w] - 1 - o[w];
          }
          return at(hx, i);
        });
        EXPECT_TRUE(same(ts::flip(x, dims), ref)) << ts::dtype_name(dt) << " " << lay.name;
        EXPECT_TRUE(same(x.flip(dims), ref));
      }
    }
  }
  EXPECT_EQ(ts::flip(ts::scalar_tensor(5), {0}).item<int64_t>(), 5);
  EXPECT_EQ(ts::flip(ts::zeros({0, 3}), {0, 1}).sizes(), (ts::Shape{0, 3}));
  EXPECT_EQ(ts::flip(meta({2, 3}), {1}).sizes(), (ts::Shape{2, 3}));
}

TEST(Flip, Errors) {
  EXPECT_THROW(ts::flip(ts::zeros({2, 3}), {2}), ts::IndexError);
  expect_error<ts::ShapeError>([] { ts::flip(ts::zeros({2, 3}), {1, -1}); }, "multiple times");
}

TEST(Roll, ValuesWithAndWithoutDims) {
  struct Case {
    ts::Shape shifts, dims;
  };
  const std::vector<Case> cases = {{{1}, {0}}, {{-2}, {-1}}, {{7, -5}, {1, 2}}, {{1, 2}, {2, 2}}, {{0}, {1}}};
  for (ts::DType dt : {ts::kBool, ts::kUInt8, ts::kInt32, ts::kFloat16, ts::kFloat64}) {
    for (const auto& lay : layouts()) {
      ts::Tensor x = lay.apply(test_data({2, 3, 4}, dt, 10));
      Host hx = host(x);
      for (const auto& c : cases) {
        Host ref = build(x.sizes(), [&](const ts::Shape& o) {
          ts::Shape i = o;
          for (size_t j = 0; j < c.dims.size(); ++j) {
            const int64_t w = c.dims[j] < 0 ? c.dims[j] + 3 : c.dims[j];
            const int64_t s = x.sizes()[w];
            i[w] = (((i[w] - c.shifts[j]) % s) + s) % s;
          }
          return at(hx, i);
        });
        EXPECT_TRUE(same(ts::roll(x, c.shifts, c.dims), ref)) << ts::dtype_name(dt) << " " << lay.name;
      }
      // Without dims: the flattened tensor rolls, then takes x's shape back.
      for (int64_t shift : {1, -3, 25}) {
        const int64_t n = x.numel();
        Host ref{x.sizes(), std::vector<double>(n)};
        for (int64_t i = 0; i < n; ++i) ref.v[i] = hx.v[(((i - shift) % n) + n) % n];
        EXPECT_TRUE(same(x.roll({shift}), ref)) << lay.name << " shift " << shift;
      }
    }
  }
  EXPECT_EQ(ts::roll(ts::scalar_tensor(2.0), {3}).item<double>(), 2.0);
  EXPECT_EQ(ts::roll(ts::zeros({0, 2}), {1}, {1}).sizes(), (ts::Shape{0, 2}));
}

TEST(Roll, Errors) {
  ts::Tensor x = ts::zeros({2, 3});
  EXPECT_THROW(ts::roll(x, {1, 2}), ts::ShapeError);
  EXPECT_THROW(ts::roll(x, {1, 2}, {0}), ts::ShapeError);
  EXPECT_THROW(ts::roll(x, {1}, {2}), ts::IndexError);
}

// ---- repeat / repeat_interleave ------------------------------------------------------------------
TEST(Repeat, ValuesAndLeadingDims) {
  const std::vector<ts::Shape> reps = {{1, 1}, {2, 3}, {3, 1, 2}, {2, 1, 1, 2}, {0, 2}};
  for (ts::DType dt : all_dtypes()) {
    for (const auto& lay : layouts()) {
      ts::Tensor x = lay.apply(test_data({2, 3}, dt, 11));
      Host hx = host(x);
      for (const auto& r : reps) {
        const int64_t lead = static_cast<int64_t>(r.size()) - 2;
        ts::Shape so = r;
        so[lead] *= 2;
        so[lead + 1] *= 3;
        Host ref = build(so, [&](const ts::Shape& o) { return at(hx, {o[lead] % 2, o[lead + 1] % 3}); });
        EXPECT_TRUE(same(x.repeat(r), ref)) << ts::dtype_name(dt) << " " << lay.name << " "
                                            << ::testing::PrintToString(r);
      }
    }
  }
  EXPECT_EQ(ts::repeat(ts::scalar_tensor(4), {3}).tolist<int64_t>(), (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(ts::repeat(ts::scalar_tensor(4), {}).sizes(), (ts::Shape{}));
  EXPECT_EQ(ts::repeat(meta({2, 3}), {2, 2, 2}).sizes(), (ts::Shape{2, 4, 6}));
}

TEST(Repeat, Errors) {
  expect_error<ts::ShapeError>([] { ts::repeat(ts::zeros({2, 3}), {2}); }, "can not be smaller");
  EXPECT_THROW(ts::repeat(ts::zeros({2, 3}), {2, -1}), ts::ShapeError);
}

TEST(RepeatInterleave, IntAndTensorRepeats) {
  for (ts::DType dt : {ts::kBool, ts::kInt8, ts::kInt64, ts::kBFloat16, ts::kFloat32}) {
    for (const auto& lay : layouts()) {
      ts::Tensor x = lay.apply(test_data({3, 4}, dt, 12));
      Host hx = host(x);
      // Int repeats along each dim, and flattened.
      for (int64_t r : {0, 1, 3}) {
        for (int64_t dim : {0, 1, -1}) {
          const int64_t w = dim < 0 ? dim + 2 : dim;
          ts::Shape so = x.sizes();
          so[w] *= r;
          Host ref = build(so, [&](const ts::Shape& o) {
            ts::Shape i = o;
            i[w] /= r;
            return at(hx, i);
          });
          EXPECT_TRUE(same(ts::repeat_interleave(x, r, dim), ref)) << ts::dtype_name(dt) << " " << lay.name;
        }
        Host flat{{12 * r}, {}};
        for (double v : hx.v) flat.v.insert(flat.v.end(), r, v);
        EXPECT_TRUE(same(x.repeat_interleave(r), flat));
      }
      // Tensor repeats: one count per slice along the dim, or one count for all.
      ts::Tensor counts = ts::tensor(std::vector<int64_t>{2, 0, 1, 3});
      Host ref_dim1 = build({3, 6}, [&](const ts::Shape& o) {
        static const int64_t src[6] = {0, 0, 2, 3, 3, 3};
        return at(hx, {o[0], src[o[1]]});
      });
      EXPECT_TRUE(same(ts::repeat_interleave(x, counts, 1), ref_dim1)) << lay.name;
      EXPECT_TRUE(same(ts::repeat_interleave(x, counts.to(ts::kInt32), -1), ref_dim1));
      EXPECT_TRUE(same(ts::repeat_interleave(x, ts::scalar_tensor(2), 0), host(ts::repeat_interleave(x, 2, 0))));
      std::vector<int64_t> flat_counts(12);
      Host flat{{0}, {}};
      for (int64_t i = 0; i < 12; ++i) {
        flat_counts[i] = i % 3;
        flat.v.insert(flat.v.end(), i % 3, hx.v[i]);
      }
      flat.sizes = {static_cast<int64_t>(flat.v.size())};
      EXPECT_TRUE(same(ts::repeat_interleave(x, ts::tensor(flat_counts)), flat));
    }
  }
  EXPECT_EQ(ts::repeat_interleave(ts::scalar_tensor(3), 2).tolist<int64_t>(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(ts::repeat_interleave(meta({2, 3}), 2, 1).sizes(), (ts::Shape{2, 6}));
}

TEST(RepeatInterleave, Errors) {
  ts::Tensor x = ts::zeros({3, 4});
  EXPECT_THROW(ts::repeat_interleave(x, -1, 0), ts::ValueError);
  expect_error<ts::ShapeError>([&] { ts::repeat_interleave(x, ts::tensor(std::vector<int64_t>{1, 2}), 0); },
                               "same size as input along dim");
  EXPECT_THROW(ts::repeat_interleave(x, ts::tensor(std::vector<int64_t>{1, -2, 1}), 0), ts::ValueError);
  EXPECT_THROW(ts::repeat_interleave(x, ts::tensor({1.0, 2.0, 1.0}), 0), ts::DTypeError);
  EXPECT_THROW(ts::repeat_interleave(x, ts::ones({3, 1}, ts::kInt64), 0), ts::ShapeError);
  EXPECT_THROW(ts::repeat_interleave(x, 2, 2), ts::IndexError);
  EXPECT_THROW(ts::repeat_interleave(ts::scalar_tensor(1), 2, 0), ts::IndexError);
  EXPECT_THROW(ts::repeat_interleave(meta({3}), ts::tensor(std::vector<int64_t>{1, 2, 1}), 0), ts::DeviceError);
  EXPECT_THROW(ts::repeat_interleave(meta({3}), ts::ones({3}, {ts::kInt64, ts::Device::meta()}), 0),
               ts::NotImplementedError);
}

// ---- tril / triu ---------------------------------------------------------------------------------
TEST(TrilTriu, ValuesBatchedAnyDiagonal) {
  for (ts::DType dt : all_dtypes()) {
    for (const auto& lay : layouts()) {
      for (const ts::Shape& s : {ts::Shape{4, 5}, ts::Shape{2, 3, 5, 4}, ts::Shape{1, 1}}) {
        ts::Tensor x = lay.apply(test_data(s, dt, 13));
        Host hx = host(x);
        const int64_t nd = static_cast<int64_t>(s.size());
        for (int64_t diag : {-100, -3, -1, 0, 1, 2, 4, 100}) {
          Host lo = build(s, [&](const ts::Shape& o) { return o[nd - 1] - o[nd - 2] <= diag ? at(hx, o) : 0.0; });
          Host up = build(s, [&](const ts::Shape& o) { return o[nd - 1] - o[nd - 2] >= diag ? at(hx, o) : 0.0; });
          EXPECT_TRUE(same(ts::tril(x, diag), lo)) << ts::dtype_name(dt) << " " << lay.name << " " << diag;
          EXPECT_TRUE(same(x.triu(diag), up)) << ts::dtype_name(dt) << " " << lay.name << " " << diag;
        }
      }
    }
  }
  EXPECT_EQ(ts::tril(ts::zeros({0, 3})).sizes(), (ts::Shape{0, 3}));
  EXPECT_EQ(ts::triu(meta({2, 4, 4}), 1).sizes(), (ts::Shape{2, 4, 4}));
  EXPECT_EQ(ts::tril(ts::ones({3, 3}), INT64_MAX).tolist<double>(), std::vector<double>(9, 1.0));
  EXPECT_EQ(ts::triu(ts::ones({3, 3}), INT64_MIN).tolist<double>(), std::vector<double>(9, 1.0));
}

TEST(TrilTriu, Errors) {
  expect_error<ts::ShapeError>([] { ts::tril(ts::zeros({3})); }, "at least 2 dimensions");
  EXPECT_THROW(ts::triu(ts::scalar_tensor(1.0)), ts::ShapeError);
}
