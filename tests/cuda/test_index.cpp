// The CUDA kernels of the indexing and shape families against the CPU kernels on the same inputs:
// index_select, advanced index / index_put / index_add, embedding (forward and backward), gather,
// scatter / scatter_add, masked_fill, nonzero, masked_select, one_hot, flip / roll / pad /
// repeat_interleave (index_map), tril / triu, arange. Every dtype the op takes, contiguous /
// transposed / sliced-with-step inputs on the GPU, duplicates, negative indices, empty and 0-dim
// inputs, out-of-range indices raising IndexError on cuda, and tensors past 2^31 elements.
// Pure data movement compares exactly; accumulations use integer-valued data so that any summation
// order gives the same exact sums.
#include <cmath>
#include <cstdlib>
#include <string>

#include "common/test_util.h"
#include "tessera/determinism.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

const ts::Device kCuda = ts::Device::cuda(0);
const std::vector<std::string> kLayouts = {"contiguous", "transposed", "sliced_step2"};

// `x` (a CPU tensor) on the GPU, stored in `layout`, with the same values.
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

// The GPU result equals the CPU result: same dtype, sizes, device, and values (exactly by default).
::testing::AssertionResult same(const ts::Tensor& gpu, const ts::Tensor& cpu, Tolerance tol = {0, 0}) {
  if (!gpu.is_cuda()) return ::testing::AssertionFailure() << "result is not on cuda";
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << ts::dtype_name(gpu.dtype()) << " vs " << ts::dtype_name(cpu.dtype());
  return all_close(gpu.cpu(), cpu, tol);
}

ts::Tensor ints(const std::vector<int64_t>& v, ts::DType dt = ts::kInt64) {
  return ts::tensor(v, {static_cast<int64_t>(v.size())}).to(dt);
}

// Integer-valued data (sums exact in every dtype; uint8 non-negative, bool alternating).
ts::Tensor int_valued(const ts::Shape& s, ts::DType dt, uint64_t seed = 3) {
  if (dt == ts::kBool) return test_data(s, dt, seed);
  return test_data(s, ts::kInt64, seed, dt == ts::kUInt8 ? 0 : -5, 5).to(dt);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- index_select, advanced indexing ---------------------------------------------------------------------

TEST(CudaIndex, IndexSelectMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor x = test_data({4, 5, 6}, dt, 11);
    for (const std::string& layout : kLayouts) {
      const ts::Tensor xg = on_gpu(x, layout);
      for (int64_t dim : {0, 1, -1}) {
        for (ts::DType it : {ts::kInt64, ts::kInt32}) {
          const ts::Tensor idx = ints({3, 0, 3, 1, 2}, it);
          EXPECT_TRUE(same(ts::index_select(xg, dim, idx.to(kCuda)), ts::index_select(x, dim, idx)))
              << ts::dtype_name(dt) << " " << layout << " dim " << dim;
        }
        const ts::Tensor empty = ints({});
        EXPECT_TRUE(same(ts::index_select(xg, dim, empty.to(kCuda)), ts::index_select(x, dim, empty)));
      }
    }
  }
  const ts::Tensor s = ts::tensor({2.5});
  EXPECT_TRUE(same(ts::index_select(s.reshape({}).to(kCuda), 0, ints({0}).to(kCuda)),
                   ts::index_select(s.reshape({}), 0, ints({0}))));
}

TEST(CudaIndex, IndexSelectOutOfRangeRaisesIndexError) {
  TS_REQUIRE_GPU();
  const ts::Tensor x = test_data({5, 3}, ts::kFloat32).to(kCuda);
  std::string msg = message_of<ts::IndexError>([&] { ts::index_select(x, 0, ints({0, 4, 7, 9}).to(kCuda)); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "index_select: index 7 is out of bounds for dimension 0 with size 5")) << msg;
  // Negative values do not wrap in index_select (PyTorch's CPU kernel).
  msg = message_of<ts::IndexError>([&] { ts::index_select(x, 1, ints({-1}, ts::kInt32).to(kCuda)); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "index -1 is out of bounds for dimension 1 with size 3")) << msg;
}

TEST(CudaIndex, AdvancedIndexMatchesCpu) {
  TS_REQUIRE_GPU();
  using Idx = std::vector<std::optional<ts::Tensor>>;
  const ts::Tensor i23 = ints({0, -1, 2, 4, -5, 1}).reshape({2, 3});
  const ts::Tensor i21 = ints({1, -2}).reshape({2, 1});
  const ts::Tensor i3 = ints({0, 6, -7}, ts::kInt32);
  const std::vector<Idx> cases = {
      {i23},
      {std::nullopt, i21},
      {i21, i3.to(ts::kInt64).remainder(6)},
      {i21, std::nullopt, i3},
      {std::nullopt, std::nullopt, i3},
      {ints({3}).reshape({})},
      {ints({})},
      {test_data({5, 6}, ts::kBool, 5)},
      {ts::tensor({1.0}).reshape({}).to(ts::kBool)},
  };
  for (ts::DType dt : {ts::kFloat32, ts::kFloat16, ts::kBFloat16, ts::kFloat64, ts::kInt64, ts::kInt8, ts::kBool}) {
    const ts::Tensor x = test_data({5, 6, 7}, dt, 2);
    for (const std::string& layout : kLayouts) {
      const ts::Tensor xg = on_gpu(x, layout);
      for (size_t c = 0; c < cases.size(); ++c) {
        Idx gi;
        for (const auto& t : cases[c]) gi.push_back(t ? std::optional<ts::Tensor>(t->to(kCuda)) : std::nullopt);
        EXPECT_TRUE(same(ts::index(xg, gi), ts::index(x, cases[c]))) << ts::dtype_name(dt) << " " << layout << " case " << c;
      }
    }
  }
}

TEST(CudaIndex, AdvancedIndexOutOfRangeRaisesIndexError) {
  TS_REQUIRE_GPU();
  const ts::Tensor x = test_data({5, 6}, ts::kFloat32).to(kCuda);
  std::string msg = message_of<ts::IndexError>([&] { ts::index(x, {ints({0, 5}).to(kCuda)}); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "index: index 5 is out of bounds for dimension 0 with size 5")) << msg;
  msg = message_of<ts::IndexError>([&] { ts::index(x, {ints({-6}).to(kCuda)}); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "index -6 is out of bounds for dimension 0 with size 5")) << msg;
  // The first bad position is reported, then the first index tensor at that position.
  msg = message_of<ts::IndexError>([&] { ts::index(x, {ints({1, 2, 9}).to(kCuda), ints({8, 1, 1}).to(kCuda)}); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "index 8 is out of bounds for dimension 1 with size 6")) << msg;
  msg = message_of<ts::IndexError>([&] { ts::index_put(x, {ints({7}).to(kCuda)}, ts::zeros({6}, ts::TensorOptions(ts::kFloat32, kCuda))); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "index_put: index 7 is out of bounds for dimension 0 with size 5")) << msg;
  // Validated even when the result is empty (as the CPU kernel does).
  const ts::Tensor e = ts::zeros({5, 0}, ts::TensorOptions(ts::kFloat32, kCuda));
  EXPECT_THROW({ ts::index(e, {ints({5}).to(kCuda)}); ts::cuda::synchronize(); }, ts::IndexError);
}

TEST(CudaIndex, IndexPutMatchesCpu) {
  TS_REQUIRE_GPU();
  using Idx = std::vector<std::optional<ts::Tensor>>;
  struct Case {
    Idx idx;
    ts::Shape values;
  };
  const std::vector<Case> cases = {
      {{ints({1, 3, 1, 5, 3, -1})}, {6, 4}},     // repeated rows: the last write wins / every value adds
      {{ints({0, 2, 5})}, {3, 4}},               // strictly increasing: no repeats
      {{ints({4, 4, 4})}, {4}},                  // values broadcast over the indexed rows
      {{std::nullopt, ints({3, 0, 3})}, {6, 3}}, // a pre dim
      {{ints({2, 2, 0}), ints({1, 1, 3})}, {3}}, // two index tensors, a repeated (row, col)
      {{test_data({6, 4}, ts::kBool, 9)}, {}},   // mask, scalar value
  };
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor x = int_valued({6, 4}, dt, 5);
    for (const std::string& layout : kLayouts) {
      const ts::Tensor xg = on_gpu(x, layout);
      for (size_t c = 0; c < cases.size(); ++c) {
        const ts::Tensor v = int_valued(cases[c].values, dt, 17 + c);
        Idx gi;
        for (const auto& t : cases[c].idx) gi.push_back(t ? std::optional<ts::Tensor>(t->to(kCuda)) : std::nullopt);
        for (bool acc : {false, true}) {
          EXPECT_TRUE(same(ts::index_put(xg, gi, on_gpu(v, layout), acc), ts::index_put(x, cases[c].idx, v, acc)))
              << ts::dtype_name(dt) << " " << layout << " case " << c << " accumulate " << acc;
        }
      }
    }
  }
}

TEST(CudaIndex, IndexAddMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor x = int_valued({5, 4, 3}, dt, 1);
    for (int64_t dim : {0, 1, 2}) {
      const ts::Tensor idx = ints({0, 2, 2, 1, 0, 2}).remainder(x.size(dim));
      ts::Shape ss = x.sizes();
      ss[dim] = idx.numel();
      const ts::Tensor src = int_valued(ss, dt, 7 + dim);
      const ts::Scalar alpha = dt == ts::kBool ? ts::Scalar(true) : ts::is_floating_point(dt) ? ts::Scalar(0.5) : ts::Scalar(2);
      for (const std::string& layout : kLayouts) {
        for (ts::DType it : {ts::kInt64, ts::kInt32}) {
          EXPECT_TRUE(same(ts::index_add(on_gpu(x, layout), dim, idx.to(it).to(kCuda), on_gpu(src, layout), alpha),
                           ts::index_add(x, dim, idx.to(it), src, alpha)))
              << ts::dtype_name(dt) << " dim " << dim << " " << layout;
        }
      }
    }
  }
  const ts::Tensor x = ts::zeros({3, 2}, ts::TensorOptions(ts::kFloat32, kCuda));
  EXPECT_THROW(
      {
        ts::index_add(x, 0, ints({3}).to(kCuda), ts::ones({1, 2}, ts::TensorOptions(ts::kFloat32, kCuda)));
        ts::cuda::synchronize();
      },
      ts::IndexError);
}

// Floats with repeated targets: atomics sum in any order (equal to the CPU up to rounding); the
// deterministic path (set_deterministic(true)) sums in index order, bit for bit as the CPU.
TEST(CudaIndex, AccumulateRepeatedTargetsFloat) {
  TS_REQUIRE_GPU();
  const ts::Tensor x = test_data({64, 33}, ts::kFloat32, 4);
  std::vector<int64_t> iv(4000);
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int64_t>((i * 7919) % 61);
  const ts::Tensor index = ints(iv);
  const ts::Tensor v = test_data({4000, 33}, ts::kFloat32, 8);
  const ts::Tensor ref = ts::index_put(x, {index}, v, true);
  const Tolerance loose{1e-5, 1e-4};
  EXPECT_TRUE(same(ts::index_put(x.to(kCuda), {index.to(kCuda)}, v.to(kCuda), true), ref, loose));
  const ts::Tensor line = test_data({100}, ts::kFloat32, 6), src = test_data({5000}, ts::kFloat32, 7);
  std::vector<int64_t> lv(5000);
  for (size_t i = 0; i < lv.size(); ++i) lv[i] = static_cast<int64_t>((i * 31) % 97);
  const ts::Tensor lidx = ints(lv);
  const ts::Tensor sref = ts::scatter_add(line, 0, lidx, src);
  EXPECT_TRUE(same(ts::scatter_add(line.to(kCuda), 0, lidx.to(kCuda), src.to(kCuda)), sref, loose));

  ts::set_deterministic(true);
  const ts::Tensor a = ts::index_put(x.to(kCuda), {index.to(kCuda)}, v.to(kCuda), true);
  const ts::Tensor b = ts::index_put(x.to(kCuda), {index.to(kCuda)}, v.to(kCuda), true);
  const ts::Tensor s = ts::scatter_add(line.to(kCuda), 0, lidx.to(kCuda), src.to(kCuda));
  ts::set_deterministic(false);
  EXPECT_TRUE(same(a, ref));
  EXPECT_TRUE(same(b, a.cpu()));
  EXPECT_TRUE(same(s, sref));
}

// ---- embedding ------------------------------------------------------------------------------------------

TEST(CudaIndex, EmbeddingForwardBackwardMatchesCpu) {
  TS_REQUIRE_GPU();
  const int64_t V = 50257, D = 768;
  const std::vector<int64_t> tokens = [] {
    std::vector<int64_t> t(16384);
    uint64_t s = 12345;
    for (auto& v : t) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      v = static_cast<int64_t>((s >> 33) % 50257);
      if ((s >> 20) % 8 == 0) v = 13;  // a frequent token: many repeats of one row
    }
    return t;
  }();
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16}) {
    for (ts::DType it : {ts::kInt64, ts::kInt32}) {
      const ts::Tensor w = int_valued({V, D}, dt, 21);
      const ts::Tensor idx = ints(tokens, it).reshape({8, 2048});
      const ts::Tensor g = int_valued({8, 2048, D}, dt, 22);
      ts::Tensor wc = w.clone().requires_grad_();
      ts::Tensor outc = ts::embedding(wc, idx, 13);
      outc.backward(g);
      ts::Tensor wg = w.to(kCuda).requires_grad_();
      ts::Tensor outg = ts::embedding(wg, idx.to(kCuda), 13);
      EXPECT_TRUE(same(outg, outc.detach())) << ts::dtype_name(dt);
      outg.backward(g.to(kCuda));
      // Integer-valued gradients: the sums are exact whatever the order of the atomic adds (bf16
      // holds these sums exactly: at most ~2000 terms of |v| <= 5 per row, well inside 2^8 * 2^k).
      EXPECT_TRUE(same(wg.grad(), wc.grad(), dt == ts::kBFloat16 ? tolerance_for(dt) : Tolerance{0, 0}))
          << ts::dtype_name(dt) << " " << ts::dtype_name(it);
    }
  }
}

TEST(CudaIndex, EmbeddingOutOfRangeRaisesIndexError) {
  TS_REQUIRE_GPU();
  const ts::Tensor w = test_data({10, 4}, ts::kFloat32).to(kCuda);
  std::string msg = message_of<ts::IndexError>([&] { ts::embedding(w, ints({1, 10, 2}).to(kCuda)); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "embedding: index 10 is out of bounds for dimension 0 with size 10")) << msg;
  EXPECT_THROW({ ts::embedding(w, ints({-1}, ts::kInt32).to(kCuda)); ts::cuda::synchronize(); }, ts::IndexError);
}

// ---- gather, scatter -------------------------------------------------------------------------------------

TEST(CudaIndex, GatherMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor x = test_data({4, 5, 6}, dt, 3);
    for (int64_t dim : {0, 1, 2}) {
      ts::Shape is = {3, 4, 5};
      is[dim] = 7;  // longer than self along dim: repeats
      const ts::Tensor index = test_data(is, ts::kInt64, 9 + dim, 0, x.size(dim));
      for (const std::string& layout : kLayouts) {
        EXPECT_TRUE(same(ts::gather(on_gpu(x, layout), dim, on_gpu(index, layout)), ts::gather(x, dim, index)))
            << ts::dtype_name(dt) << " dim " << dim << " " << layout;
      }
    }
  }
  const ts::Tensor x = test_data({3, 4}, ts::kFloat32);
  const ts::Tensor e = ts::zeros({3, 0}, ts::TensorOptions(ts::kInt64));
  EXPECT_TRUE(same(ts::gather(x.to(kCuda), 1, e.to(kCuda)), ts::gather(x, 1, e)));
  const ts::Tensor s = ts::tensor({4.0}).reshape({});
  EXPECT_TRUE(same(ts::gather(s.to(kCuda), 0, ints({0}).reshape({}).to(kCuda)), ts::gather(s, 0, ints({0}).reshape({}))));
}

TEST(CudaIndex, GatherOutOfRangeRaisesIndexError) {
  TS_REQUIRE_GPU();
  const ts::Tensor x = test_data({4, 5}, ts::kFloat32).to(kCuda);
  std::string msg = message_of<ts::IndexError>([&] { ts::gather(x, 1, ints({0, 1, 5, 2}).reshape({2, 2}).to(kCuda)); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "gather: index 5 is out of bounds for dimension 1 with size 5")) << msg;
  EXPECT_THROW({ ts::gather(x, 0, ints({-1}).reshape({1, 1}).to(kCuda)); ts::cuda::synchronize(); }, ts::IndexError);
}

TEST(CudaIndex, ScatterMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    // Along every dim: 3 values per line (one thread per line) and 6 (a thread per value).
    const ts::Tensor x = int_valued({4, 5, 6}, dt, 3);
    for (int64_t dim : {0, 1, 2}) {
      for (int64_t J : {3, 6}) {
        ts::Shape is = {3, 4, 5}, ss = {4, 5, 6};
        is[dim] = J;
        ss[dim] = J;
        const ts::Tensor index = test_data(is, ts::kInt64, 9 + dim, 0, x.size(dim));
        const ts::Tensor src = int_valued(ss, dt, 5 + dim);
        for (const std::string& layout : kLayouts) {
          const ts::Tensor xg = on_gpu(x, layout), ig = on_gpu(index, layout), sg = on_gpu(src, layout);
          const std::string what = std::string(ts::dtype_name(dt)) + " dim " + std::to_string(dim) + " J " +
                                   std::to_string(J) + " " + layout;
          EXPECT_TRUE(same(ts::scatter(xg, dim, ig, sg), ts::scatter(x, dim, index, src))) << what;
          EXPECT_TRUE(same(ts::scatter(xg, dim, ig, ts::Scalar(1)), ts::scatter(x, dim, index, ts::Scalar(1)))) << what;
          EXPECT_TRUE(same(ts::scatter_add(xg, dim, ig, sg), ts::scatter_add(x, dim, index, src))) << what;
        }
      }
    }
    // Many lines of 8 values (one thread per line).
    const ts::Tensor wide = int_valued({20000, 10}, dt, 20);
    const ts::Tensor widx = test_data({20000, 8}, ts::kInt64, 21, 0, 10);
    const ts::Tensor wsrc = int_valued({20000, 8}, dt, 22);
    EXPECT_TRUE(same(ts::scatter(wide.to(kCuda), 1, widx.to(kCuda), wsrc.to(kCuda)), ts::scatter(wide, 1, widx, wsrc)));
    EXPECT_TRUE(same(ts::scatter_add(wide.to(kCuda), 1, widx.to(kCuda), wsrc.to(kCuda)), ts::scatter_add(wide, 1, widx, wsrc)));
    // One long line with repeated targets (parallel path): the last write wins, sums are exact.
    const ts::Tensor line = int_valued({50}, dt, 4);
    const ts::Tensor lidx = test_data({3000}, ts::kInt64, 12, 0, 50);
    const ts::Tensor lsrc = int_valued({3000}, dt, 13);
    const ts::Tensor lg = line.to(kCuda), ig = lidx.to(kCuda), sg = lsrc.to(kCuda);
    EXPECT_TRUE(same(ts::scatter(lg, 0, ig, sg), ts::scatter(line, 0, lidx, lsrc))) << ts::dtype_name(dt);
    EXPECT_TRUE(same(ts::scatter(lg, 0, ig, ts::Scalar(0)), ts::scatter(line, 0, lidx, ts::Scalar(0))));
    if (dt != ts::kBFloat16) {  // bf16 rounds partial sums past 256, so their order would show
      EXPECT_TRUE(same(ts::scatter_add(lg, 0, ig, sg), ts::scatter_add(line, 0, lidx, lsrc))) << ts::dtype_name(dt);
    }
    // A few lines of many values.
    const ts::Tensor few = int_valued({3, 40}, dt, 14);
    const ts::Tensor fidx = test_data({3, 500}, ts::kInt64, 15, 0, 40);
    const ts::Tensor fsrc = int_valued({3, 500}, dt, 16);
    EXPECT_TRUE(same(ts::scatter(few.to(kCuda), 1, fidx.to(kCuda), fsrc.to(kCuda)), ts::scatter(few, 1, fidx, fsrc)));
  }
}

TEST(CudaIndex, ScatterOutOfRangeRaisesIndexError) {
  TS_REQUIRE_GPU();
  const ts::Tensor x = ts::zeros({4, 5}, ts::TensorOptions(ts::kFloat32, kCuda));
  const ts::Tensor src = ts::ones({4, 5}, ts::TensorOptions(ts::kFloat32, kCuda));
  std::string msg = message_of<ts::IndexError>([&] { ts::scatter(x, 0, ints({0, 1, 4}).reshape({1, 3}).to(kCuda), src); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "scatter: index 4 is out of bounds for dimension 0 with size 4")) << msg;
  msg = message_of<ts::IndexError>([&] { ts::scatter_add(x, 1, ints({-1}).reshape({1, 1}).to(kCuda), src); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "scatter_add: index -1 is out of bounds for dimension 1 with size 5")) << msg;
  const ts::Tensor line = ts::zeros({10}, ts::TensorOptions(ts::kFloat32, kCuda));
  const ts::Tensor bad = ints(std::vector<int64_t>(1000, 3)).index_put({ints({700})}, ints({10}));
  EXPECT_THROW(
      {
        ts::scatter_add(line, 0, bad.to(kCuda), ts::ones({1000}, ts::TensorOptions(ts::kFloat32, kCuda)));
        ts::cuda::synchronize();
      },
      ts::IndexError);
  EXPECT_THROW(
      {
        ts::scatter(line, 0, bad.to(kCuda), ts::ones({1000}, ts::TensorOptions(ts::kFloat32, kCuda)));
        ts::cuda::synchronize();
      },
      ts::IndexError);
}

// ---- masks ----------------------------------------------------------------------------------------------

TEST(CudaIndex, MaskedFillMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor x = test_data({4, 6}, dt, 2);
    for (const ts::Tensor& mask : {test_data({4, 6}, ts::kBool, 3), test_data({1, 6}, ts::kBool, 4), test_data({6}, ts::kBool, 5)}) {
      for (const std::string& layout : kLayouts) {
        for (const ts::Scalar& v : {ts::Scalar(2.5), ts::Scalar(7), ts::Scalar(true)}) {
          EXPECT_TRUE(same(ts::masked_fill(on_gpu(x, layout), on_gpu(mask, layout), v), ts::masked_fill(x, mask, v)))
              << ts::dtype_name(dt) << " " << layout;
        }
      }
    }
  }
}

TEST(CudaIndex, NonzeroAndMaskedSelectMatchCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    ts::Tensor x = test_data({7, 9, 5}, dt, 6, -1, 2);  // integers: many zeros
    if (ts::is_floating_point(dt)) {
      x = x.masked_fill(test_data({7, 9, 5}, ts::kBool, 8), 0.0);
      x.index_put_({ints({0}), ints({0}), ints({0})}, ts::tensor({std::nan("")}).reshape({}).to(dt));
      x.index_put_({ints({0}), ints({0}), ints({1})}, ts::tensor({-0.0}).reshape({}).to(dt));
    }
    const ts::Tensor mask = test_data({7, 9, 5}, ts::kBool, 10);
    for (const std::string& layout : kLayouts) {
      EXPECT_TRUE(same(ts::nonzero(on_gpu(x, layout)), ts::nonzero(x))) << ts::dtype_name(dt) << " " << layout;
      EXPECT_TRUE(same(ts::masked_select(on_gpu(x, layout), on_gpu(mask, layout)), ts::masked_select(x, mask)));
      EXPECT_TRUE(same(ts::masked_select(on_gpu(x, layout), on_gpu(mask.narrow(0, 0, 1), layout)),
                       ts::masked_select(x, mask.narrow(0, 0, 1))));
    }
  }
  // Many chunks of the ordered compaction.
  const ts::Tensor big = test_data({1 << 21}, ts::kFloat32, 3, -1, 1).gt(0.7);
  EXPECT_TRUE(same(ts::nonzero(big.to(kCuda)), ts::nonzero(big)));
  const ts::Tensor vals = test_data({1 << 21}, ts::kFloat32, 4);
  EXPECT_TRUE(same(ts::masked_select(vals.to(kCuda), big.to(kCuda)), ts::masked_select(vals, big)));
  // Empty, 0-dim, all-zero.
  const ts::Tensor e = ts::zeros({0, 3});
  EXPECT_TRUE(same(ts::nonzero(e.to(kCuda)), ts::nonzero(e)));
  const ts::Tensor s = ts::tensor({3.0}).reshape({});
  EXPECT_TRUE(same(ts::nonzero(s.to(kCuda)), ts::nonzero(s)));
  const ts::Tensor z = ts::zeros({4, 4});
  EXPECT_TRUE(same(ts::nonzero(z.to(kCuda)), ts::nonzero(z)));
}

TEST(CudaIndex, OneHotMatchesCpu) {
  TS_REQUIRE_GPU();
  const ts::Tensor idx = test_data({3, 4}, ts::kInt64, 5, 0, 6);
  for (const std::string& layout : kLayouts) {
    for (int64_t classes : {-1, 6, 9}) {
      EXPECT_TRUE(same(ts::one_hot(on_gpu(idx, layout), classes), ts::one_hot(idx, classes))) << layout << " " << classes;
    }
  }
  std::string msg = message_of<ts::IndexError>([&] { ts::one_hot(ints({1, 6, 2}).to(kCuda), 6); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "one_hot: class values must be non-negative and smaller than num_classes (6), got 6")) << msg;
  EXPECT_THROW({ ts::one_hot(ints({1, -1}).to(kCuda), -1); ts::cuda::synchronize(); }, ts::IndexError);
  EXPECT_THROW({ ts::one_hot(ints({0}).to(kCuda), 0); ts::cuda::synchronize(); }, ts::IndexError);
}

// ---- shape ops (index_map, tril/triu) and arange ----------------------------------------------------------

TEST(CudaIndex, ShapeOpsMatchCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    const ts::Tensor x = test_data({3, 4, 5}, dt, 7);
    for (const std::string& layout : kLayouts) {
      const ts::Tensor xg = on_gpu(x, layout);
      const std::string what = std::string(ts::dtype_name(dt)) + " " + layout;
      EXPECT_TRUE(same(ts::flip(xg, {0, 2}), ts::flip(x, {0, 2}))) << what;
      EXPECT_TRUE(same(ts::roll(xg, {2, -1}, {1, 2}), ts::roll(x, {2, -1}, {1, 2}))) << what;
      EXPECT_TRUE(same(ts::roll(xg, {3}), ts::roll(x, {3}))) << what;
      for (const char* mode : {"reflect", "replicate", "circular"})
        EXPECT_TRUE(same(ts::pad(xg, {2, 1, 1, 3}, mode), ts::pad(x, {2, 1, 1, 3}, mode))) << what << " " << mode;
      const ts::Tensor reps = ints({2, 0, 1, 3});
      EXPECT_TRUE(same(ts::repeat_interleave(xg, reps.to(kCuda), 1), ts::repeat_interleave(x, reps, 1))) << what;
      for (int64_t diag : {-7, -1, 0, 2, 9}) {
        EXPECT_TRUE(same(ts::tril(xg, diag), ts::tril(x, diag))) << what << " " << diag;
        EXPECT_TRUE(same(ts::triu(xg, diag), ts::triu(x, diag))) << what << " " << diag;
      }
    }
  }
  const ts::Tensor s = ts::tensor({1.5}).reshape({});
  EXPECT_TRUE(same(ts::flip(s.to(kCuda), {}), ts::flip(s, {})));
}

TEST(CudaIndex, ArangeMatchesCpu) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64, ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64}) {
    const ts::TensorOptions cpu(dt), gpu(dt, kCuda);
    EXPECT_TRUE(same(ts::arange(0, 300, 1, gpu), ts::arange(0, 300, 1, cpu))) << ts::dtype_name(dt);
    EXPECT_TRUE(same(ts::arange(-7, 90, 3, gpu), ts::arange(-7, 90, 3, cpu))) << ts::dtype_name(dt);
    EXPECT_TRUE(same(ts::arange(50, -20, -7, gpu), ts::arange(50, -20, -7, cpu))) << ts::dtype_name(dt);
    EXPECT_TRUE(same(ts::arange(0.25, 20.25, 0.37, gpu), ts::arange(0.25, 20.25, 0.37, cpu))) << ts::dtype_name(dt);
    EXPECT_TRUE(same(ts::arange(0, 0, 1, gpu), ts::arange(0, 0, 1, cpu))) << ts::dtype_name(dt);
  }
  EXPECT_TRUE(same(ts::arange(10, ts::TensorOptions(kCuda)), ts::arange(10)));
  EXPECT_THROW(ts::arange(3, ts::TensorOptions(ts::kBool, kCuda)), ts::DTypeError);
}

// ---- past 2^31 elements ------------------------------------------------------------------------------------

constexpr int64_t kBig = (int64_t(1) << 31) + 5;

// An int8 source of 2^31 + 5 elements (x[i] = int8(i), from arange's wrap-around) gathered at a few
// positions, the last included, then an index expanded to 2^31 + 5 positions (a 64-bit output).
TEST(CudaIndexLarge, GatherPast2To31Elements) {
  TS_REQUIRE_GPU();
  const ts::Tensor x = ts::arange(0, kBig, 1, ts::TensorOptions(ts::kInt8, kCuda));  // 2 GiB
  const std::vector<int64_t> pos = {0, 1, (int64_t(1) << 31) - 1, int64_t(1) << 31, kBig - 2, kBig - 1};
  const ts::Tensor got = ts::gather(x, 0, ints(pos).to(kCuda)).cpu();
  ASSERT_EQ(got.numel(), static_cast<int64_t>(pos.size()));
  const std::vector<int64_t> gv = got.tolist<int64_t>();
  for (size_t i = 0; i < pos.size(); ++i) EXPECT_EQ(gv[i], static_cast<int8_t>(pos[i])) << "position " << pos[i];
  std::string msg = message_of<ts::IndexError>([&] { ts::gather(x, 0, ints({5, kBig}).to(kCuda)); ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "gather: index " + std::to_string(kBig) + " is out of bounds")) << msg;

  const ts::Tensor index = ints({kBig - 1}).to(kCuda).expand({kBig});
  const ts::Tensor out = ts::gather(x, 0, index);  // 2 GiB of int8(kBig - 1)
  ASSERT_EQ(out.numel(), kBig);
  const std::vector<int64_t> tail = out.narrow(0, kBig - 3, 3).cpu().tolist<int64_t>();
  for (int64_t v : tail) EXPECT_EQ(v, static_cast<int8_t>(kBig - 1));
  EXPECT_EQ(out.narrow(0, 0, 1).cpu().tolist<int64_t>()[0], static_cast<int8_t>(kBig - 1));
  // index_select reads past 2^31 too (through the advanced-index kernel).
  const ts::Tensor sel = ts::index_select(x, 0, ints({kBig - 1, 3}).to(kCuda)).cpu();
  EXPECT_EQ(sel.tolist<int64_t>()[0], static_cast<int8_t>(kBig - 1));
}

TEST(CudaIndexLarge, ArangePast2To31Elements) {
  TS_REQUIRE_GPU();
  {
    const ts::Tensor a = ts::arange(0, kBig, 1, ts::TensorOptions(ts::kInt64, kCuda));  // 16 GiB
    ASSERT_EQ(a.numel(), kBig);
    const std::vector<int64_t> tail = a.narrow(0, kBig - 3, 3).cpu().tolist<int64_t>();
    EXPECT_EQ(tail, (std::vector<int64_t>{kBig - 3, kBig - 2, kBig - 1}));
  }
  {
    const ts::Tensor f = ts::arange(0.0, static_cast<double>(kBig), 1.0, ts::TensorOptions(ts::kFloat32, kCuda));
    ASSERT_EQ(f.numel(), kBig);
    const std::vector<double> tail = f.narrow(0, kBig - 1, 1).cpu().tolist<double>();
    EXPECT_EQ(tail[0], static_cast<double>(static_cast<float>(static_cast<double>(kBig - 1))));
  }
}

}  // namespace

// Note [Deferred device checks]: the op that reads a bad index does not wait for the device; the
// error raises at the next synchronization (or copy to the host), once, and the stream stays usable.
TEST(CudaIndex, BadIndexRaisesAtTheNextSynchronizationOnce) {
  TS_REQUIRE_GPU();
  const ts::Tensor x = ts::arange(20, ts::TensorOptions(ts::kFloat32, kCuda)).reshape({5, 4});
  const ts::Tensor good = ints({0, 4}).to(kCuda), bad = ints({1, 5}).to(kCuda);
  ts::cuda::synchronize();
  EXPECT_EQ(ts::cuda::pending_deferred_checks(), 0);
  ts::Tensor y;
  EXPECT_NO_THROW(y = ts::index_select(x, 0, bad));
  EXPECT_GE(ts::cuda::pending_deferred_checks(), 1);
  const std::string msg = message_of<ts::IndexError>([&] { ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg, "index_select: index 5 is out of bounds for dimension 0 with size 5")) << msg;
  EXPECT_EQ(ts::cuda::pending_deferred_checks(), 0);
  EXPECT_NO_THROW(ts::cuda::synchronize());  // raised once
  // item() waits for the device too: it raises a pending error.
  (void)ts::gather(x, 0, ints({7}).reshape({1, 1}).to(kCuda));
  EXPECT_THROW((void)x.sum().item(), ts::IndexError);
  // index_add (the embedding backward's accumulation) defers too; the good rows are added.
  ts::Tensor acc = ts::zeros({5, 4}, ts::TensorOptions(ts::kFloat32, kCuda));
  EXPECT_NO_THROW(acc.index_add_(0, ints({2, 9, 2}).to(kCuda), ts::ones({3, 4}, ts::TensorOptions(ts::kFloat32, kCuda))));
  const std::string msg2 = message_of<ts::IndexError>([&] { ts::cuda::synchronize(); });
  EXPECT_TRUE(contains(msg2, "index 9 is out of bounds for dimension 0 with size 5")) << msg2;
  EXPECT_EQ(acc.select(0, 2).sum().item().to_double(), 8.0);
  // Good indices leave nothing behind, and the stream works.
  const ts::Tensor z = ts::index_select(x, 0, good);
  EXPECT_TRUE(all_close(z.cpu(), ts::index_select(x.cpu(), 0, ints({0, 4}))));
  EXPECT_EQ(ts::cuda::pending_deferred_checks(), 0);
}
