// The fused optimizer kernels on CUDA against the CPU kernels (ops/optim_kernel.h): ten SGD and
// Adam/AdamW steps over lists of ~20 parameters of varied sizes (empty, odd, around the 65536-element
// chunk) give the CPU's float32 and float64 results bit for bit (Note [Optimizer rounding],
// src/kernels/cuda/optim_math.cuh). float16/bfloat16 parameters, which the CPU kernels do not take,
// must equal the float32 CPU step applied to the widened values and rounded back, also bit for bit.
// Lists longer than one launch's slots or blocks, mixed dtypes, the optimizer classes' fused path,
// and the error cases (checked before anything is written).
#include <cstring>
#include <sstream>

#include "common/test_util.h"
#include "ops/optim_kernel.h"
#include "tessera/optim.h"

namespace ts = tessera;
using namespace tessera::testing;
using tessera::operator<<;  // Shape (a std::vector) prints through tessera's operator

namespace {

ts::Device gpu() { return ts::Device::cuda(); }

::testing::AssertionResult same_bits(const ts::Tensor& actual, const ts::Tensor& expected) {
  if (actual.sizes() != expected.sizes() || actual.dtype() != expected.dtype()) {
    std::ostringstream os;
    os << "sizes/dtype differ: " << actual.sizes() << " vs " << expected.sizes();
    return ::testing::AssertionFailure() << os.str();
  }
  const ts::Tensor a = actual.cpu().contiguous(), e = expected.cpu().contiguous();
  const size_t es = ts::element_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(a.data_ptr());
  const auto* pe = static_cast<const unsigned char*>(e.data_ptr());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + i * es, pe + i * es, es) != 0) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const double va = a.reshape({-1}).slice(0, first, first + 1).tolist<double>()[0];
  const double ve = e.reshape({-1}).slice(0, first, first + 1).tolist<double>()[0];
  return ::testing::AssertionFailure() << bad << " of " << a.numel() << " elements differ; first at " << first << ": "
                                       << va << " vs " << ve;
}

::testing::AssertionResult same_bits(const ts::TensorList& actual, const ts::TensorList& expected) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "list sizes differ";
  for (size_t i = 0; i < actual.size(); ++i) {
    ::testing::AssertionResult r = same_bits(actual[i], expected[i]);
    if (!r) return ::testing::AssertionFailure() << "tensor " << i << " (" << actual[i].numel() << " elements): "
                                                 << r.message();
  }
  return ::testing::AssertionSuccess();
}

// The slots with concrete argument types (so that braced lists convert).
void sgd_on(ts::Device d, const ts::TensorList& p, const ts::TensorList& g, const ts::TensorList& b,
            const std::vector<uint8_t>& fresh, const ts::SGDKernelParams& o) {
  ts::sgd_kernel(d, p, g, b, fresh, o);
}
void adam_on(ts::Device d, const ts::TensorList& p, const ts::TensorList& g, const ts::TensorList& m,
             const ts::TensorList& v, const ts::TensorList& vmax, const std::vector<int64_t>& steps,
             const ts::AdamKernelParams& o) {
  ts::adam_kernel(d, p, g, m, v, vmax, steps, o);
}

// ~20 parameter sizes: empty, tiny, odd, around and above the 65536-element chunk.
const std::vector<int64_t> kSizes = {0,    1,     3,     7,     31,     64,     100, 257, 1000, 4097,
                                     65535, 65536, 65537, 131073, 200001, 5, 2,   333, 0,    70001};

// Normal(0, scale) values on the CPU, from a generator seeded with `seed`.
ts::TensorList make_list(const std::vector<int64_t>& sizes, ts::DType dt, uint64_t seed, double scale = 1) {
  ts::Generator g(seed);
  ts::TensorList out;
  for (int64_t n : sizes) {
    ts::Tensor t = ts::empty({n}, dt);
    t.normal_(0.0, scale, &g);
    out.push_back(t);
  }
  return out;
}
ts::TensorList zeros_list(const std::vector<int64_t>& sizes, ts::DType dt, ts::Device d) {
  ts::TensorList out;
  for (int64_t n : sizes) out.push_back(ts::zeros({n}, {dt, d}));
  return out;
}
ts::TensorList empty_list(const std::vector<int64_t>& sizes, ts::DType dt, ts::Device d) {
  ts::TensorList out;
  for (int64_t n : sizes) out.push_back(ts::empty({n}, {dt, d}));
  return out;
}
ts::TensorList to(const ts::TensorList& l, ts::Device d) {
  ts::TensorList out;
  for (const ts::Tensor& t : l) out.push_back(t.to(d, false, /*copy=*/true).contiguous());
  return out;
}
ts::TensorList to(const ts::TensorList& l, ts::DType dt) {
  ts::TensorList out;
  for (const ts::Tensor& t : l) out.push_back(t.to(dt, /*copy=*/true).contiguous());
  return out;
}
// Copies src's values into dst (same sizes and dtype), keeping dst's storage.
void assign(ts::TensorList& dst, const ts::TensorList& src) {
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
}

std::vector<ts::SGDKernelParams> sgd_configs() {
  std::vector<ts::SGDKernelParams> c;
  for (double mom : {0.0, 0.9})
    for (double wd : {0.0, 1e-2})
      for (bool maximize : {false, true}) c.push_back({0.01, mom, mom != 0 ? 0.1 : 0.0, wd, false, maximize});
  c.push_back({0.05, 0.9, 0.0, 1e-4, true, false});  // nesterov
  c.push_back({0.05, 0.8, 0.0, 0.0, true, true});
  return c;
}

std::vector<ts::AdamKernelParams> adam_configs() {
  std::vector<ts::AdamKernelParams> c;
  for (bool decoupled : {false, true})
    for (bool amsgrad : {false, true})
      for (double wd : {0.0, 0.02}) c.push_back({1e-3, 0.9, 0.999, 1e-8, wd, decoupled, amsgrad, false});
  c.push_back({3e-2, 0.8, 0.99, 1e-6, 0.1, true, true, true});  // maximize, larger steps
  return c;
}

std::string describe(const ts::SGDKernelParams& o) {
  std::ostringstream os;
  os << "sgd lr " << o.lr << " momentum " << o.momentum << " dampening " << o.dampening << " wd " << o.weight_decay
     << " nesterov " << o.nesterov << " maximize " << o.maximize;
  return os.str();
}
std::string describe(const ts::AdamKernelParams& o) {
  std::ostringstream os;
  os << "adam lr " << o.lr << " betas " << o.beta1 << "," << o.beta2 << " wd " << o.weight_decay << " decoupled "
     << o.decoupled_weight_decay << " amsgrad " << o.amsgrad << " maximize " << o.maximize;
  return os.str();
}

// Per-parameter step counts that differ across the list (step t of the run: t + i % 3).
std::vector<int64_t> steps_for(int t, size_t n) {
  std::vector<int64_t> s;
  for (size_t i = 0; i < n; ++i) s.push_back(t + static_cast<int64_t>(i % 3));
  return s;
}

// Ten SGD steps on the CPU and on the GPU from the same values; bitwise after every step.
void run_sgd_same_as_cpu(ts::DType dt, const std::vector<int64_t>& sizes, const ts::SGDKernelParams& o, int steps) {
  const bool mom = o.momentum != 0;
  ts::TensorList pc = make_list(sizes, dt, 1), pg = to(pc, gpu());
  ts::TensorList bc = mom ? empty_list(sizes, dt, ts::kCPU) : ts::TensorList{};
  ts::TensorList bg = mom ? empty_list(sizes, dt, gpu()) : ts::TensorList{};
  for (int t = 0; t < steps; ++t) {
    const ts::TensorList gc = make_list(sizes, dt, 100 + t, 0.5), gg = to(gc, gpu());
    const std::vector<uint8_t> fresh = mom ? std::vector<uint8_t>(sizes.size(), t == 0) : std::vector<uint8_t>{};
    sgd_on(ts::kCPU, pc, gc, bc, fresh, o);
    sgd_on(gpu(), pg, gg, bg, fresh, o);
    ASSERT_TRUE(same_bits(pg, pc)) << describe(o) << " step " << t;
    if (mom) {
      ASSERT_TRUE(same_bits(bg, bc)) << describe(o) << " momentum buffer, step " << t;
    }
  }
}

void run_adam_same_as_cpu(ts::DType dt, const std::vector<int64_t>& sizes, const ts::AdamKernelParams& o, int steps) {
  ts::TensorList pc = make_list(sizes, dt, 2), pg = to(pc, gpu());
  ts::TensorList mc = zeros_list(sizes, dt, ts::kCPU), mg = zeros_list(sizes, dt, gpu());
  ts::TensorList vc = zeros_list(sizes, dt, ts::kCPU), vg = zeros_list(sizes, dt, gpu());
  ts::TensorList xc = o.amsgrad ? zeros_list(sizes, dt, ts::kCPU) : ts::TensorList{};
  ts::TensorList xg = o.amsgrad ? zeros_list(sizes, dt, gpu()) : ts::TensorList{};
  for (int t = 1; t <= steps; ++t) {
    const ts::TensorList gc = make_list(sizes, dt, 200 + t, t % 2 ? 1.0 : 1e-3), gg = to(gc, gpu());
    const std::vector<int64_t> s = steps_for(t, sizes.size());
    adam_on(ts::kCPU, pc, gc, mc, vc, xc, s, o);
    adam_on(gpu(), pg, gg, mg, vg, xg, s, o);
    ASSERT_TRUE(same_bits(pg, pc)) << describe(o) << " param, step " << t;
    ASSERT_TRUE(same_bits(mg, mc)) << describe(o) << " exp_avg, step " << t;
    ASSERT_TRUE(same_bits(vg, vc)) << describe(o) << " exp_avg_sq, step " << t;
    if (o.amsgrad) {
      ASSERT_TRUE(same_bits(xg, xc)) << describe(o) << " max_exp_avg_sq, step " << t;
    }
  }
}

}  // namespace

// ---- float32 / float64: the CPU's bits ------------------------------------------------------------------
TEST(CudaOptim, SgdTenStepsBitwiseEqualsCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64})
    for (const ts::SGDKernelParams& o : sgd_configs()) {
      SCOPED_TRACE(ts::dtype_name(dt));
      run_sgd_same_as_cpu(dt, kSizes, o, 10);
    }
}

TEST(CudaOptim, AdamTenStepsBitwiseEqualsCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64})
    for (const ts::AdamKernelParams& o : adam_configs()) {
      SCOPED_TRACE(ts::dtype_name(dt));
      run_adam_same_as_cpu(dt, kSizes, o, 10);
    }
}

TEST(CudaOptim, ListsLongerThanOneLaunch) {
  TS_REQUIRE_GPU();
  // 130 tensors (more slots than one launch holds at any depth) around one of 321 chunks (more blocks
  // than one launch has): the driver must split and carry a tensor over into the next launch.
  std::vector<int64_t> sizes;
  for (int i = 0; i < 130; ++i) sizes.push_back((i * 37) % 1000 + (i % 5 == 0 ? 70000 : 0));
  sizes.insert(sizes.begin() + 65, int64_t{320} * 65536 + 1);
  run_sgd_same_as_cpu(ts::kFloat32, sizes, {0.01, 0.9, 0.0, 1e-4, true, false}, 2);
  run_sgd_same_as_cpu(ts::kFloat32, sizes, {0.01, 0.0, 0.0, 0.0, false, false}, 2);
  run_adam_same_as_cpu(ts::kFloat32, sizes, {1e-3, 0.9, 0.999, 1e-8, 0.01, true, true, false}, 2);
  run_adam_same_as_cpu(ts::kFloat32, sizes, {1e-3, 0.9, 0.999, 1e-8, 0.01, false, false, false}, 2);
}

TEST(CudaOptim, MixedDtypesInOneList) {
  TS_REQUIRE_GPU();
  ts::TensorList pc, gc, mc, vc;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    const ts::DType dt = i % 2 ? ts::kFloat64 : ts::kFloat32;
    pc.push_back(test_data({kSizes[i]}, dt, 300 + i));
    gc.push_back(test_data({kSizes[i]}, dt, 400 + i));
    mc.push_back(ts::zeros({kSizes[i]}, dt));
    vc.push_back(ts::zeros({kSizes[i]}, dt));
  }
  ts::TensorList pg = to(pc, gpu()), gg = to(gc, gpu()), mg = to(mc, gpu()), vg = to(vc, gpu());
  const ts::AdamKernelParams o{1e-3, 0.9, 0.999, 1e-8, 0.01, true, false, false};
  for (int t = 1; t <= 3; ++t) {
    const std::vector<int64_t> s = steps_for(t, kSizes.size());
    adam_on(ts::kCPU, pc, gc, mc, vc, {}, s, o);
    adam_on(gpu(), pg, gg, mg, vg, {}, s, o);
    EXPECT_TRUE(same_bits(pg, pc)) << "step " << t;
    EXPECT_TRUE(same_bits(vg, vc)) << "step " << t;
  }
}

// ---- float16 / bfloat16: float math, one rounding per store -------------------------------------------------
TEST(CudaOptim, SixteenBitSgdEqualsTheFloat32StepRoundedBack) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat16, ts::kBFloat16}) {
    for (const ts::SGDKernelParams& o : sgd_configs()) {
      const bool mom = o.momentum != 0;
      ts::TensorList ph = make_list(kSizes, dt, 5), pg = to(ph, gpu());
      ts::TensorList bh = mom ? zeros_list(kSizes, dt, ts::kCPU) : ts::TensorList{};
      ts::TensorList bg = mom ? empty_list(kSizes, dt, gpu()) : ts::TensorList{};
      for (int t = 0; t < 10; ++t) {
        const ts::TensorList gh = make_list(kSizes, dt, 500 + t, 0.5), gg = to(gh, gpu());
        const std::vector<uint8_t> fresh = mom ? std::vector<uint8_t>(kSizes.size(), t == 0) : std::vector<uint8_t>{};
        // Reference: the float32 CPU kernel on the widened values, rounded back to 16 bits.
        ts::TensorList pf = to(ph, ts::kFloat32), gf = to(gh, ts::kFloat32);
        ts::TensorList bf = mom ? to(bh, ts::kFloat32) : ts::TensorList{};
        sgd_on(ts::kCPU, pf, gf, bf, fresh, o);
        assign(ph, to(pf, dt));
        if (mom) assign(bh, to(bf, dt));
        sgd_on(gpu(), pg, gg, bg, fresh, o);
        ASSERT_TRUE(same_bits(pg, ph)) << ts::dtype_name(dt) << " " << describe(o) << " step " << t;
        if (mom) {
          ASSERT_TRUE(same_bits(bg, bh)) << ts::dtype_name(dt) << " " << describe(o) << " buffer, step " << t;
        }
      }
    }
  }
}

TEST(CudaOptim, SixteenBitAdamEqualsTheFloat32StepRoundedBack) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat16, ts::kBFloat16}) {
    for (const ts::AdamKernelParams& o : adam_configs()) {
      ts::TensorList ph = make_list(kSizes, dt, 6), pg = to(ph, gpu());
      ts::TensorList mh = zeros_list(kSizes, dt, ts::kCPU), vh = zeros_list(kSizes, dt, ts::kCPU);
      ts::TensorList xh = o.amsgrad ? zeros_list(kSizes, dt, ts::kCPU) : ts::TensorList{};
      ts::TensorList mg = to(mh, gpu()), vg = to(vh, gpu()), xg = to(xh, gpu());
      for (int t = 1; t <= 10; ++t) {
        const ts::TensorList gh = make_list(kSizes, dt, 600 + t), gg = to(gh, gpu());
        const std::vector<int64_t> s = steps_for(t, kSizes.size());
        ts::TensorList pf = to(ph, ts::kFloat32), gf = to(gh, ts::kFloat32), mf = to(mh, ts::kFloat32),
                       vf = to(vh, ts::kFloat32), xf = to(xh, ts::kFloat32);
        adam_on(ts::kCPU, pf, gf, mf, vf, xf, s, o);
        assign(ph, to(pf, dt));
        assign(mh, to(mf, dt));
        assign(vh, to(vf, dt));
        if (o.amsgrad) assign(xh, to(xf, dt));
        adam_on(gpu(), pg, gg, mg, vg, xg, s, o);
        const std::string what = std::string(ts::dtype_name(dt)) + " " + describe(o) + " step " + std::to_string(t);
        ASSERT_TRUE(same_bits(pg, ph)) << what;
        ASSERT_TRUE(same_bits(mg, mh)) << what << " exp_avg";
        ASSERT_TRUE(same_bits(vg, vh)) << what << " exp_avg_sq";
        if (o.amsgrad) {
          ASSERT_TRUE(same_bits(xg, xh)) << what << " max_exp_avg_sq";
        }
      }
    }
  }
}

// ---- through the optimizer classes (their fused path) -----------------------------------------------------
TEST(CudaOptim, OptimizerClassesFusedStepsMatchCpu) {
  TS_REQUIRE_GPU();
  auto make_params = [](ts::Device d) {
    std::vector<ts::Tensor> ps;
    for (size_t i = 0; i < kSizes.size(); ++i) {
      ts::Tensor p = test_data({kSizes[i]}, ts::kFloat32, 700 + i).to(d, false, true);
      p.requires_grad_();
      ps.push_back(p);
    }
    return ps;
  };
  std::vector<ts::Tensor> sc = make_params(ts::kCPU), sg = make_params(gpu());
  std::vector<ts::Tensor> ac = make_params(ts::kCPU), ag = make_params(gpu());
  ts::optim::SGD sgd_c(sc, {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true});
  ts::optim::SGD sgd_g(sg, {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true});
  ts::optim::AdamW adam_c(ac, {.lr = 1e-3, .weight_decay = 0.01, .amsgrad = true});
  ts::optim::AdamW adam_g(ag, {.lr = 1e-3, .weight_decay = 0.01, .amsgrad = true});
  for (int t = 0; t < 10; ++t) {
    for (size_t i = 0; i < kSizes.size(); ++i) {
      const ts::Tensor g = test_data({kSizes[i]}, ts::kFloat32, 800 + 31 * t + i);
      sc[i].set_grad(g.clone());
      sg[i].set_grad(g.to(gpu(), false, true));
      ac[i].set_grad(g.clone());
      ag[i].set_grad(g.to(gpu(), false, true));
    }
    sgd_c.step();
    sgd_g.step();
    adam_c.step();
    adam_g.step();
    for (size_t i = 0; i < kSizes.size(); ++i) {
      ASSERT_TRUE(same_bits(sg[i].detach(), sc[i].detach())) << "SGD param " << i << " step " << t;
      ASSERT_TRUE(same_bits(ag[i].detach(), ac[i].detach())) << "AdamW param " << i << " step " << t;
    }
  }
}

// ---- errors: raised before anything is written ---------------------------------------------------------
TEST(CudaOptim, BadEntriesRaiseAndChangeNothing) {
  TS_REQUIRE_GPU();
  const ts::SGDKernelParams sgd{0.1, 0.0, 0.0, 0.0, false, false};
  const ts::AdamKernelParams adam{};
  const ts::Tensor good = test_data({100}, ts::kFloat32, 1).to(gpu(), false, true);
  const ts::Tensor before = good.cpu().clone();
  const ts::Tensor g100 = test_data({100}, ts::kFloat32, 2).to(gpu(), false, true);
  const ts::Tensor p50 = ts::zeros({50}, {ts::kFloat32, gpu()}), g50 = ts::zeros({50}, {ts::kFloat32, gpu()});
  // A gradient of other sizes, dtype, layout or device, in the second entry.
  EXPECT_THROW(sgd_on(gpu(), {good, p50}, {g100, ts::zeros({51}, {ts::kFloat32, gpu()})}, {}, {}, sgd),
               ts::ValueError);
  EXPECT_THROW(sgd_on(gpu(), {good, p50}, {g100, ts::zeros({50}, {ts::kFloat64, gpu()})}, {}, {}, sgd),
               ts::ValueError);
  EXPECT_THROW(sgd_on(gpu(), {good, p50}, {g100, ts::zeros({100}, {ts::kFloat32, gpu()}).slice(0, 0, 100, 2)},
                              {}, {}, sgd),
               ts::ValueError);
  EXPECT_THROW(sgd_on(gpu(), {good, p50}, {g100, ts::zeros({50})}, {}, {}, sgd), ts::DeviceError);
  // A strided parameter, an integer parameter, a count mismatch.
  const ts::Tensor strided = ts::zeros({100}, {ts::kFloat32, gpu()}).slice(0, 0, 100, 2);
  EXPECT_THROW(sgd_on(gpu(), {good, strided}, {g100, g50}, {}, {}, sgd), ts::ValueError);
  const ts::Tensor ints = ts::zeros({50}, {ts::kInt32, gpu()});
  EXPECT_THROW(sgd_on(gpu(), {good, ints}, {g100, ints}, {}, {}, sgd), ts::DTypeError);
  EXPECT_THROW(sgd_on(gpu(), {good, p50}, {g100}, {}, {}, sgd), ts::ValueError);
  const ts::SGDKernelParams with_momentum{0.1, 0.9, 0.0, 0.0, false, false};
  EXPECT_THROW(sgd_on(gpu(), {good}, {g100}, {}, {}, with_momentum), ts::ValueError);
  // Adam: a step count of 0, a missing max_exp_avg_sq with amsgrad.
  const ts::Tensor m = ts::zeros({100}, {ts::kFloat32, gpu()}), v = ts::zeros({100}, {ts::kFloat32, gpu()});
  EXPECT_THROW(adam_on(gpu(), {good}, {g100}, {m}, {v}, {}, {0}, adam), ts::ValueError);
  ts::AdamKernelParams ams = adam;
  ams.amsgrad = true;
  EXPECT_THROW(adam_on(gpu(), {good}, {g100}, {m}, {v}, {}, {1}, ams), ts::ValueError);
  EXPECT_TRUE(same_bits(good, before));
  EXPECT_TRUE(same_bits(m, ts::zeros({100})));
  // Empty lists and empty tensors are no-ops.
  sgd_on(gpu(), {}, {}, {}, {}, sgd);
  const ts::Tensor e = ts::empty({0}, {ts::kFloat32, gpu()});
  adam_on(gpu(), {e}, {e}, {e}, {e}, {}, {1}, adam);
}
