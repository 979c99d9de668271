// Note [Fake data] (src/runtime/fake_data.h): storages without memory and kernels that do not run;
// the joint graph's backward traced over fake data, and traced again for real where a derivative
// reads data on the host.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compile/bitwise.h"
#include "compile/capture.h"
#include "compile/executor.h"
#include "runtime/fake_data.h"
#include "tensor/tensor_impl.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/models.h"

namespace ts = tessera;
namespace tc = tessera::compiler;
using ts::testing::bitwise;

namespace {

TEST(FakeData, TensorsHaveTheirMetadataAndNoDataAndReadingThemRaises) {
  ts::Tensor real = ts::randn({3, 5});
  ts::Tensor y, z;
  {
    ts::detail::FakeDataScope fake;
    y = (real.exp() + 1).t();  // the kernels do not run; the shapes are the ops' own
    z = ts::zeros({4}, ts::kInt64);
  }
  EXPECT_EQ(y.sizes(), (ts::Shape{5, 3}));
  EXPECT_EQ(y.strides(), (ts::Shape{1, 5}));
  EXPECT_EQ(y.dtype(), ts::kFloat32);
  EXPECT_TRUE(y.impl()->storage()->fake());
  EXPECT_EQ(y.impl()->storage()->data(), nullptr);
  EXPECT_TRUE(z.impl()->storage()->fake());
  try {
    (void)y.data_ptr();
    FAIL() << "data_ptr of a fake tensor returned";
  } catch (const ts::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("has no data"), std::string::npos) << e.what();
  }
  EXPECT_THROW(z.sum().item(), ts::ValueError);  // a kernel on fake data outside the scope: the read raises
  EXPECT_FALSE(real.impl()->storage()->fake());
  EXPECT_FALSE(ts::randn({2}).impl()->storage()->fake());  // the scope is closed
}

// An MLP's loss: the joint graph's backward traced over fake data, and the gradients the compiled
// backward then computes equal eager's bitwise.
TEST(FakeData, TheJointBackwardIsTracedWithoutComputingIt) {
  ts::manual_seed(3);
  ts::models::MLP m(16, {32}, 4);
  ts::Tensor x = ts::randn({8, 16});
  ts::Tensor y = ts::randint(0, 4, {8}, ts::kInt64);
  tc::NamedTensors params;
  for (auto& [name, p] : m.named_parameters()) params.emplace_back(name, p);
  auto program = [&] { return std::vector<ts::Tensor>{ts::nn::functional::cross_entropy(m.forward(x), y)}; };
  tc::CaptureResult r = tc::capture_program({x, y}, params, program, /*derive_backward=*/true);
  ASSERT_TRUE(r.complete) << r.stop_reason;
  ASSERT_TRUE(r.has_backward) << r.backward_stop_reason;
  EXPECT_TRUE(r.backward_over_fake_data);
  // No parameter gradient was made by the capture (autograd::grad never writes .grad), and the
  // backward graph, run on the saved values, gives eager's gradients.
  for (auto& [name, p] : params) EXPECT_FALSE(p.grad().defined()) << name;
  std::vector<ts::Tensor> all = tc::execute(r.graph, tc::plan_execution(r.graph), {x, y}, params);
  std::vector<ts::Tensor> saved(all.begin() + r.num_program_outputs, all.end());
  std::vector<ts::Tensor> grads =
      tc::execute(r.backward, tc::plan_execution(r.backward), {ts::ones({})}, {}, saved);
  program()[0].backward();
  size_t k = 0;
  for (size_t i = 0; i < r.diff_inputs.size(); ++i) {
    if (!r.grad_defined[i]) continue;
    const tc::GraphInput& in = r.graph.inputs[r.diff_inputs[i]];
    ASSERT_EQ(in.kind, tc::InputKind::Parameter);
    EXPECT_TRUE(bitwise(grads.at(k++), params[in.index].second.grad())) << params[in.index].first;
  }
  EXPECT_EQ(k, params.size());
}

// A derivative that reads data on the host: the fake pass cannot finish, the real one decides (here:
// a graph break in the backward, as before fake data).
struct ScaleByMax : ts::autograd::Function<ScaleByMax> {
  static ts::Tensor forward(ts::autograd::FunctionContext& ctx, const ts::Tensor& x) { return x * 2; }
  static std::vector<ts::Tensor> backward(ts::autograd::FunctionContext& ctx, const std::vector<ts::Tensor>& g) {
    const double m = g[0].abs().max().item<double>();  // a host read
    return {g[0] * 2.0 + 0.0 * m};
  }
};

TEST(FakeData, ADerivativeThatReadsDataIsTracedForReal) {
  ts::Tensor x = ts::randn({5}).requires_grad_();
  tc::CaptureResult r = tc::capture_program({x}, {}, [&] { return std::vector<ts::Tensor>{ScaleByMax::apply(x).exp()}; },
                                            /*derive_backward=*/true);
  ASSERT_TRUE(r.complete) << r.stop_reason;
  EXPECT_FALSE(r.has_backward);
  EXPECT_FALSE(r.backward_over_fake_data);
  EXPECT_NE(r.backward_stop_reason.find("item()"), std::string::npos) << r.backward_stop_reason;
}

}  // namespace

namespace {

// User code attached to the graph in the forward (a tensor hook, retain_grad): the backward is traced
// for real, so no hook ever sees, or keeps, a fake gradient.
TEST(FakeData, ABackwardWithHooksIsTracedForReal) {
  ts::Tensor x = ts::randn({4}).requires_grad_();
  std::vector<ts::Tensor> seen;
  ts::Tensor h;
  tc::CaptureResult r = tc::capture_program({x}, {}, [&] {
    h = x.exp();
    h.retain_grad();
    h.register_hook([&](const ts::Tensor& g) {
      seen.push_back(g);
      return ts::Tensor();
    });
    return std::vector<ts::Tensor>{(h * 3).sum()};
  }, /*derive_backward=*/true);
  ASSERT_TRUE(r.complete) << r.stop_reason;
  EXPECT_FALSE(r.backward_over_fake_data);
  for (const ts::Tensor& g : seen) EXPECT_FALSE(g.impl()->storage()->fake());
  if (h.grad().defined()) EXPECT_FALSE(h.grad().impl()->storage()->fake());
}

}  // namespace
