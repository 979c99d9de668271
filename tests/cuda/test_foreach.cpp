// The foreach ops on CUDA against the CPU kernels: _foreach_norm (ord 1, 2, inf through the multi-
// tensor kernel, 3 and 0 through the composite) over 300 tensors of mixed dtypes and sizes (empty
// ones, several launches, tensors of many chunks, one spanning two launches), bitwise determinism
// across runs, NaN and inf in any chunk, strided inputs, the stacked form; _foreach_mul_ bit for bit
// against the CPU (one rounding of the float or double product) with float32 and float64 scalars, a
// tensor listed twice;
// clip_grad_norm_ on the GPU against the CPU, and captured in a CUDA graph (workspace, counter memset
// and launches replayed) against the eager call, bitwise.
#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "ops/foreach_ops.h"
#include "tessera/cuda.h"
#include "tessera/cuda_graph.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
ts::Device gpu() { return ts::Device::cuda(); }

const std::vector<ts::DType> kDtypes = {ts::kFloat32, ts::kFloat16, ts::kBFloat16, ts::kFloat64};

// 300 tensors (several launches' slots), sizes 0 .. ~200k with every chunk-boundary case and tensors
// of more than 3 chunks.
std::vector<ts::Tensor> many_tensors(uint64_t seed) {
  const std::vector<int64_t> special = {0, 1, 65535, 65536, 65537, 0, 3 * 65536 + 5, 5 * 65536, 2};
  std::vector<ts::Tensor> list;
  for (int i = 0; i < 300; ++i) {
    const int64_t n = i < static_cast<int>(special.size()) ? special[i] : (i * 7919) % 200003;
    list.push_back(test_data({n}, kDtypes[i % kDtypes.size()], seed + i));
  }
  return list;
}

std::vector<ts::Tensor> to_gpu(const std::vector<ts::Tensor>& list) {
  std::vector<ts::Tensor> out;
  for (const ts::Tensor& t : list) out.push_back(t.to(gpu()));
  return out;
}

// GPU norms (float accumulation, tree order) against the CPU's (double accumulation): a float32
// rounding or so apart, then rounded to the tensor's dtype (one unit there at most).
Tolerance gpu_norm_tol(ts::DType dt) {
  switch (dt) {
    case ts::DType::Float64: return {1e-12, 0};
    case ts::DType::Float32: return {1e-5, 0};
    case ts::DType::Float16: return {2e-3, 0};
    default: return {1.6e-2, 0};
  }
}

void expect_norms_match_cpu(const std::vector<ts::Tensor>& cpu_list, double ord) {
  std::vector<ts::Tensor> expect = ts::_foreach_norm(cpu_list, ord);
  std::vector<ts::Tensor> got = ts::_foreach_norm(to_gpu(cpu_list), ord);
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].device() == gpu());
    EXPECT_EQ(got[i].dtype(), cpu_list[i].dtype());
    EXPECT_TRUE(all_close(got[i].cpu(), expect[i], gpu_norm_tol(cpu_list[i].dtype())))
        << "ord " << ord << ", tensor " << i << " of " << cpu_list[i].numel() << " elements, "
        << ts::dtype_name(cpu_list[i].dtype());
  }
}

TEST(CudaForeach, NormMatchesCpuManyTensors) {
  TS_REQUIRE_GPU();
  const std::vector<ts::Tensor> list = many_tensors(100);
  for (double ord : {2.0, 1.0, kInf, 3.0, 0.0}) expect_norms_match_cpu(list, ord);
}

TEST(CudaForeach, NormSingleDtypeListsAndEmpty) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : kDtypes) {
    std::vector<ts::Tensor> list = {test_data({0}, dt, 1), test_data({300000}, dt, 2), test_data({17, 3}, dt, 3),
                                    test_data({}, dt, 4)};
    for (double ord : {2.0, 1.0, kInf}) expect_norms_match_cpu(list, ord);
    std::vector<ts::Tensor> empties = {ts::empty({0}, ts::TensorOptions(dt, gpu())),
                                       ts::empty({4, 0}, ts::TensorOptions(dt, gpu()))};
    for (const ts::Tensor& r : ts::_foreach_norm(empties, 2)) EXPECT_EQ(r.item<double>(), 0.0);
  }
  EXPECT_TRUE(ts::_foreach_norm({}).empty());
}

TEST(CudaForeach, NormOneTensorAcrossLaunches) {
  TS_REQUIRE_GPU();
  // 22M elements: more than 320 chunks, so the tensor's chunks (and its counter) span two launches.
  std::vector<ts::Tensor> list = {test_data({3}, ts::kFloat32, 1), ts::randn({22 * 1000 * 1000}),
                                  test_data({100}, ts::kBFloat16, 2)};
  for (double ord : {2.0, 1.0, kInf}) expect_norms_match_cpu(list, ord);
}

TEST(CudaForeach, NormIsDeterministic) {
  TS_REQUIRE_GPU();
  std::vector<ts::Tensor> list = to_gpu(many_tensors(200));
  list.push_back(ts::randn({22 * 1000 * 1000}, gpu()));
  for (double ord : {2.0, 1.0, kInf}) {
    std::vector<ts::Tensor> a = ts::_foreach_norm(list, ord);
    ts::Tensor sa = ts::foreach_norm_stacked(list, ord, ts::kFloat32);
    for (int run = 0; run < 3; ++run) {
      std::vector<ts::Tensor> b = ts::_foreach_norm(list, ord);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(all_close(b[i].cpu(), a[i].cpu(), {0, 0})) << "ord " << ord << " tensor " << i;
      EXPECT_TRUE(all_close(ts::foreach_norm_stacked(list, ord, ts::kFloat32).cpu(), sa.cpu(), {0, 0})) << "ord " << ord;
    }
  }
}

TEST(CudaForeach, NormNaNAndInfInAnyChunk) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : kDtypes) {
    for (int64_t at : {int64_t{0}, int64_t{65536}, int64_t{3 * 65536 + 4}}) {
      for (double v : {kInf, -kInf, std::nan("")}) {
        std::vector<ts::Tensor> list = {test_data({5}, dt, 1), test_data({3 * 65536 + 5}, dt, 2), test_data({9}, dt, 3)};
        list[1].narrow(0, at, 1).fill_(v);
        for (double ord : {2.0, 1.0, kInf}) {
          std::vector<ts::Tensor> r = ts::_foreach_norm(to_gpu(list), ord);
          const double got = r[1].item<double>();
          if (std::isnan(v)) EXPECT_TRUE(std::isnan(got)) << ts::dtype_name(dt) << " at " << at << " ord " << ord;
          else EXPECT_EQ(got, kInf) << ts::dtype_name(dt) << " at " << at << " ord " << ord;
          EXPECT_TRUE(std::isfinite(r[0].item<double>()));
          EXPECT_TRUE(std::isfinite(r[2].item<double>()));
        }
      }
    }
  }
  // NaN in one chunk, inf in a later one (and the reverse): NaN either way.
  ts::Tensor x = test_data({4 * 65536}, ts::kFloat32, 9);
  x.narrow(0, 10, 1).fill_(std::nan(""));
  x.narrow(0, 3 * 65536, 1).fill_(kInf);
  ts::Tensor y = test_data({4 * 65536}, ts::kFloat32, 9);
  y.narrow(0, 10, 1).fill_(kInf);
  y.narrow(0, 3 * 65536, 1).fill_(std::nan(""));
  for (double ord : {2.0, 1.0, kInf})
    for (const ts::Tensor& r : ts::_foreach_norm(to_gpu({x, y}), ord)) EXPECT_TRUE(std::isnan(r.item<double>()));
}

TEST(CudaForeach, NormStridedInputs) {
  TS_REQUIRE_GPU();
  for (const Layout& layout : layouts()) {
    std::vector<ts::Tensor> cpu_list, gpu_list;
    for (size_t i = 0; i < kDtypes.size(); ++i) {
      ts::Tensor c = test_data({300, 257}, kDtypes[i], 20 + i);
      cpu_list.push_back(layout.apply(c));
      gpu_list.push_back(layout.apply(c.to(gpu())));
    }
    for (double ord : {2.0, 1.0, kInf}) {
      std::vector<ts::Tensor> e = ts::_foreach_norm(cpu_list, ord), g = ts::_foreach_norm(gpu_list, ord);
      for (size_t i = 0; i < e.size(); ++i)
        EXPECT_TRUE(all_close(g[i].cpu(), e[i], gpu_norm_tol(kDtypes[i]))) << layout.name << " ord " << ord;
    }
  }
}

TEST(CudaForeach, StackedMatchesCpu) {
  TS_REQUIRE_GPU();
  const std::vector<ts::Tensor> list = many_tensors(300);
  for (double ord : {2.0, 1.0, kInf, 3.0}) {
    ts::Tensor e = ts::foreach_norm_stacked(list, ord, ts::kFloat32);
    ts::Tensor g = ts::foreach_norm_stacked(to_gpu(list), ord, ts::kFloat32);
    EXPECT_EQ(g.dtype(), ts::kFloat32);
    EXPECT_TRUE(all_close(g.cpu(), e, {1e-5, 0})) << "ord " << ord;
  }
}

// The CPU kernel's result on copies, then the CUDA kernel's: the same float/double product, rounded
// once, so bit for bit.
void compare_mul(const std::vector<ts::Tensor>& cpu_list, const ts::Tensor& scalar) {
  std::vector<ts::Tensor> a, b;
  for (const ts::Tensor& t : cpu_list) {
    a.push_back(t.clone());
    b.push_back(t.to(gpu()));
  }
  std::vector<uint64_t> versions;
  for (const ts::Tensor& t : b) versions.push_back(t.version());
  ts::_foreach_mul_(a, scalar);
  ts::_foreach_mul_(b, scalar.to(gpu()));
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(all_close(b[i].cpu(), a[i], {0, 0})) << "tensor " << i << " of " << a[i].numel() << " elements, "
                                                     << ts::dtype_name(a[i].dtype()) << ", scalar "
                                                     << ts::dtype_name(scalar.dtype());
    EXPECT_GT(b[i].version(), versions[i]);
  }
}

TEST(CudaForeach, MulMatchesCpuManyTensors) {
  TS_REQUIRE_GPU();
  const std::vector<ts::Tensor> list = many_tensors(400);
  for (ts::DType sdt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16}) {
    compare_mul(list, ts::full({}, 0.3, sdt));
    compare_mul(list, ts::full({1}, 1.0, sdt));  // identity
    compare_mul(list, ts::full({}, -7.125e-3, sdt));
  }
  compare_mul({ts::randn({22 * 1000 * 1000}), test_data({3}, ts::kFloat16, 5)}, ts::full({}, 0.7));
}

TEST(CudaForeach, MulStridedAndAliasedScalar) {
  TS_REQUIRE_GPU();
  ts::Tensor base = test_data({64, 33}, ts::kFloat32, 3).to(gpu());
  ts::Tensor expect = base.cpu() * 4;
  ts::_foreach_mul_({base.t()}, ts::full({}, 4.0, ts::TensorOptions(ts::kFloat32, gpu())));
  EXPECT_TRUE(all_close(base.cpu(), expect, {0, 0}));
  ts::Tensor a = test_data({300000}, ts::kFloat32, 4);
  a.narrow(0, 0, 1).fill_(3.0);
  ts::Tensor e = a * 3.0;
  ts::Tensor ag = a.to(gpu());
  ts::_foreach_mul_({ag}, ag.narrow(0, 0, 1));
  EXPECT_TRUE(all_close(ag.cpu(), e, {0, 0}));
  // A tensor listed twice: scaled twice (one call per tensor), not a race.
  ts::Tensor big = ts::randn({300000});
  ts::Tensor twice = big * ts::full({}, 0.3) * ts::full({}, 0.3);
  ts::Tensor bg = big.to(gpu());
  ts::_foreach_mul_({bg, bg}, ts::full({}, 0.3, ts::TensorOptions(ts::kFloat32, gpu())));
  EXPECT_TRUE(all_close(bg.cpu(), twice, {0, 0}));
  EXPECT_THROW(ts::_foreach_mul_({ag}, ts::full({}, 2.0)), ts::DeviceError);
  EXPECT_THROW(ts::_foreach_norm({ag, ts::ones({3})}), ts::DeviceError);
}

TEST(CudaForeach, ClipGradNormMatchesCpu) {
  TS_REQUIRE_GPU();
  for (double norm_type : {2.0, 1.0, kInf}) {
    for (double max_norm : {0.5, 1e9}) {
      std::vector<ts::Tensor> cp, gp;
      const std::vector<ts::Tensor> grads = many_tensors(500);
      for (size_t i = 0; i < grads.size(); i += 3) {  // 100 parameters of every dtype
        ts::Tensor c = ts::zeros(grads[i].sizes(), grads[i].dtype()).requires_grad_();
        c.set_grad(grads[i]);
        ts::Tensor g = ts::zeros(grads[i].sizes(), ts::TensorOptions(grads[i].dtype(), gpu())).requires_grad_();
        g.set_grad(grads[i].to(gpu()));
        cp.push_back(c);
        gp.push_back(g);
      }
      ts::Tensor tc = ts::nn::utils::clip_grad_norm_(cp, max_norm, norm_type);
      ts::Tensor tg = ts::nn::utils::clip_grad_norm_(gp, max_norm, norm_type);
      EXPECT_EQ(tg.dtype(), tc.dtype());
      EXPECT_TRUE(all_close(tg.cpu(), tc, {1e-5, 0})) << "norm_type " << norm_type;
      for (size_t i = 0; i < cp.size(); ++i) {
        const ts::DType dt = cp[i].dtype();
        const Tolerance tol = dt == ts::kFloat64 || dt == ts::kFloat32 ? Tolerance{1e-5, 1e-7} : tolerance_for(dt);
        EXPECT_TRUE(all_close(gp[i].grad().cpu(), cp[i].grad(), tol))
            << "norm_type " << norm_type << " max_norm " << max_norm << " parameter " << i;
      }
    }
  }
}

TEST(CudaForeach, ClipGradNormCapturedInAGraphEqualsEagerBitwise) {
  TS_REQUIRE_GPU();
  const std::vector<ts::Tensor> src = to_gpu(many_tensors(700));
  auto make_params = [&] {  // 60 parameters of every dtype (two groups: float64 and the rest)
    std::vector<ts::Tensor> ps;
    for (size_t i = 0; i < src.size(); i += 5) {
      ts::Tensor p = ts::zeros(src[i].sizes(), ts::TensorOptions(src[i].dtype(), gpu())).requires_grad_();
      p.set_grad(src[i].clone());
      ps.push_back(p);
    }
    return ps;
  };
  auto reset = [&](std::vector<ts::Tensor>& ps) {
    for (size_t j = 0; j < ps.size(); ++j) ps[j].grad().copy_(src[5 * j]);
  };
  std::vector<ts::Tensor> eager = make_params(), graphed = make_params();
  const ts::Tensor want = ts::nn::utils::clip_grad_norm_(eager, 0.5);
  ts::cuda::Stream side = ts::cuda::Stream::create();
  ts::cuda::Graph g;
  ts::Tensor total;
  {
    ts::cuda::StreamGuard sg(side);
    (void)ts::nn::utils::clip_grad_norm_(graphed, 0.5);  // warm-up
    reset(graphed);
    g.capture_begin();
    total = ts::nn::utils::clip_grad_norm_(graphed, 0.5);
    g.capture_end();
    side.synchronize();
  }
  for (int rep = 0; rep < 2; ++rep) {
    reset(graphed);
    g.replay();
    EXPECT_TRUE(all_close(total.cpu(), want.cpu(), {0, 0})) << "replay " << rep;
    for (size_t j = 0; j < eager.size(); ++j)
      EXPECT_TRUE(all_close(graphed[j].grad().cpu(), eager[j].grad().cpu(), {0, 0})) << "replay " << rep << " parameter " << j;
  }
}

}  // namespace
