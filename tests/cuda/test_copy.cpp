// GPU copies and fills against the CPU's: host to device, device to host and within a GPU, for every
// dtype and every dtype conversion, contiguous or not on either side, broadcast sources, misaligned
// starts, overlapping source and destination, empty and 0-dim tensors; non_blocking copies with
// page-locked host memory; copies between two GPUs where there are two.
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>

#include "common/test_util.h"
#include "runtime/storage.h"
#include "tensor/tensor_impl.h"

#if defined(TESSERA_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace ts = tessera;
using namespace tessera::testing;

namespace {

ts::Tensor td(const ts::Shape& s, ts::DType dt, uint64_t seed, double lo = -5, double hi = 5) {
  return test_data(s, dt, seed, lo, hi).reshape(s);
}

// Exact equality (NaN equal to NaN), dtype and sizes included.
::testing::AssertionResult same(const ts::Tensor& actual, const ts::Tensor& expected) {
  if (actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << "dtype " << ts::dtype_name(actual.dtype()) << ", expected "
                                         << ts::dtype_name(expected.dtype());
  return all_close(actual.is_cpu() ? actual : actual.cpu(), expected, Tolerance{0, 0});
}

// Values of every dtype's range that convert without undefined behaviour: quarter steps in
// [-100, 100) (non-negative where a floating value goes to uint8), over 33 x 517 elements.
ts::Tensor conversion_source(ts::DType src, ts::DType dst) {
  const int64_t n = 33 * 517;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    double x = static_cast<double>((i * 37) % 800 - 400) / 4.0;
    if (!ts::is_floating_point(src)) x = std::trunc(x);
    if (ts::is_floating_point(src) && dst == ts::kUInt8) x = std::fabs(x);
    if (src == ts::kUInt8) x = std::fabs(x);
    v[i] = x;
  }
  return ts::tensor(v, {33, 517}, ts::kFloat64).to(src);
}

}  // namespace

TEST(CudaCopy, RoundTripEveryDtype) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : all_dtypes()) {
    for (const ts::Shape& s : std::vector<ts::Shape>{{33, 517}, {1037}, {}, {0, 3}, {2, 3, 4}}) {
      SCOPED_TRACE(::testing::Message() << ts::dtype_name(dt) << " " << ::testing::PrintToString(s));
      const ts::Tensor x = td(s, dt, 1);
      const ts::Tensor g = x.to("cuda");
      ASSERT_TRUE(g.is_cuda());
      EXPECT_EQ(g.sizes(), x.sizes());
      EXPECT_TRUE(same(g.cpu(), x));
      EXPECT_TRUE(same(g.clone(), x));            // device to device, contiguous: one memcpy
      EXPECT_TRUE(same(x.cuda(0).cpu(), x));
    }
  }
}

TEST(CudaCopy, EveryConversionEachWay) {
  TS_REQUIRE_GPU();
  for (ts::DType src : all_dtypes()) {
    for (ts::DType dst : all_dtypes()) {
      SCOPED_TRACE(::testing::Message() << ts::dtype_name(src) << " -> " << ts::dtype_name(dst));
      const ts::Tensor x = conversion_source(src, dst);
      const ts::Tensor expected = x.to(dst);
      const ts::Tensor g = x.to("cuda");
      EXPECT_TRUE(same(g.to(dst), expected));                                   // within the GPU
      EXPECT_TRUE(same(x.to(ts::Device::cuda(0), dst), expected));              // host to device
      EXPECT_TRUE(same(g.to(ts::kCPU, dst), expected));                         // device to host
      EXPECT_TRUE(same(g.t().to(dst), expected.t()));                           // strided source
      EXPECT_TRUE(same(x.t().to(ts::Device::cuda(0), dst), expected.t()));      // strided host source
      EXPECT_TRUE(same(g.t().to(ts::kCPU, dst), expected.t()));                 // strided device source
      // Misaligned source and destination (start at element 1).
      ts::Tensor gs = ts::empty({x.numel() + 1}, {src, "cuda"}).narrow(0, 1, x.numel()).view(x.sizes());
      gs.copy_(g);
      ts::Tensor gd = ts::empty({x.numel() + 1}, {dst, "cuda"}).narrow(0, 1, x.numel()).view(x.sizes());
      gd.copy_(gs);
      EXPECT_TRUE(same(gd, expected));
    }
  }
}

TEST(CudaCopy, NonContiguousDestinations) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16, ts::kInt64, ts::kBool}) {
    SCOPED_TRACE(ts::dtype_name(dt));
    const ts::Tensor x = td({33, 517}, dt, 2);
    // Host to a sliced GPU destination; the untouched half of the buffer stays as it was.
    ts::Tensor buf = ts::zeros({33, 1034}, {dt, "cuda"});
    buf.slice(1, 0, std::nullopt, 2).copy_(x);
    ts::Tensor cbuf = ts::zeros({33, 1034}, dt);
    cbuf.slice(1, 0, std::nullopt, 2).copy_(x);
    EXPECT_TRUE(same(buf, cbuf));
    // GPU to a sliced host destination, same dtype and converting.
    ts::Tensor hbuf = ts::zeros({33, 1034}, dt);
    hbuf.slice(1, 1, std::nullopt, 2).copy_(x.to("cuda"));
    ts::Tensor ebuf = ts::zeros({33, 1034}, dt);
    ebuf.slice(1, 1, std::nullopt, 2).copy_(x);
    EXPECT_TRUE(same(hbuf, ebuf));
    ts::Tensor hf = ts::zeros({517, 33}, ts::kFloat64);
    hf.t().copy_(x.to("cuda"));
    EXPECT_TRUE(same(hf, x.to(ts::kFloat64).t().contiguous()));
    // GPU to a transposed GPU destination.
    ts::Tensor gt = ts::empty({517, 33}, {dt, "cuda"});
    gt.t().copy_(x.to("cuda"));
    EXPECT_TRUE(same(gt, x.t().contiguous()));
  }
}

// Note [Wide strided copies]: transposes of outer dims with a contiguous last dim move 16-, 8- or
// 4-byte units, a source broadcast along an outer dim too; rows that are no whole number of units
// and a misaligned base take narrower units or the element path. Bitwise against the CPU.
TEST(CudaCopy, WideStridedCopies) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kBFloat16, ts::kFloat32, ts::kInt8, ts::kFloat64}) {
    for (int64_t d : {64, 8, 6, 3, 1}) {
      SCOPED_TRACE(ts::detail::str_cat(ts::dtype_name(dt), " D ", d));
      const ts::Tensor x = td({3, 5, 7, d}, dt, 6);  // (B, T, H, D)
      const ts::Tensor g = x.to("cuda");
      EXPECT_TRUE(same(g.transpose(1, 2).contiguous(), x.transpose(1, 2).contiguous()));  // (B, H, T, D)
      EXPECT_TRUE(same(g.permute({2, 0, 1, 3}).contiguous(), x.permute({2, 0, 1, 3}).contiguous()));
      // Into a narrowed destination (a cat's slot), and from a base one element in (misaligned).
      ts::Tensor buf = ts::zeros({3, 5, 9, d}, {dt, "cuda"});
      buf.narrow(2, 1, 7).copy_(g);
      ts::Tensor cbuf = ts::zeros({3, 5, 9, d}, dt);
      cbuf.narrow(2, 1, 7).copy_(x);
      EXPECT_TRUE(same(buf, cbuf));
      const ts::Tensor flat = td({3 * 5 * 7 * d + 1}, dt, 7);
      const ts::Tensor off = flat.to("cuda").narrow(0, 1, 3 * 5 * 7 * d).view({3, 5, 7, d});
      EXPECT_TRUE(same(off.transpose(1, 2).contiguous(),
                       flat.narrow(0, 1, 3 * 5 * 7 * d).view({3, 5, 7, d}).transpose(1, 2).contiguous()));
      // A source broadcast along an outer dim.
      ts::Tensor e = ts::empty({3, 4, 7, d}, {dt, "cuda"});
      e.copy_(g.narrow(1, 0, 1).expand({3, 4, 7, d}));
      EXPECT_TRUE(same(e, x.narrow(1, 0, 1).expand({3, 4, 7, d}).contiguous()));
    }
  }
}

TEST(CudaCopy, BroadcastSources) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat16, ts::kFloat32, ts::kInt8, ts::kInt64}) {
    SCOPED_TRACE(ts::dtype_name(dt));
    const ts::Tensor row = td({517}, dt, 3), col = td({33, 1}, dt, 4), one = td({}, dt, 5);
    for (const ts::Tensor* src : {&row, &col, &one}) {
      const ts::Tensor expected = src->expand({33, 517}).contiguous();
      ts::Tensor g = ts::empty({33, 517}, {dt, "cuda"});
      g.copy_(*src);  // host source, broadcast on the GPU
      EXPECT_TRUE(same(g, expected));
      ts::Tensor g2 = ts::empty({33, 517}, {dt, "cuda"});
      g2.copy_(src->to("cuda"));  // within the GPU
      EXPECT_TRUE(same(g2, expected));
      ts::Tensor h = ts::empty({33, 517}, dt);
      h.copy_(src->to("cuda"));  // device to host, broadcast on the CPU
      EXPECT_TRUE(same(h, expected));
      ts::Tensor g3 = ts::empty({33, 517}, {ts::kFloat64, "cuda"});
      g3.copy_(*src);  // host source, broadcast and converted on the GPU
      EXPECT_TRUE(same(g3, expected.to(ts::kFloat64)));
    }
  }
}

TEST(CudaCopy, OverlappingSourceAndDestination) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat32, ts::kUInt8}) {
    const ts::Tensor x = td({5000}, dt, 6);
    ts::Tensor g = x.to("cuda"), c = x.clone();
    g.narrow(0, 1, 4999).copy_(g.narrow(0, 0, 4999));  // shift right by one
    c.narrow(0, 1, 4999).copy_(c.narrow(0, 0, 4999));
    EXPECT_TRUE(same(g, c)) << ts::dtype_name(dt);
    g.narrow(0, 0, 4999).copy_(g.narrow(0, 1, 4999));  // and back left
    c.narrow(0, 0, 4999).copy_(c.narrow(0, 1, 4999));
    EXPECT_TRUE(same(g, c)) << ts::dtype_name(dt);
    g.copy_(g);  // itself: nothing to do
    EXPECT_TRUE(same(g, c)) << ts::dtype_name(dt);
  }
}

TEST(CudaCopy, EmptyAndZeroDim) {
  TS_REQUIRE_GPU();
  ts::Tensor e = ts::empty({0, 4}, {ts::kFloat32, "cuda"});
  e.copy_(ts::empty({0, 4}));
  EXPECT_EQ(e.cpu().numel(), 0);
  ts::Tensor s = ts::full({}, 2.5, {ts::kFloat32, "cuda"});
  EXPECT_EQ(s.item<double>(), 2.5);
  EXPECT_EQ(s.to(ts::kInt32).item<int64_t>(), 2);
  EXPECT_EQ(ts::scalar_tensor(7, {ts::kInt64, "cuda"}).cpu().item<int64_t>(), 7);
}

TEST(CudaCopy, FillEveryDtypeAndLayout) {
  TS_REQUIRE_GPU();
  const std::vector<ts::Scalar> values = {ts::Scalar(0), ts::Scalar(1), ts::Scalar(-2.75), ts::Scalar(true),
                                          ts::Scalar(int64_t(77)), ts::Scalar(300), ts::Scalar(1e-3)};
  for (ts::DType dt : all_dtypes()) {
    for (const ts::Scalar& v : values) {
      SCOPED_TRACE(::testing::Message() << ts::dtype_name(dt) << " value " << v);
      // Contiguous (odd size), misaligned, strided: filled views of a zeroed buffer, buffer compared.
      for (int layout = 0; layout < 3; ++layout) {
        ts::Tensor g = ts::zeros({2 * 1037 + 1}, {dt, "cuda"}), c = ts::zeros({2 * 1037 + 1}, dt);
        auto view = [layout](const ts::Tensor& b) {
          if (layout == 0) return b.narrow(0, 0, 1037);
          if (layout == 1) return b.narrow(0, 1, 1037);
          return b.slice(0, 1, std::nullopt, 2);
        };
        view(g).fill_(v);
        view(c).fill_(v);
        EXPECT_TRUE(same(g, c)) << "layout " << layout;
      }
    }
  }
}

TEST(CudaCopy, CopiesOnAnotherStream) {
  TS_REQUIRE_GPU();
  ts::cuda::Stream s = ts::cuda::Stream::create();
  const ts::Tensor x = td({33, 517}, ts::kFloat32, 7);
  ts::Tensor back;
  {
    ts::cuda::StreamGuard guard(s);
    ts::Tensor g = x.to("cuda");
    back = g.t().to(ts::kCPU, ts::kBFloat16);
  }
  EXPECT_TRUE(same(back, x.t().to(ts::kBFloat16)));
}

// ---- non_blocking and page-locked host memory --------------------------------------------------------------
#if defined(TESSERA_WITH_CUDA)
namespace {

// A CPU tensor over memory from cudaHostAlloc (page-locked), freed with the tensor.
ts::Tensor pinned_empty(const ts::Shape& sizes, ts::DType dt) {
  const size_t nbytes = static_cast<size_t>(ts::numel_of(sizes)) * ts::element_size(dt);
  void* p = nullptr;
  if (cudaHostAlloc(&p, nbytes ? nbytes : 1, cudaHostAllocDefault) != cudaSuccess)
    throw std::runtime_error("cudaHostAlloc failed");
  auto storage = std::make_shared<ts::Storage>(ts::DataPtr(p, p, [](void* q) { (void)cudaFreeHost(q); }), nbytes, ts::kCPU);
  return ts::Tensor(std::make_shared<ts::TensorImpl>(storage, dt, sizes, ts::contiguous_strides(sizes), 0));
}

}  // namespace

TEST(CudaCopy, NonBlockingWithPinnedMemory) {
  TS_REQUIRE_GPU();
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16, ts::kUInt8}) {
    SCOPED_TRACE(ts::dtype_name(dt));
    const ts::Tensor x = td({257, 1031}, dt, 8);
    ts::Tensor pinned = pinned_empty(x.sizes(), dt);
    std::memcpy(pinned.data_ptr(), x.data_ptr(), x.nbytes());

    // Host to device, asynchronous: valid after a synchronization.
    ts::Tensor g = ts::empty(x.sizes(), {dt, "cuda"});
    g.copy_(pinned, /*non_blocking=*/true);
    ts::cuda::current_stream().synchronize();
    EXPECT_TRUE(same(g, x));

    // Device to host, asynchronous, same dtype and converting on the GPU first.
    ts::Tensor back = pinned_empty(x.sizes(), dt);
    back.copy_(g.add(1), /*non_blocking=*/true);
    ts::Tensor back32 = pinned_empty(x.sizes(), ts::kFloat32);
    back32.copy_(g, /*non_blocking=*/true);
    ts::cuda::current_stream().synchronize();
    EXPECT_TRUE(same(back, x.add(1)));
    EXPECT_TRUE(same(back32, x.to(ts::kFloat32)));

    // Blocking copies from and to pinned memory: the host may reuse or read it at once.
    ts::Tensor g2 = ts::empty(x.sizes(), {dt, "cuda"});
    g2.copy_(pinned);
    std::memset(pinned.data_ptr(), 0, pinned.nbytes());
    EXPECT_TRUE(same(g2, x));
    ts::Tensor back2 = pinned_empty(x.sizes(), dt);
    back2.copy_(g2);
    EXPECT_TRUE(all_close(back2, x, Tolerance{0, 0}));

    // to(device, non_blocking) and cuda(index, non_blocking) from pinned and from pageable memory.
    std::memcpy(pinned.data_ptr(), x.data_ptr(), x.nbytes());
    ts::Tensor a = pinned.to("cuda", /*non_blocking=*/true), b = x.cuda(0, /*non_blocking=*/true);
    ts::cuda::current_stream().synchronize();
    EXPECT_TRUE(same(a, x));
    EXPECT_TRUE(same(b, x));
  }
}
#else
TEST(CudaCopy, NonBlockingWithPinnedMemory) {
  TS_REQUIRE_GPU();
  GTEST_SKIP() << "the GPU tests were built without the CUDA runtime";
}
#endif

TEST(CudaCopy, BetweenTwoGpus) {
  TS_REQUIRE_GPU();
  if (ts::cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const ts::Device d0 = ts::Device::cuda(0), d1 = ts::Device::cuda(1);
  for (ts::DType dt : {ts::kFloat32, ts::kBFloat16, ts::kInt64}) {
    SCOPED_TRACE(ts::dtype_name(dt));
    const ts::Tensor x = td({33, 517}, dt, 9);
    const ts::Tensor g0 = x.to(d0);
    const ts::Tensor g1 = g0.to(d1);
    EXPECT_EQ(g1.device(), d1);
    EXPECT_TRUE(same(g1, x));                                    // contiguous: one peer copy
    EXPECT_TRUE(same(g0.t().to(d1), x.t().contiguous()));       // strided source
    EXPECT_TRUE(same(g0.to(d1, ts::kFloat64), x.to(ts::kFloat64)));  // converting
    ts::Tensor t1 = ts::empty({517, 33}, {dt, d1});
    t1.t().copy_(g0);                                            // strided destination
    EXPECT_TRUE(same(t1, x.t().contiguous()));
    ts::Tensor b1 = ts::empty({33, 517}, {dt, d1});
    b1.copy_(g0.select(0, 3));                                   // broadcast source
    EXPECT_TRUE(same(b1, x.select(0, 3).expand({33, 517}).contiguous()));
    EXPECT_TRUE(same(g1.to(d0), x));                             // and back
  }
}

// Autograd through copies between devices: each gradient arrives on its own input's device (the
// gradient of `.cpu()` goes back to the GPU, that of `.cuda()` to the host).
TEST(CudaCopy, GradientsFlowBackAcrossDevices) {
  TS_REQUIRE_GPU();
  ts::Tensor x = test_data({3, 4}, ts::kFloat32, 11).requires_grad_();
  ts::Tensor y = (x.cuda() * 3.0).cpu().sum();  // host leaf -> GPU op -> host sum
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(x.grad().is_cpu());
  EXPECT_TRUE(all_close(x.grad(), ts::full({3, 4}, 3.0f), tolerance_for(ts::kFloat32)));
  ts::Tensor g = test_data({5}, ts::kFloat32, 12).cuda().requires_grad_();
  ts::Tensor z = (g.cpu() * g.cpu()).sum();  // GPU leaf -> host ops
  z.backward();
  ASSERT_TRUE(g.grad().defined());
  EXPECT_TRUE(g.grad().is_cuda());
  EXPECT_TRUE(all_close(g.grad().cpu(), g.detach().cpu() * 2.0, tolerance_for(ts::kFloat32)));
}
