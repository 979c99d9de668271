// The foreach ops on the CPU: _foreach_norm against norm() of float64 copies for ord 1, 2, inf (the
// kernel) and 3, 0 (the composite), over lists mixing float32, float64, bfloat16 and float16, sizes
// around the 65536-element work item, empty and 0-dim tensors, strided inputs; NaN and inf
// propagation; the internal stacked form; autograd's fallback; meta tensors; every error.
// _foreach_mul_: values (one rounding of the float or double product), scalars of each dtype and
// shape, versions, strided tensors, a scalar aliasing a tensor, tensors sharing memory, autograd,
// errors.
#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "ops/foreach_ops.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::vector<ts::DType> kDtypes = {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16};

// A list of mixed dtypes and sizes: 0-dim, empty, one element, 2-D, and around the work-item size.
std::vector<ts::Tensor> mixed_list(uint64_t seed) {
  const std::vector<ts::Shape> shapes = {{}, {0}, {1}, {7, 13}, {65535}, {65536}, {65537}, {3, 0, 4}, {200003}, {5}};
  std::vector<ts::Tensor> list;
  for (size_t i = 0; i < shapes.size(); ++i)
    list.push_back(test_data(shapes[i], kDtypes[i % kDtypes.size()], seed + i, -3, 3));
  return list;
}

// The tolerance of a norm in `dt`: the dtype's, widened for float32 where the composite sums in float.
Tolerance norm_tol(ts::DType dt) {
  Tolerance t = tolerance_for(dt);
  if (dt == ts::kFloat32) t.rtol = 1e-5;
  return t;
}

void expect_norms_match(const std::vector<ts::Tensor>& list, double ord) {
  std::vector<ts::Tensor> r = ts::_foreach_norm(list, ord);
  ASSERT_EQ(r.size(), list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "ord " << ord << ", tensor " << i << " " << ts::dtype_name(list[i].dtype())
                                      << " of " << list[i].numel() << " elements");
    EXPECT_EQ(r[i].dim(), 0);
    EXPECT_EQ(r[i].dtype(), list[i].dtype());
    EXPECT_TRUE(all_close(r[i], ts::norm(list[i].to(ts::kFloat64), ord), norm_tol(list[i].dtype())));
  }
}

TEST(ForeachNorm, MatchesFloat64ReferenceEveryOrd) {
  const std::vector<ts::Tensor> list = mixed_list(10);
  for (double ord : {1.0, 2.0, kInf, 3.0, 0.0, 0.5}) expect_norms_match(list, ord);
}

TEST(ForeachNorm, SingleDtypeAndDefaultOrd) {
  for (ts::DType dt : kDtypes) {
    std::vector<ts::Tensor> list = {test_data({300}, dt, 1), test_data({70000}, dt, 2), test_data({2, 3}, dt, 3)};
    std::vector<ts::Tensor> r = ts::_foreach_norm(list);
    for (size_t i = 0; i < list.size(); ++i)
      EXPECT_TRUE(all_close(r[i], ts::norm(list[i].to(ts::kFloat64)), norm_tol(dt))) << ts::dtype_name(dt);
  }
}

TEST(ForeachNorm, ByHand) {
  std::vector<ts::Tensor> r = ts::_foreach_norm({ts::tensor({3.0, -4.0}), ts::tensor({-1.0, 2.0, -7.0}, ts::kFloat64)});
  EXPECT_EQ(r[0].item<float>(), 5.0f);
  EXPECT_EQ(r[1].item<double>(), std::sqrt(54.0));
  r = ts::_foreach_norm({ts::tensor({3.0, -4.0}), ts::tensor({-1.0, 2.0, -7.0}, ts::kFloat64)}, 1);
  EXPECT_EQ(r[0].item<float>(), 7.0f);
  EXPECT_EQ(r[1].item<double>(), 10.0);
  r = ts::_foreach_norm({ts::tensor({3.0, -4.0}), ts::tensor({-1.0, 2.0, -7.0}, ts::kFloat64)}, kInf);
  EXPECT_EQ(r[0].item<float>(), 4.0f);
  EXPECT_EQ(r[1].item<double>(), 7.0);
}

TEST(ForeachNorm, EmptyListAndEmptyTensors) {
  EXPECT_TRUE(ts::_foreach_norm({}).empty());
  EXPECT_TRUE(ts::_foreach_norm({}, kInf).empty());
  {  // the recording path (norm() per tensor) gives an empty tensor's inf norm as 0 too
    ts::Tensor e = ts::empty({0, 3}).requires_grad_();
    std::vector<ts::Tensor> r = ts::_foreach_norm({e, ts::ones({2}).requires_grad_()}, kInf);
    EXPECT_EQ(r[0].item<double>(), 0.0);
    EXPECT_EQ(r[1].item<double>(), 1.0);
    EXPECT_TRUE(r[1].requires_grad());
  }
  for (double ord : {1.0, 2.0, kInf, 3.0, 0.0}) {
    std::vector<ts::Tensor> list;
    for (ts::DType dt : kDtypes) list.push_back(ts::empty({0, 5}, dt));
    std::vector<ts::Tensor> r = ts::_foreach_norm(list, ord);
    for (size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(r[i].dtype(), list[i].dtype());
      EXPECT_EQ(r[i].item<double>(), 0.0) << "ord " << ord;
    }
  }
}

TEST(ForeachNorm, NaNAndInfPropagate) {
  // In a multi-item tensor: NaN before inf, inf before NaN, inf alone, -inf; and in a small one.
  struct Case {
    std::vector<std::pair<int64_t, double>> at;
    double expect;  // for every ord
  };
  const std::vector<Case> cases = {{{{10, kNaN}, {150000, kInf}}, kNaN},
                                   {{{10, kInf}, {150000, kNaN}}, kNaN},
                                   {{{140000, kInf}}, kInf},
                                   {{{70000, -kInf}}, kInf},
                                   {{{199999, kNaN}}, kNaN}};
  for (ts::DType dt : kDtypes) {
    for (const Case& c : cases) {
      ts::Tensor big = test_data({200000}, dt, 4);
      ts::Tensor small = test_data({5}, dt, 5);
      for (auto [i, v] : c.at) big.narrow(0, i, 1).fill_(v);
      small.narrow(0, 2, 1).fill_(c.expect);
      for (double ord : {1.0, 2.0, kInf}) {
        std::vector<ts::Tensor> r = ts::_foreach_norm({test_data({9}, dt, 6), big, small}, ord);
        const double a = r[1].item<double>(), b = r[2].item<double>();
        if (std::isnan(c.expect)) {
          EXPECT_TRUE(std::isnan(a)) << ts::dtype_name(dt) << " ord " << ord << ": " << a;
          EXPECT_TRUE(std::isnan(b)) << ts::dtype_name(dt) << " ord " << ord << ": " << b;
        } else {
          EXPECT_EQ(a, kInf) << ts::dtype_name(dt) << " ord " << ord;
          EXPECT_EQ(b, kInf) << ts::dtype_name(dt) << " ord " << ord;
        }
        EXPECT_TRUE(std::isfinite(r[0].item<double>()));
      }
    }
  }
}

TEST(ForeachNorm, StridedInputs) {
  for (const Layout& layout : layouts()) {
    SCOPED_TRACE(layout.name);
    std::vector<ts::Tensor> list;
    for (size_t i = 0; i < kDtypes.size(); ++i) list.push_back(layout.apply(test_data({300, 257}, kDtypes[i], 20 + i)));
    list.push_back(layout.apply(test_data({3, 4}, ts::kFloat32, 30)));
    for (double ord : {1.0, 2.0, kInf, 3.0}) expect_norms_match(list, ord);
  }
}

TEST(ForeachNorm, StackedForm) {
  const std::vector<ts::Tensor> list = mixed_list(40);
  for (double ord : {1.0, 2.0, kInf, 3.0}) {
    for (ts::DType acc : {ts::kFloat32, ts::kFloat64}) {
      ts::Tensor s = ts::foreach_norm_stacked(list, ord, acc);
      ASSERT_EQ(s.sizes(), ts::Shape{static_cast<int64_t>(list.size())});
      EXPECT_EQ(s.dtype(), acc);
      for (size_t i = 0; i < list.size(); ++i) {
        // Not rounded to the tensor's dtype: float32 accuracy for the 16-bit tensors.
        const Tolerance tol = list[i].dtype() == ts::kFloat64 && acc == ts::kFloat64 ? Tolerance{1e-12, 0}
                                                                                     : Tolerance{1e-5, 1e-6};
        EXPECT_TRUE(all_close(s.select(0, static_cast<int64_t>(i)), ts::norm(list[i].to(ts::kFloat64), ord), tol))
            << "ord " << ord << " acc " << ts::dtype_name(acc) << " tensor " << i;
      }
    }
  }
  EXPECT_EQ(ts::foreach_norm_stacked({}, 2, ts::kFloat32).numel(), 0);
  EXPECT_THROW(ts::foreach_norm_stacked(list, 2, ts::kFloat16), ts::DTypeError);
}

TEST(ForeachNorm, ResultsAreIndependentZeroDimTensors) {
  std::vector<ts::Tensor> r = ts::_foreach_norm({ts::full({4}, 1.0), ts::full({9}, 1.0), ts::full({16}, 1.0)});
  EXPECT_EQ(r[0].item<float>(), 2.0f);
  EXPECT_EQ(r[1].item<float>(), 3.0f);
  EXPECT_EQ(r[2].item<float>(), 4.0f);
  r[1].fill_(-1.0);
  EXPECT_EQ(r[0].item<float>(), 2.0f);
  EXPECT_EQ(r[2].item<float>(), 4.0f);
}

TEST(ForeachNorm, AutogradFallsBackToNorm) {
  ts::Tensor x = test_data({4, 5}, ts::kFloat64, 50).requires_grad_();
  ts::Tensor y = test_data({6}, ts::kFloat64, 51).requires_grad_();
  std::vector<ts::Tensor> r = ts::_foreach_norm({x, y}, 2);
  ASSERT_TRUE(r[0].requires_grad());
  (r[0] + r[1]).backward();
  EXPECT_TRUE(all_close(x.grad(), x.detach() / ts::norm(x.detach()), {1e-12, 1e-12}));
  EXPECT_TRUE(all_close(y.grad(), y.detach() / ts::norm(y.detach()), {1e-12, 1e-12}));
  ts::NoGradGuard no_grad;
  r = ts::_foreach_norm({x, y}, 2);
  EXPECT_FALSE(r[0].requires_grad());
  EXPECT_TRUE(all_close(r[0], ts::norm(x.detach()), {1e-12, 1e-12}));
}

TEST(ForeachNorm, MetaTensors) {
  std::vector<ts::Tensor> r = ts::_foreach_norm({ts::empty({3, 4}, ts::Device::meta()),
                                                 ts::empty({5}, ts::TensorOptions(ts::kBFloat16, ts::Device::meta()))});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].device().is_meta());
  EXPECT_EQ(r[0].dim(), 0);
  EXPECT_EQ(r[1].dtype(), ts::kBFloat16);
}

TEST(ForeachNorm, Errors) {
  const ts::Tensor a = ts::ones({3});
  std::string m = message_of<ts::ValueError>([&] { ts::_foreach_norm({a, ts::Tensor()}); });
  EXPECT_NE(m.find("_foreach_norm"), std::string::npos) << m;
  EXPECT_NE(m.find("tensors[1]"), std::string::npos) << m;
  m = message_of<ts::DTypeError>([&] { ts::_foreach_norm({a, ts::ones({2}, ts::kInt64)}); });
  EXPECT_NE(m.find("_foreach_norm"), std::string::npos) << m;
  EXPECT_NE(m.find("int64"), std::string::npos) << m;
  m = message_of<ts::DeviceError>([&] { ts::_foreach_norm({a, ts::empty({3}, ts::Device::meta())}); });
  EXPECT_NE(m.find("_foreach_norm"), std::string::npos) << m;
  EXPECT_NE(m.find("cpu"), std::string::npos) << m;
  EXPECT_NE(m.find("meta"), std::string::npos) << m;
  m = message_of<ts::ValueError>([&] { ts::_foreach_norm({a}, -1); });
  EXPECT_NE(m.find("_foreach_norm"), std::string::npos) << m;
  EXPECT_NE(m.find("-1"), std::string::npos) << m;
  EXPECT_THROW(ts::_foreach_norm({a}, -kInf), ts::ValueError);
  EXPECT_THROW(ts::_foreach_norm({a}, kNaN), ts::ValueError);
  EXPECT_THROW(ts::_foreach_norm({ts::Tensor()}), ts::ValueError);
}

// ---- _foreach_mul_ ---------------------------------------------------------------------------------

// x * s as the kernels compute it: in float (double for float64), rounded once to x's dtype.
ts::Tensor expected_product(const ts::Tensor& x, const ts::Tensor& s) {
  if (x.dtype() == ts::kFloat64) return x * s.to(ts::kFloat64).reshape({});
  return (x.to(ts::kFloat32) * s.to(ts::kFloat32).reshape({})).to(x.dtype());
}

TEST(ForeachMul, ValuesAndVersions) {
  for (ts::DType sdt : kDtypes) {
    for (const ts::Shape& sshape : {ts::Shape{}, ts::Shape{1}, ts::Shape{1, 1}}) {
      const ts::Tensor s = ts::full(sshape, 0.3, sdt);
      std::vector<ts::Tensor> list = mixed_list(60), before;
      std::vector<uint64_t> versions;
      for (const ts::Tensor& t : list) {
        before.push_back(t.clone());
        versions.push_back(t.version());
      }
      ts::_foreach_mul_(list, s);
      for (size_t i = 0; i < list.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "scalar " << ts::dtype_name(sdt) << ", tensor " << i << " "
                                          << ts::dtype_name(list[i].dtype()));
        EXPECT_TRUE(all_close(list[i], expected_product(before[i], s), {0, 0}));
        EXPECT_GT(list[i].version(), versions[i]);
      }
    }
  }
}

TEST(ForeachMul, ScalarOneAndSpecialValues) {
  std::vector<ts::Tensor> list = mixed_list(70), before;
  for (const ts::Tensor& t : list) before.push_back(t.clone());
  const uint64_t v0 = list[3].version();
  ts::_foreach_mul_(list, ts::ones({}));
  for (size_t i = 0; i < list.size(); ++i) EXPECT_TRUE(ts::equal(list[i], before[i])) << i;
  EXPECT_GT(list[3].version(), v0);
  ts::Tensor x = ts::tensor({1.0, -2.0, kInf, 0.0});
  ts::_foreach_mul_({x}, ts::full({}, kNaN));
  for (double v : x.tolist<double>()) EXPECT_TRUE(std::isnan(v));
  ts::Tensor y = ts::tensor({1.0, -2.0, 0.0});
  ts::_foreach_mul_({y}, ts::full({}, kInf));
  const std::vector<double> yv = y.tolist<double>();
  EXPECT_EQ(yv[0], kInf);
  EXPECT_EQ(yv[1], -kInf);
  EXPECT_TRUE(std::isnan(yv[2]));
  ts::_foreach_mul_({}, ts::ones({}));  // nothing to do
}

TEST(ForeachMul, StridedTensorsAndAliasedScalar) {
  for (const Layout& layout : layouts()) {
    ts::Tensor x = layout.apply(test_data({40, 33}, ts::kFloat32, 80));
    ts::Tensor y = test_data({100}, ts::kBFloat16, 81);
    ts::Tensor ex = expected_product(x, ts::full({}, 2.5)), ey = expected_product(y, ts::full({}, 2.5));
    const uint64_t vx = x.version();
    ts::_foreach_mul_({x, y}, ts::full({1}, 2.5));
    EXPECT_TRUE(all_close(x, ex, {0, 0})) << layout.name;
    EXPECT_TRUE(all_close(y, ey, {0, 0})) << layout.name;
    EXPECT_GT(x.version(), vx);
  }
  // The scalar is an element of a tensor being scaled: every element sees the value before the call.
  ts::Tensor a = test_data({200000}, ts::kFloat32, 82);
  a.narrow(0, 0, 1).fill_(3.0);
  ts::Tensor expect = a * 3.0;
  ts::_foreach_mul_({a}, a.narrow(0, 0, 1));
  EXPECT_TRUE(all_close(a, expect, {0, 0}));
  // ... also when the tensor holding it goes through mul_ (strided) before the others.
  ts::Tensor m = test_data({30, 20}, ts::kFloat32, 86);
  m.narrow(0, 0, 1).narrow(1, 0, 1).fill_(-2.0);
  ts::Tensor b = test_data({100}, ts::kFloat32, 87);
  ts::Tensor em = m * -2.0, eb = b * -2.0;
  ts::_foreach_mul_({m.t(), b}, m.narrow(0, 0, 1).narrow(1, 0, 1));
  EXPECT_TRUE(all_close(m, em, {0, 0}));
  EXPECT_TRUE(all_close(b, eb, {0, 0}));
}

TEST(ForeachMul, SharedMemoryInTheList) {
  // A tensor listed twice is scaled twice, as a loop of mul_ would.
  ts::Tensor a = test_data({70000}, ts::kFloat32, 83);
  ts::Tensor twice = expected_product(expected_product(a, ts::full({}, 0.3)), ts::full({}, 0.3));
  ts::_foreach_mul_({a, a}, ts::full({}, 0.3));
  EXPECT_TRUE(all_close(a, twice, {0, 0}));
  // Views side by side in one buffer are scaled once each; overlapping ones twice where they overlap.
  ts::Tensor buf = test_data({1000}, ts::kFloat64, 84);
  ts::Tensor expect = buf.clone();
  expect.narrow(0, 0, 600).mul_(2.0);
  expect.narrow(0, 500, 500).mul_(2.0);
  ts::_foreach_mul_({buf.narrow(0, 0, 600), buf.narrow(0, 500, 500)}, ts::full({}, 2.0));
  EXPECT_TRUE(all_close(buf, expect, {0, 0}));
  ts::Tensor buf2 = test_data({1000}, ts::kFloat64, 85);
  ts::Tensor expect2 = buf2 * 2.0;
  ts::_foreach_mul_({buf2.narrow(0, 400, 600), buf2.narrow(0, 0, 400)}, ts::full({}, 2.0));
  EXPECT_TRUE(all_close(buf2, expect2, {0, 0}));
}

TEST(ForeachMul, Autograd) {
  ts::Tensor x = test_data({5}, ts::kFloat64, 90).requires_grad_();
  ts::Tensor y = x * 1.0;
  ts::_foreach_mul_({y}, ts::full({}, 3.0, ts::kFloat64));
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_TRUE(all_close(x.grad(), ts::full({5}, 3.0, ts::kFloat64), {0, 0}));
  // A leaf that requires grad may not be scaled in place under grad mode, as with mul_.
  EXPECT_THROW(ts::_foreach_mul_({x}, ts::full({}, 3.0, ts::kFloat64)), ts::Error);
  {
    ts::NoGradGuard no_grad;
    ts::Tensor before = x.detach().clone();
    ts::_foreach_mul_({x}, ts::full({}, 2.0, ts::kFloat64));
    EXPECT_TRUE(all_close(x.detach(), before * 2.0, {0, 0}));
  }
}

TEST(ForeachMul, Errors) {
  const ts::Tensor a = ts::ones({3});
  const ts::Tensor s = ts::full({}, 2.0);
  std::string m = message_of<ts::ValueError>([&] { ts::_foreach_mul_({a, ts::Tensor()}, s); });
  EXPECT_NE(m.find("_foreach_mul_"), std::string::npos) << m;
  m = message_of<ts::ValueError>([&] { ts::_foreach_mul_({a}, ts::Tensor()); });
  EXPECT_NE(m.find("_foreach_mul_"), std::string::npos) << m;
  m = message_of<ts::ShapeError>([&] { ts::_foreach_mul_({a}, ts::ones({2})); });
  EXPECT_NE(m.find("_foreach_mul_"), std::string::npos) << m;
  EXPECT_NE(m.find("[2]"), std::string::npos) << m;
  m = message_of<ts::DTypeError>([&] { ts::_foreach_mul_({a}, ts::ones({}, ts::kInt32)); });
  EXPECT_NE(m.find("_foreach_mul_"), std::string::npos) << m;
  EXPECT_NE(m.find("int32"), std::string::npos) << m;
  m = message_of<ts::DTypeError>([&] { ts::_foreach_mul_({a, ts::ones({2}, ts::kInt64)}, s); });
  EXPECT_NE(m.find("_foreach_mul_"), std::string::npos) << m;
  m = message_of<ts::DeviceError>([&] { ts::_foreach_mul_({a}, ts::empty({}, ts::Device::meta())); });
  EXPECT_NE(m.find("_foreach_mul_"), std::string::npos) << m;
  EXPECT_NE(m.find("meta"), std::string::npos) << m;
  EXPECT_NE(m.find("cpu"), std::string::npos) << m;
  m = message_of<ts::DeviceError>([&] { ts::_foreach_mul_({a, ts::empty({3}, ts::Device::meta())}, s); });
  EXPECT_NE(m.find("_foreach_mul_"), std::string::npos) << m;
  EXPECT_EQ(a.tolist<double>(), (std::vector<double>{1.0, 1.0, 1.0}));  // a failed call changes nothing
}

}  // namespace
