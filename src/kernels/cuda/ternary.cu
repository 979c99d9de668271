// CUDA ternary kernels (where, lerp, addcmul, addcdiv, clamp) and the allclose test, with the
// semantics of the CPU's (kernels/cpu/ternary.cpp).
//
// Inputs arrive in the compute dtype (where's condition as bool) and broadcast to out; each op has a
// functor per dtype, launched through launch_elementwise (Note [GPU elementwise paths]) with two
// vectors per thread. Numbers (addcmul/addcdiv's value, lerp's scalar weight) are converted on the
// host into the accumulate type, as on the CPU. lerp with a scalar weight and clamp with one bound get
// `start` / `x` again as the unused operand from the op layer: the same addresses in the same thread,
// so the second read hits the cache rather than memory.
//
// allclose reduces to one flag: a kernel over the strided offsets of (a, b) stores 1 in a device word
// where an element is not close; the host reads the word back (one cudaMemcpyAsync and a stream
// synchronization: the slot returns a bool to the host).
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_math.cuh"
#include "ops/elementwise_kernel.h"

namespace tessera::cuda {
namespace {

constexpr int kTernaryUnroll = 2;

template <class T>
struct WhereOp {
  __device__ T operator()(bool m, T y, T z) const { return m ? y : z; }
};

template <class T>
struct LerpOp {  // floating only; weight from c, or `value` when value_weight
  using A = dacc_t<T>;
  A value;
  bool value_weight;
  __device__ T operator()(T s, T e, T w) const {
    return convert<T>(dm::lerp(convert<A>(s), convert<A>(e), value_weight ? value : convert<A>(w)));
  }
};

template <class T>
struct AddcmulOp {  // s + value * x * y
  using A = dacc_t<T>;
  A value;
  __device__ T operator()(T s, T x, T y) const {
    return convert<T>(static_cast<A>(convert<A>(s) + value * convert<A>(x) * convert<A>(y)));
  }
};

template <class T>
struct AddcdivOp {  // floating only: s + value * (x / y)
  using A = dacc_t<T>;
  A value;
  __device__ T operator()(T s, T x, T y) const {
    return convert<T>(convert<A>(s) + value * (convert<A>(x) / convert<A>(y)));
  }
};

template <class T>
struct ClampOp {  // min(max(x, lo), hi) with the bounds that are present; NaN-propagating
  using A = dacc_t<T>;
  bool has_min, has_max;
  __device__ T operator()(T xt, T lot, T hit) const {
    A x = convert<A>(xt);
    if (has_min) x = dm::nan_max(x, convert<A>(lot));
    if (has_max) x = dm::nan_min(x, convert<A>(hit));
    return convert<T>(x);
  }
};

void ternary_cuda(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, TernaryOp op,
                  const TernaryParams& p) {
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const ElementwiseIter it(out, {&a, &b, &c});
  const cudaStream_t stream = stream_of(out);
  dispatch_device_dtype(out.dtype(), "ternary", [&]<class T>(TypeTag<T>) {
    using A = dacc_t<T>;
    constexpr bool fp = is_floating_v<T>;
    constexpr bool is_bool = std::is_same_v<T, bool>;
    const A value = fp ? static_cast<A>(p.value.to_double()) : static_cast<A>(p.value.to_int());
    switch (op) {
      case TernaryOp::Where:
        launch_elementwise<kTernaryUnroll, T, bool, T, T>(it, WhereOp<T>{}, stream, "where");
        return;
      case TernaryOp::Lerp:
        if constexpr (fp) {
          launch_elementwise<kTernaryUnroll, T, T, T, T>(it, LerpOp<T>{value, p.value_weight}, stream, "lerp");
          return;
        }
        break;
      case TernaryOp::Addcmul:
        if constexpr (!is_bool) {
          launch_elementwise<kTernaryUnroll, T, T, T, T>(it, AddcmulOp<T>{value}, stream, "addcmul");
          return;
        }
        break;
      case TernaryOp::Addcdiv:
        if constexpr (fp) {
          launch_elementwise<kTernaryUnroll, T, T, T, T>(it, AddcdivOp<T>{value}, stream, "addcdiv");
          return;
        }
        break;
      case TernaryOp::Clamp:
        if constexpr (!is_bool) {
          launch_elementwise<kTernaryUnroll, T, T, T, T>(it, ClampOp<T>{p.has_min, p.has_max}, stream, "clamp");
          return;
        }
        break;
    }
    throw_unsupported_dtype("ternary kernel", out.dtype());
  });
}

// ---- allclose ----------------------------------------------------------------------------------------
// *not_close = 1 where some element has |a - b| > atol + rtol |b| (PyTorch's isclose), NaN equal to NaN
// only with equal_nan; floating values compare in double, integers exactly.
template <class T, class Calc>
__global__ void __launch_bounds__(kEwThreads)
    allclose_flag_kernel(StridedArgs<2, Calc> args, double rtol, double atol, bool equal_nan, int* not_close) {
  using Off = typename Calc::offset_t;
  using Index = typename Calc::index_t;
  bool all = true;
  for (int64_t i = int64_t(blockIdx.x) * kEwThreads + threadIdx.x; i < args.n; i += int64_t(gridDim.x) * kEwThreads) {
    Off off[2];
    args.calc.get(static_cast<Index>(i), off);
    const T xt = *reinterpret_cast<const T*>(args.data[0] + off[0]);
    const T yt = *reinterpret_cast<const T*>(args.data[1] + off[1]);
    bool close;
    if constexpr (is_floating_v<T>) {
      const double x = static_cast<double>(convert<dacc_t<T>>(xt)), y = static_cast<double>(convert<dacc_t<T>>(yt));
      close = x == y;
      if (!close && equal_nan && x != x && y != y) close = true;
      if (!close && x - x == 0.0 && y - y == 0.0) close = ::fabs(x - y) <= atol + rtol * ::fabs(y);  // both finite
    } else {
      close = xt == yt;
    }
    all = all && close;
  }
  if (!all) *not_close = 1;
}

void allclose_cuda(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan, bool* result) {
  *result = true;
  if (a.numel() == 0) return;
  CurrentDevice guard(a.device().index());
  const cudaStream_t stream = stream_of(a);
  const ElementwiseIter it(a, {&b});  // a is only read; operand 0 gives the shape
  DataPtr flag = allocate_workspace(sizeof(int));
  TS_CUDA_CHECK(cudaMemsetAsync(flag.get(), 0, sizeof(int), stream));
  int* not_close = static_cast<int*>(flag.get());
  dispatch_device_dtype(a.dtype(), "allclose", [&]<class T>(TypeTag<T>) {
    const int64_t es[2] = {static_cast<int64_t>(sizeof(T)), static_cast<int64_t>(sizeof(T))};
    const unsigned grid = grid_for(it.numel(), kEwThreads * 4);
    const EwGeometry<2> g(it);
    if (g.fits_in_int32(es))
      allclose_flag_kernel<T, OffsetCalc32<2>>
          <<<grid, kEwThreads, 0, stream>>>(strided_args<OffsetCalc32<2>>(g), rtol, atol, equal_nan, not_close);
    else
      allclose_flag_kernel<T, OffsetCalc64<2>>
          <<<grid, kEwThreads, 0, stream>>>(strided_args<OffsetCalc64<2>>(g), rtol, atol, equal_nan, not_close);
    check_launch("allclose", "allclose_flag_kernel");
  });
  int host = 0;
  TS_CUDA_CHECK(cudaMemcpyAsync(&host, not_close, sizeof(int), cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  *result = host == 0;
}

}  // namespace

void register_ternary_cuda() {
  ternary_kernel.set(DeviceType::CUDA, &ternary_cuda);
  allclose_kernel.set(DeviceType::CUDA, &allclose_cuda);
}

}  // namespace tessera::cuda
