// CUDA kernels of the random family (ops/random_kernel.h): uniform_, normal_, bernoulli (scalar and
// tensor p) here; random_ in random_int.cu; randperm and multinomial in random_sort.cu. All of them
// write the CPU kernels' numbers for the same PhiloxParams (Note [Philox stream]), bit for bit except
// where a libm function is involved (Note [Random rounding], random_transforms.cuh).
//
// Each fill is one launch of philox_fill_kernel (random_common.cuh) with an element functor. The
// data-dependent check of bernoulli's tensor p runs first as its own kernel and returns the first bad
// index to the host (a stream synchronization: the slot must raise ValueError before drawing; under
// CUDA graph capture, where no result can come back, the check is skipped).
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/random_common.cuh"
#include "runtime/cuda/graph_capture.h"
#include "tessera/error.h"

namespace tessera::cuda {

// ---- output layout (random_common.cuh) --------------------------------------------------------------
RandomLayout random_layout(const Tensor& out, const char* op) {
  RandomLayout L;
  L.data = out.data_ptr();
  L.numel = out.numel();
  int nd = 0;
  int64_t sizes[kRandomMaxDims + 1], strides[kRandomMaxDims + 1];
  for (int64_t d = 0; d < out.dim(); ++d) {
    const int64_t s = out.size(d), st = out.stride(d);
    if (s == 1) continue;
    if (nd > 0 && strides[nd - 1] == st * s) {  // the outer dim steps over exactly this one: merge
      sizes[nd - 1] *= s;
      strides[nd - 1] = st;
      continue;
    }
    TS_CHECK(nd < kRandomMaxDims, ShapeError, op, ": outputs whose layout has more than ", kRandomMaxDims,
             " non-mergeable dims are not supported on cuda (sizes ", out.sizes(), ", strides ", out.strides(), ")");
    sizes[nd] = s;
    strides[nd] = st;
    ++nd;
  }
  L.ndim = nd;
  L.contiguous = nd == 0 || (nd == 1 && strides[0] == 1);
  int64_t reach = 0;  // largest |element offset|
  for (int d = 0; d < nd; ++d) {
    L.sizes[d] = sizes[d];
    L.strides[d] = strides[d];
    reach += (sizes[d] - 1) * (strides[d] < 0 ? -strides[d] : strides[d]);
  }
  const int64_t lim = std::numeric_limits<int32_t>::max();
  L.index32 = L.numel <= lim && reach <= lim;
  return L;
}

namespace {

// ---- uniform_ -----------------------------------------------------------------------------------------
// The host side of the clamp below `to`, as kernels/cpu/random.cpp computes it (host element types).
template <class H>
H next_down(H v) {
  if constexpr (std::is_same_v<H, float> || std::is_same_v<H, double>) {
    return std::nextafter(v, -std::numeric_limits<H>::infinity());
  } else {
    uint16_t b = v.x;
    if ((b & 0x7fffu) == 0) return H(static_cast<uint16_t>(0x8001u), FromBits{});  // +-0 -> -min subnormal
    b = (b & 0x8000u) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b - 1);
    return H(b, FromBits{});
  }
}
template <class H>
double as_double(H v) {
  return static_cast<double>(static_cast<acc_t<H>>(v));
}
template <class H>
H round_host(double v) {
  return static_cast<H>(static_cast<acc_t<H>>(v));
}
// The largest value of H strictly below `to`, but not below `from` rounded to H.
template <class H>
H largest_below(double from, double to) {
  H hi = round_host<H>(to);
  while (as_double(hi) >= to) hi = next_down(hi);
  H lo = round_host<H>(from);
  return as_double(hi) < as_double(lo) ? lo : hi;
}

// out = from + range * u rounded once to T; a value that rounds to `to` or above becomes `hi`.
template <class T, int W>
struct UniformOp {
  double from, range, to;
  T hi;
  __device__ __forceinline__ T operator()(int64_t, const uint32_t* w) const {
    double u;
    if constexpr (W == 2) u = rnd::unit_uniform_2words(w[0], w[1]);
    else u = rnd::unit_uniform_1word(w[0]);
    const T r = round_from_double<T>(rnd::uniform_value(from, range, u));
    return widen(r) >= to ? hi : r;
  }
};

void uniform_cuda(const Tensor& out, double from, double to, PhiloxParams p) {
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const RandomLayout L = random_layout(out, "uniform_");
  cudaStream_t stream = stream_of(out);
  dispatch_floating(out.dtype(), "uniform_", [&]<class H>(TypeTag<H>) {
    using T = device_t<H>;
    const H hi = from < to ? largest_below<H>(from, to) : round_host<H>(from);
    const T hi_dev = convert<T>(as_double(hi));  // hi is a value of H: exact through double
    constexpr int W = std::is_same_v<H, double> ? 2 : 1;
    launch_philox_fill<T, W>(L, p, UniformOp<T, W>{from, to - from, to, hi_dev}, stream, "uniform_");
  });
}

// ---- normal_ ------------------------------------------------------------------------------------------
// float64: one draw from the whole block; every other dtype: from two words, computed in float.
struct NormalDoubleOp {
  double mean, std;
  __device__ __forceinline__ double operator()(int64_t, const uint32_t* w) const {
    return rnd::normal_double(mean, std, rnd::standard_normal_double(w));
  }
};
template <class T>
struct NormalFloatOp {
  float mean, std;
  __device__ __forceinline__ T operator()(int64_t, const uint32_t* w) const {
    return round_from_float<T>(rnd::normal_float(mean, std, rnd::standard_normal_float(w[0], w[1])));
  }
};

void normal_cuda(const Tensor& out, double mean, double std, PhiloxParams p) {
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const RandomLayout L = random_layout(out, "normal_");
  cudaStream_t stream = stream_of(out);
  dispatch_floating(out.dtype(), "normal_", [&]<class H>(TypeTag<H>) {
    using T = device_t<H>;
    if constexpr (std::is_same_v<T, double>) {
      launch_philox_fill<double, 4>(L, p, NormalDoubleOp{mean, std}, stream, "normal_");
    } else {
      const NormalFloatOp<T> op{static_cast<float>(mean), static_cast<float>(std)};
      launch_philox_fill<T, 2>(L, p, op, stream, "normal_");
    }
  });
}

// ---- bernoulli_ (scalar p) ------------------------------------------------------------------------------
template <class T>
struct BernoulliScalarOp {
  double p;
  T one, zero;
  __device__ __forceinline__ T operator()(int64_t, const uint32_t* w) const {
    return rnd::bernoulli_draw(w[0], p) ? one : zero;
  }
};

void bernoulli_scalar_cuda(const Tensor& out, double prob, PhiloxParams p) {
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const RandomLayout L = random_layout(out, "bernoulli_");
  cudaStream_t stream = stream_of(out);
  dispatch_device_dtype(out.dtype(), "bernoulli_", [&]<class T>(TypeTag<T>) {
    const BernoulliScalarOp<T> op{prob, convert<T>(1), convert<T>(0)};
    launch_philox_fill<T, kBernoulliWords>(L, p, op, stream, "bernoulli_");
  });
}

// ---- bernoulli (tensor p) -------------------------------------------------------------------------------
// p's element type, read as float64 the way the CPU reads it (16-bit through float). A run-time switch
// (uniform over the grid) instead of one kernel per (out, p) dtype pair.
enum class ProbKind : int { Half, BFloat16, Float, Double };

ProbKind prob_kind(DType t) {
  switch (t) {
    case DType::Float16: return ProbKind::Half;
    case DType::BFloat16: return ProbKind::BFloat16;
    case DType::Float32: return ProbKind::Float;
    case DType::Float64: return ProbKind::Double;
    default: throw_unsupported_dtype("bernoulli", t);
  }
}

__device__ __forceinline__ double load_prob(const void* probs, int64_t i, ProbKind kind) {
  switch (kind) {
    case ProbKind::Half: return static_cast<double>(__half2float(static_cast<const __half*>(probs)[i]));
    case ProbKind::BFloat16: return static_cast<double>(__bfloat162float(static_cast<const __nv_bfloat16*>(probs)[i]));
    case ProbKind::Float: return static_cast<double>(static_cast<const float*>(probs)[i]);
    default: return static_cast<const double*>(probs)[i];
  }
}

// *first_bad = min(*first_bad, i) over the i whose p is outside [0, 1] or nan. Grid-stride, so a
// thread's first hit is its smallest.
static __global__ void __launch_bounds__(kRandomThreads)
    bernoulli_check_kernel(const void* probs, int64_t n, ProbKind kind, unsigned long long* first_bad) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const double v = load_prob(probs, i, kind);
    if (!(v >= 0.0 && v <= 1.0)) {
      atomicMin(first_bad, static_cast<unsigned long long>(i));
      return;
    }
  }
}

// Raises ValueError naming the first p outside [0, 1] (the CPU kernel's message). Synchronizes the
// stream: the result decides whether to draw. Skipped while the stream is captured into a graph.
void check_probabilities(const Tensor& probs, cudaStream_t stream) {
  if (stream_is_capturing(stream)) return;
  const int64_t n = probs.numel();
  DataPtr ws = allocate_workspace(sizeof(unsigned long long));
  auto* first_bad = static_cast<unsigned long long*>(ws.get());
  TS_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), stream));
  bernoulli_check_kernel<<<grid_for(n, kRandomThreads, int64_t{1} << 16), kRandomThreads, 0, stream>>>(
      probs.data_ptr(), n, prob_kind(probs.dtype()), first_bad);
  check_launch("bernoulli", "bernoulli_check_kernel");
  unsigned long long bad = 0;
  TS_CUDA_CHECK(cudaMemcpyAsync(&bad, first_bad, sizeof bad, cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (bad == ~0ull) return;
  const int64_t i = static_cast<int64_t>(bad);
  const size_t esize = element_size(probs.dtype());
  alignas(8) unsigned char raw[8] = {};
  TS_CUDA_CHECK(cudaMemcpyAsync(raw, static_cast<const char*>(probs.data_ptr()) + i * static_cast<int64_t>(esize),
                                esize, cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double v = dispatch_floating(probs.dtype(), "bernoulli", [&]<class H>(TypeTag<H>) {
    H h;
    std::memcpy(&h, raw, sizeof h);
    return as_double(h);
  });
  TS_THROW(ValueError, "bernoulli: expected all probabilities p to be in [0, 1], but p[", i, "] = ", v);
}

template <class T>
struct BernoulliTensorOp {
  const void* probs;
  ProbKind kind;
  T one, zero;
  __device__ __forceinline__ T operator()(int64_t i, const uint32_t* w) const {
    return rnd::bernoulli_draw(w[0], load_prob(probs, i, kind)) ? one : zero;
  }
};

void bernoulli_tensor_cuda(const Tensor& out, const Tensor& probs, PhiloxParams p) {
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  TS_CHECK(probs.is_contiguous() && probs.numel() == out.numel() && probs.device() == out.device(), ValueError,
           "bernoulli kernel: p must be contiguous, on the output's device, with the output's sizes ", out.sizes(),
           " (got sizes ", probs.sizes(), " on ", probs.device().str(), ")");
  cudaStream_t stream = stream_of(out);
  check_probabilities(probs, stream);
  const RandomLayout L = random_layout(out, "bernoulli");
  const ProbKind kind = prob_kind(probs.dtype());
  dispatch_device_dtype(out.dtype(), "bernoulli", [&]<class T>(TypeTag<T>) {
    const BernoulliTensorOp<T> op{probs.data_ptr(), kind, convert<T>(1), convert<T>(0)};
    launch_philox_fill<T, kBernoulliWords>(L, p, op, stream, "bernoulli");
  });
}

}  // namespace

// ---- a captured graph's Philox words (Note [Philox under graph capture]) ---------------------------
// dst[0] = seed, dst[1] = base offset: one thread; the values travel as kernel arguments, so the write
// reads no host memory when it runs (a replay may be queued long before).
static __global__ void philox_state_kernel(uint64_t* dst, uint64_t seed, uint64_t offset) {
  dst[0] = seed;
  dst[1] = offset;
}

static void launch_philox_state(uint64_t* dst, uint64_t seed, uint64_t offset, cudaStream_t stream) {
  philox_state_kernel<<<1, 1, 0, stream>>>(dst, seed, offset);
  check_launch("Graph.replay", "philox_state_kernel");
}

void register_random() {
  set_philox_state_writer(&launch_philox_state);
  uniform_kernel.set(DeviceType::CUDA, &uniform_cuda);
  normal_kernel.set(DeviceType::CUDA, &normal_cuda);
  bernoulli_scalar_kernel.set(DeviceType::CUDA, &bernoulli_scalar_cuda);
  bernoulli_tensor_kernel.set(DeviceType::CUDA, &bernoulli_tensor_cuda);
  random_int_kernel.set(DeviceType::CUDA, &random_int_cuda);
  randperm_kernel.set(DeviceType::CUDA, &randperm_cuda);
  multinomial_kernel.set(DeviceType::CUDA, &multinomial_cuda);
}

}  // namespace tessera::cuda
