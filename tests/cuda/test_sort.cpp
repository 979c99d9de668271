// CUDA sort, argsort, topk and unique against the CPU kernels on the same inputs: every dtype, every
// dim, contiguous / transposed / sliced-with-step inputs on the GPU, ties (stability: the indices must
// match exactly), NaN and signed zeros, one long row (device-wide radix sort), a few long rows, many
// short rows (segmented sort), empty and 0-dim inputs.
#include <cmath>
#include <string>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

std::string str(const ts::Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

const ts::Device kCuda = ts::Device::cuda(0);
const std::vector<std::string> kLayouts = {"contiguous", "transposed", "sliced_step2"};

ts::Tensor on_gpu(const ts::Tensor& x, const std::string& layout = "contiguous") {
  if (layout == "transposed" && x.dim() >= 2) return x.transpose(-1, -2).contiguous().to(kCuda).transpose(-1, -2);
  if (layout == "sliced_step2" && x.dim() >= 1) {
    ts::Shape big = x.sizes();
    big.back() *= 2;
    ts::Tensor buf = ts::zeros(big, ts::TensorOptions(x.dtype(), kCuda));
    ts::Tensor view = buf.slice(-1, 0, std::nullopt, 2);
    view.copy_(x.to(kCuda));
    return view;
  }
  return x.to(kCuda);
}

::testing::AssertionResult same(const ts::Tensor& gpu, const ts::Tensor& cpu) {
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "result is not on cuda";
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << ts::dtype_name(gpu.dtype()) << " vs " << ts::dtype_name(cpu.dtype());
  return all_close(gpu.cpu(), cpu, Tolerance{0, 0});
}

// Data with many ties: small integers, or floats rounded to halves with NaN, +-0.0 and +-inf mixed in.
ts::Tensor tied(const ts::Shape& s, ts::DType dt, uint64_t seed) {
  if (dt == ts::kBool) return test_data(s, dt, seed);
  if (!ts::is_floating_point(dt)) return test_data(s, dt, seed, dt == ts::kUInt8 ? 0 : -3, 3);
  std::vector<double> v = test_data(s, ts::kFloat64, seed).tolist<double>();
  const double specials[] = {std::nan(""), -std::nan(""), 0.0, -0.0, INFINITY, -INFINITY};
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i * 2654435761u) % 7 == 0 ? specials[(i / 7) % 6] : std::round(v[i] * 2) / 2;
  return ts::tensor(v, {static_cast<int64_t>(v.size())}, ts::kFloat64).reshape(s).to(dt);
}

TEST(CudaSort, SortMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor x = tied({4, 5, 6}, dt, 3);
    for (const std::string& layout : kLayouts) {
      const ts::Tensor xg = on_gpu(x, layout);
      for (int64_t dim : {0, 1, 2}) {
        for (bool desc : {false, true}) {
          auto [vc, ic] = ts::sort(x, dim, desc);
          auto [vg, ig] = ts::sort(xg, dim, desc);
          const std::string what = std::string(ts::dtype_name(dt)) + " " + layout + " dim " + std::to_string(dim) +
                                   (desc ? " descending" : " ascending");
          EXPECT_TRUE(same(vg, vc)) << what;
          EXPECT_TRUE(same(ig, ic)) << what;
          EXPECT_TRUE(same(ts::argsort(xg, dim, desc, true), ic)) << what;
        }
      }
    }
  }
}

// One long row (device-wide radix sort), a few long rows (one radix sort each), many short rows.
TEST(CudaSort, SortShapesMatchCpu) {
  TS_REQUIRE_GPU();
  const std::vector<ts::Shape> shapes = {{300000}, {3, 150000}, {2000, 37}, {70, 1}, {1, 1}, {5, 0}, {}};
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16, ts::kInt64, ts::kFloat64, ts::kUInt8}) {
    for (const ts::Shape& s : shapes) {
      const ts::Tensor x = tied(s, dt, 5);
      for (bool desc : {false, true}) {
        auto [vc, ic] = ts::sort(x, -1, desc);
        auto [vg, ig] = ts::sort(x.to(kCuda), -1, desc);
        EXPECT_TRUE(same(vg, vc)) << ts::dtype_name(dt) << " " << str(s);
        EXPECT_TRUE(same(ig, ic)) << ts::dtype_name(dt) << " " << str(s);
      }
    }
  }
}

TEST(CudaSort, NaNAndSignedZeroOrder) {
  TS_REQUIRE_GPU();
  const ts::Tensor x = ts::tensor({std::nan(""), 1.0, -0.0, 0.0, -INFINITY, -std::nan(""), INFINITY, -0.0, 1.0});
  for (ts::DType dt : ts::testing::float_dtypes()) {
    const ts::Tensor xd = x.to(dt);
    for (bool desc : {false, true}) {
      auto [vc, ic] = ts::sort(xd, 0, desc);
      auto [vg, ig] = ts::sort(xd.to(kCuda), 0, desc);
      EXPECT_TRUE(same(vg, vc)) << ts::dtype_name(dt);
      EXPECT_TRUE(same(ig, ic)) << ts::dtype_name(dt);
      // -0.0 and 0.0 are equal: they keep their input order (positions 2, 3, 7).
      const std::vector<int64_t> idx = ig.cpu().tolist<int64_t>();
      std::vector<int64_t> zeros;
      for (int64_t i : idx)
        if (i == 2 || i == 3 || i == 7) zeros.push_back(i);
      EXPECT_EQ(zeros, (std::vector<int64_t>{2, 3, 7}));
    }
  }
}

TEST(CudaSort, TopkMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    if (dt == ts::kBool) continue;
    const ts::Tensor x = tied({5, 8, 7}, dt, 9);
    for (const std::string& layout : kLayouts) {
      const ts::Tensor xg = on_gpu(x, layout);
      for (int64_t dim : {0, 1, 2}) {
        for (int64_t k : {int64_t(0), int64_t(1), int64_t(3), x.size(dim)}) {
          for (bool largest : {true, false}) {
            auto [vc, ic] = ts::topk(x, k, dim, largest);
            auto [vg, ig] = ts::topk(xg, k, dim, largest);
            const std::string what = std::string(ts::dtype_name(dt)) + " " + layout + " dim " + std::to_string(dim) +
                                     " k " + std::to_string(k) + (largest ? " largest" : " smallest");
            EXPECT_TRUE(same(vg, vc)) << what;
            EXPECT_TRUE(same(ig, ic)) << what;
          }
        }
      }
    }
  }
  const ts::Tensor big = tied({4, 50257}, ts::kFloat32, 4);
  auto [vc, ic] = ts::topk(big, 50, -1);
  auto [vg, ig] = ts::topk(big.to(kCuda), 50, -1);
  EXPECT_TRUE(same(vg, vc));
  EXPECT_TRUE(same(ig, ic));
  const ts::Tensor s = ts::tensor({2.0}).reshape({});
  auto [sv, si] = ts::topk(s.to(kCuda), 1);
  EXPECT_TRUE(same(sv, std::get<0>(ts::topk(s, 1))));
  EXPECT_THROW(ts::topk(big.to(kCuda), 50258, -1), ts::IndexError);
}

TEST(CudaSort, UniqueMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor x = tied({6, 5, 4}, dt, 2);
    for (const std::string& layout : kLayouts) {
      const ts::Tensor xg = on_gpu(x, layout);
      const std::string what = std::string(ts::dtype_name(dt)) + " " + layout;
      auto [uc, ic, cc] = ts::unique(x, true, true, true);
      auto [ug, ig, cg] = ts::unique(xg, true, true, true);
      EXPECT_TRUE(same(ug, uc)) << what;
      EXPECT_TRUE(same(ig, ic)) << what;
      EXPECT_TRUE(same(cg, cc)) << what;
      for (int64_t dim : {0, 1, 2}) {
        // Small-range data so that some slices repeat.
        const ts::Tensor r = dt == ts::kBool || !ts::is_floating_point(dt) ? test_data({6, 5, 4}, dt, 7, 0, 2)
                                                                          : tied({6, 5, 4}, dt, 7).gt(0.5).to(dt);
        const ts::Tensor rs = r.narrow(dim, 0, 2).repeat_interleave(2, dim).contiguous();  // repeated slices
        auto [ud, id, cd] = ts::unique(rs, true, true, true, dim);
        auto [ugd, igd, cgd] = ts::unique(on_gpu(rs, layout), true, true, true, dim);
        EXPECT_TRUE(same(ugd, ud)) << what << " dim " << dim;
        EXPECT_TRUE(same(igd, id)) << what << " dim " << dim;
        EXPECT_TRUE(same(cgd, cd)) << what << " dim " << dim;
      }
    }
  }
  // NaNs are distinct, in rows too; -0.0 equals 0.0.
  const ts::Tensor n = ts::tensor({std::nan(""), 1.0, std::nan(""), -0.0, 0.0, 1.0});
  auto [uc, ic, cc] = ts::unique(n, true, true, true);
  auto [ug, ig, cg] = ts::unique(n.to(kCuda), true, true, true);
  EXPECT_TRUE(same(ug, uc));
  EXPECT_TRUE(same(ig, ic));
  EXPECT_TRUE(same(cg, cc));
  const ts::Tensor rows = n.reshape({3, 2});
  auto [ur, ir, cr] = ts::unique(rows, true, true, true, 0);
  auto [ugr, igr, cgr] = ts::unique(rows.to(kCuda), true, true, true, 0);
  EXPECT_TRUE(same(ugr, ur));
  EXPECT_TRUE(same(igr, ir));
  EXPECT_TRUE(same(cgr, cr));
  // Empty and large inputs.
  const ts::Tensor e = ts::zeros({0});
  EXPECT_TRUE(same(std::get<0>(ts::unique(e.to(kCuda))), std::get<0>(ts::unique(e))));
  const ts::Tensor big = test_data({1 << 20}, ts::kInt32, 3, -1000, 1000);
  auto [ub, ib, cb] = ts::unique(big, true, true, true);
  auto [ugb, igb, cgb] = ts::unique(big.to(kCuda), true, true, true);
  EXPECT_TRUE(same(ugb, ub));
  EXPECT_TRUE(same(igb, ib));
  EXPECT_TRUE(same(cgb, cb));
}

}  // namespace
