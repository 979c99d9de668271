// Mixed precision on CUDA: autocast with float16 (the policy as on the CPU, CPU tensors untouched),
// the fused unscale kernel against the CPU kernel over many gradients of mixed sizes and dtypes
// (empty ones, lists longer than one launch's slots and blocks, an inf or NaN in any one), the scale
// update on the device, and GradScaler training steps (skip on inf, agreement with a float32
// control, state_dict).
#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "ops/amp_ops.h"
#include "tessera/amp.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using namespace tessera::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
ts::Device gpu() { return ts::Device::cuda(); }

TEST(CudaAmp, AutocastFloat16Policy) {
  TS_REQUIRE_GPU();
  ts::Tensor a = test_data({8, 16}, ts::kFloat32, 1).to(gpu()), b = test_data({16, 4}, ts::kFloat32, 2).to(gpu());
  ts::Tensor w = test_data({4, 16}, ts::kFloat32, 3).to(gpu());
  ts::Tensor img = test_data({2, 3, 8, 8}, ts::kFloat32, 4).to(gpu()), k = test_data({4, 3, 3, 3}, ts::kFloat32, 5).to(gpu());
  ts::Tensor target = ts::tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}, {8}).to(gpu());
  ts::Tensor cpu_a = test_data({8, 16}, ts::kFloat32, 1), cpu_b = test_data({16, 4}, ts::kFloat32, 2);
  ts::amp::autocast guard("cuda", ts::kFloat16);
  EXPECT_EQ(ts::mm(a, b).dtype(), ts::kFloat16);
  EXPECT_EQ(ts::linear(a, w).dtype(), ts::kFloat16);
  EXPECT_EQ(ts::conv2d(img, k).dtype(), ts::kFloat16);
  ts::Tensor logits = ts::mm(a, b);
  EXPECT_EQ(ts::softmax(logits, 1).dtype(), ts::kFloat32);
  EXPECT_EQ(F::cross_entropy(logits, target).dtype(), ts::kFloat32);
  EXPECT_EQ(F::layer_norm(logits, {4}).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::cat({logits, b.narrow(0, 0, 8)}).dtype(), ts::kFloat32);
  EXPECT_EQ(ts::mm(cpu_a, cpu_b).dtype(), ts::kFloat32);  // CPU tensors: no CPU autocast open
  // Values: the float16 product of the float16-rounded inputs (to a float16 rounding or two: the
  // summation orders differ).
  EXPECT_TRUE(all_close(ts::mm(a, b).cpu(), ts::mm(cpu_a.to(ts::kFloat16), cpu_b.to(ts::kFloat16)), {2e-3, 2e-3}));
}

TEST(CudaAmp, AutocastGradientsAndCache) {
  TS_REQUIRE_GPU();
  ts::Tensor w = test_data({4, 16}, ts::kFloat32, 3).to(gpu()).requires_grad_();
  ts::Tensor x = test_data({8, 16}, ts::kFloat32, 1).to(gpu());
  ts::Tensor loss;
  {
    ts::amp::autocast guard("cuda");
    loss = ts::linear(ts::relu(ts::linear(x, w)).matmul(w), w).to(ts::kFloat32).sum();
    EXPECT_EQ(ts::amp::autocast_cache_size(), 1u);
  }
  EXPECT_EQ(ts::amp::autocast_cache_size(), 0u);
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), ts::kFloat32);
  EXPECT_TRUE(w.grad().device() == gpu());
}

// The CPU kernel's result for the same list (copies), then the CUDA kernel's, compared bit for bit
// (one multiply rounded once: both sides compute the same float/double product).
void compare_unscale(const std::vector<ts::Tensor>& cpu_grads, float inv_scale) {
  std::vector<ts::Tensor> a, b;
  for (const auto& g : cpu_grads) {
    a.push_back(g.clone());
    b.push_back(g.to(gpu()));
  }
  ts::Tensor fa = ts::zeros({}, ts::kFloat32), fb = ts::zeros({}, ts::TensorOptions(ts::kFloat32, gpu()));
  ts::_amp_foreach_non_finite_check_and_unscale_(a, fa, ts::full({}, inv_scale, ts::kFloat32));
  ts::_amp_foreach_non_finite_check_and_unscale_(b, fb, ts::full({}, inv_scale, ts::TensorOptions(ts::kFloat32, gpu())));
  EXPECT_EQ(fb.item<float>(), fa.item<float>());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(all_close(b[i].cpu(), a[i], {0, 0})) << "tensor " << i << " of " << a[i].numel() << " elements, "
                                                     << ts::dtype_name(a[i].dtype());
  }
}

TEST(CudaAmp, UnscaleKernelMatchesCpuManyTensors) {
  TS_REQUIRE_GPU();
  const std::vector<ts::DType> dtypes = {ts::kFloat32, ts::kFloat16, ts::kBFloat16, ts::kFloat64};
  std::vector<ts::Tensor> grads;
  // 300 tensors (more than one launch's slots), sizes 0 .. ~200k (more than one launch's blocks),
  // every chunk boundary case: 0, 1, 65535, 65536, 65537.
  const std::vector<int64_t> special = {0, 1, 65535, 65536, 65537, 0, 3 * 65536 + 5};
  for (int i = 0; i < 300; ++i) {
    const int64_t n = i < static_cast<int>(special.size()) ? special[i] : (i * 7919) % 200003;
    grads.push_back(test_data({n}, dtypes[i % dtypes.size()], 1000 + i));
  }
  compare_unscale(grads, 1.0f / 65536.0f);
  compare_unscale(grads, 1.0f);       // identity: values untouched
  compare_unscale(grads, 0.3f);       // not a power of two: rounding must match
}

TEST(CudaAmp, UnscaleKernelBigTensorAcrossLaunches) {
  TS_REQUIRE_GPU();
  // 22M elements: more than 320 blocks of 65536, so one tensor spans two launches.
  std::vector<ts::Tensor> grads = {test_data({3}, ts::kFloat32, 1), ts::randn({22 * 1000 * 1000}),
                                   test_data({100}, ts::kBFloat16, 2)};
  compare_unscale(grads, 0.125f);
  grads[1].narrow(0, 22 * 1000 * 1000 - 1, 1).fill_(kInf);  // the very last element, in the second launch
  compare_unscale(grads, 0.125f);
}

TEST(CudaAmp, UnscaleKernelInfOrNaNInAnyOne) {
  TS_REQUIRE_GPU();
  const std::vector<int64_t> sizes = {5, 0, 70000, 1, 4096};
  const std::vector<ts::DType> dtypes = {ts::kFloat32, ts::kFloat16, ts::kBFloat16, ts::kFloat64, ts::kFloat32};
  for (size_t bad = 0; bad < sizes.size(); ++bad) {
    if (sizes[bad] == 0) continue;
    for (double v : {kInf, -kInf, std::nan("")}) {
      SCOPED_TRACE(::testing::Message() << "tensor " << bad << " value " << v);
      std::vector<ts::Tensor> grads;
      for (size_t i = 0; i < sizes.size(); ++i) grads.push_back(test_data({sizes[i]}, dtypes[i], 50 + i));
      grads[bad].narrow(0, sizes[bad] / 2, 1).fill_(v);
      std::vector<ts::Tensor> g;
      for (auto& t : grads) g.push_back(t.to(gpu()));
      ts::Tensor found = ts::zeros({}, ts::TensorOptions(ts::kFloat32, gpu()));
      ts::_amp_foreach_non_finite_check_and_unscale_(g, found, ts::full({}, 0.5, ts::TensorOptions(ts::kFloat32, gpu())));
      EXPECT_EQ(found.item<float>(), 1.0f);
      compare_unscale(grads, 0.5f);
    }
  }
}

TEST(CudaAmp, UnscaleStridedGradient) {
  TS_REQUIRE_GPU();
  ts::Tensor base = test_data({64, 33}, ts::kFloat32, 3).to(gpu());
  ts::Tensor expect = base.cpu() * 4;
  ts::Tensor found = ts::zeros({}, ts::TensorOptions(ts::kFloat32, gpu()));
  ts::_amp_foreach_non_finite_check_and_unscale_({base.t()}, found, ts::full({}, 4.0, ts::TensorOptions(ts::kFloat32, gpu())));
  EXPECT_TRUE(all_close(base.cpu(), expect, {0, 0}));
  EXPECT_EQ(found.item<float>(), 0.0f);
}

TEST(CudaAmp, UpdateScaleMatchesCpu) {
  TS_REQUIRE_GPU();
  auto opts = ts::TensorOptions(ts::kFloat32, gpu());
  ts::Tensor scale = ts::full({}, 8.0, opts), tracker = ts::zeros({}, ts::TensorOptions(ts::kInt32, gpu()));
  ts::Tensor cs = ts::full({}, 8.0, ts::kFloat32), ct = ts::zeros({}, ts::kInt32);
  const float flags[] = {0, 0, 0, 1, 0, 0, 0, 0, 1, 1};
  for (float f : flags) {
    ts::_amp_update_scale_(scale, tracker, ts::full({}, f, opts), 2.0, 0.5, 3);
    ts::_amp_update_scale_(cs, ct, ts::full({}, f, ts::kFloat32), 2.0, 0.5, 3);
    EXPECT_EQ(scale.item<float>(), cs.item<float>());
    EXPECT_EQ(tracker.item<int>(), ct.item<int>());
  }
  ts::Tensor big = ts::full({}, 3e38, opts), t0 = ts::zeros({}, ts::TensorOptions(ts::kInt32, gpu()));
  ts::_amp_update_scale_(big, t0, ts::zeros({}, opts), 2.0, 0.5, 1);
  EXPECT_EQ(big.item<float>(), 3e38f);
}

TEST(CudaAmp, Errors) {
  TS_REQUIRE_GPU();
  ts::Tensor g = test_data({4}, ts::kFloat32).to(gpu());
  ts::Tensor found_cpu = ts::zeros({}, ts::kFloat32);
  ts::Tensor inv = ts::ones({}, ts::TensorOptions(ts::kFloat32, gpu()));
  EXPECT_THROW(ts::_amp_foreach_non_finite_check_and_unscale_({g}, found_cpu, inv), ts::DeviceError);
  ts::Tensor found = ts::zeros({}, ts::TensorOptions(ts::kFloat32, gpu()));
  EXPECT_THROW(ts::_amp_foreach_non_finite_check_and_unscale_({g.cpu()}, found, inv), ts::DeviceError);
}

struct GpuMlp {
  std::vector<ts::Tensor> p;
  explicit GpuMlp(uint64_t seed = 1) {
    p = {test_data({64, 32}, ts::kFloat32, seed) * 0.2, test_data({64}, ts::kFloat32, seed + 1) * 0.1,
         test_data({8, 64}, ts::kFloat32, seed + 2) * 0.2, test_data({8}, ts::kFloat32, seed + 3) * 0.1};
    for (auto& t : p) t = t.to(gpu()).detach().requires_grad_();
  }
  GpuMlp(const GpuMlp& o) {
    for (const auto& t : o.p) p.push_back(t.detach().clone().requires_grad_());
  }
  ts::Tensor forward(const ts::Tensor& x) const { return ts::linear(ts::relu(ts::linear(x, p[0], p[1])), p[2], p[3]); }
};
ts::Tensor gx(int i) { return test_data({16, 32}, ts::kFloat32, 300 + i).to(gpu()); }
ts::Tensor gy(int i) { return test_data({16, 8}, ts::kFloat32, 400 + i).to(gpu()); }

TEST(CudaAmp, GradScalerSkipsExactlyTheInfStep) {
  TS_REQUIRE_GPU();
  for (int bad = 0; bad < 4; ++bad) {
    GpuMlp m, control(m);
    ts::optim::SGD opt(m.p, {.lr = 0.05, .momentum = 0.9});
    ts::optim::SGD opt_c(control.p, {.lr = 0.05, .momentum = 0.9});
    ts::amp::GradScaler scaler({.init_scale = 256.0});
    for (int i = 0; i < 4; ++i) {
      opt.zero_grad();
      scaler.scale(F::mse_loss(m.forward(gx(i)), gy(i))).backward();
      if (i == 1) {
        ts::NoGradGuard ng;
        m.p[bad].grad().view({-1}).narrow(0, 0, 1).fill_(kInf);
      }
      EXPECT_EQ(scaler.step(opt), i != 1);
      scaler.update();
      EXPECT_EQ(scaler.get_scale(), i >= 1 ? 128.0 : 256.0);
      if (i != 1) {
        opt_c.zero_grad();
        F::mse_loss(control.forward(gx(i)), gy(i)).backward();
        opt_c.step();
      }
    }
    for (size_t j = 0; j < m.p.size(); ++j) EXPECT_TRUE(all_close(m.p[j].cpu(), control.p[j].cpu(), {1e-5, 1e-6}));
  }
}

TEST(CudaAmp, ScaledFloat16RunAgreesWithFloat32Control) {
  TS_REQUIRE_GPU();
  GpuMlp m, control(m);
  ts::optim::SGD opt(m.p, {.lr = 0.05});
  ts::optim::SGD opt_c(control.p, {.lr = 0.05});
  ts::amp::GradScaler scaler;
  for (int i = 0; i < 5; ++i) {
    opt.zero_grad();
    ts::Tensor loss;
    {
      ts::amp::autocast guard("cuda", ts::kFloat16);
      loss = F::mse_loss(m.forward(gx(i)), gy(i));
    }
    scaler.scale(loss).backward();
    scaler.unscale_(opt);
    ts::nn::utils::clip_grad_norm_(m.p, 10.0);
    scaler.step(opt);
    scaler.update();
    opt_c.zero_grad();
    F::mse_loss(control.forward(gx(i)), gy(i)).backward();
    ts::nn::utils::clip_grad_norm_(control.p, 10.0);
    opt_c.step();
  }
  for (size_t j = 0; j < m.p.size(); ++j) EXPECT_TRUE(all_close(m.p[j].cpu(), control.p[j].cpu(), {5e-3, 5e-3}));
  auto sd = scaler.state_dict();
  ts::amp::GradScaler loaded;
  loaded.load_state_dict(sd);
  EXPECT_EQ(loaded.state_dict(), sd);
}

}  // namespace
