// CUDA convolutions behind ops/conv_kernel.h through cuDNN 9's legacy convolution API
// (cudnnConvolutionForward / BackwardData / BackwardFilter), and the family's registration (the
// pooling kernels are in pool.cu).
//   conv2d_forward_kernel        x (N, C_in, H, W), w (C_out, C_in/G, KH, KW) -> y (N, C_out, OH, OW)
//   conv2d_input_backward_kernel dy, w -> dx (conv_transpose2d's forward)
//   conv2d_weight_backward_kernel dy, x -> dw
// Groups, stride, padding and dilation map onto one convolution descriptor. A 1x1 convolution with
// padding 0, stride 1 and one group runs as a cuBLASLt GEMM instead where its operands are matrices
// (conv_gemm.h); the rest of this file is the cuDNN path, which takes every other case.
//
// Layout: cuDNN runs in NHWC when any tensor of the call is channels-last (Note [Channels-last
// outputs]; the ops then allocate the result channels-last too) and the dtype is not float64 (cuDNN
// has no NHWC float64 convolution, as PyTorch also assumes), else in NCHW. Each operand that is not
// dense in that layout is copied into it (a channels-last input with a row-major weight copies the
// weight); the filter descriptor takes the same format. A result not dense in that layout is computed
// into a temporary and copied. Should cuDNN offer no algorithm in that layout for a configuration,
// the call runs again in the other one (float16 / bfloat16 / float32).
//
// Math: float16 / bfloat16 in/out with float accumulation and tensor cores (CUDNN_TENSOR_OP_MATH);
// float32 with CUDNN_DEFAULT_MATH (TF32 allowed) when cuda::cudnn_allow_tf32(), CUDNN_FMA_MATH
// otherwise; float64 in double.
//
// Algorithms: per shape key (device, direction, dtype, layout, math, batch chunk, geometry), a list of
// candidates from cuDNN's heuristics (cudnnGet*Algorithm_v7), or, when cuda::cudnn_benchmark(), from
// timing them once (cudnnFind*AlgorithmEx, which synchronizes). A call tries the candidates in order
// (skipping one whose workspace cannot be allocated or that cuDNN reports as not supported) and the
// first that runs becomes the key's first choice. With the determinism switch on (tessera/determinism.h)
// only candidates cuDNN marks CUDNN_DETERMINISTIC are kept (the switch is part of the key). Workspace
// comes from the caching allocator on the current stream.
//
// Sizes cuDNN cannot take: descriptors hold 32-bit sizes and a tensor below 2^31 elements, so the
// batch runs in chunks that keep every tensor under that (the weight gradient accumulates over chunks
// with beta = 1). A grad smaller than the image's conv2d output (ops/conv.cpp: conv_transpose2d with
// output_padding past the stride, or a cut weight gradient) is zero-padded to it first.
// The bias (C) is added after the convolution by a kernel of our own (any dtype, either layout).
#include <algorithm>
#include <climits>
#include <initializer_list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/conv_gemm.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_handle.h"
#include "kernels/cuda/pool.h"
#include "ops/conv_kernel.h"
#include "runtime/determinism.h"
#include "tensor/tensor_impl.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 256;

// ---- bias ---------------------------------------------------------------------------------------
// out (dense, NCHW or NHWC) += bias[c]; one rounding per element.
template <class T, class I>
static __global__ void bias_add_kernel(T* __restrict__ out, const T* __restrict__ bias, int64_t bias_stride,
                                       I channels, I spatial, bool nhwc, int64_t total) {
  using A = dacc_t<T>;
  for (int64_t li = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; li < total; li += int64_t(gridDim.x) * blockDim.x) {
    const I i = static_cast<I>(li);
    const I c = nhwc ? i % channels : (i / spatial) % channels;
    out[i] = convert<T>(convert<A>(out[i]) + convert<A>(bias[c * bias_stride]));
  }
}

void add_bias(const Tensor& res, const Tensor& bias, bool nhwc) {
  const int64_t total = res.numel();
  if (total == 0) return;
  const int64_t channels = res.size(1), spatial = res.size(2) * res.size(3);
  dispatch_device_dtype<DTypeSet::Floating>(res.dtype(), "conv2d", [&]<class T>(TypeTag<T>) {
    auto launch = [&]<class I>(TypeTag<I>) {
      bias_add_kernel<T, I><<<grid_for(total, kThreads), kThreads, 0, stream_of(res)>>>(
          static_cast<T*>(res.data_ptr()), static_cast<const T*>(bias.data_ptr()), bias.stride(0),
          static_cast<I>(channels), static_cast<I>(spatial), nhwc, total);
      check_launch("conv2d", "bias_add_kernel");
    };
    if (total < INT32_MAX) launch(TypeTag<int32_t>{});
    else launch(TypeTag<int64_t>{});
  });
}

// ---- layouts --------------------------------------------------------------------------------------
bool strictly_channels_last(const Tensor& t) {
  return t.defined() && t.dim() == 4 && !t.is_contiguous() && t.is_contiguous(MemoryFormat::ChannelsLast);
}

bool prefer_nhwc(DType dt, std::initializer_list<const Tensor*> ts) {
  if (dt == DType::Float64) return false;
  for (const Tensor* t : ts)
    if (strictly_channels_last(*t)) return true;
  return false;
}

// Where cuDNN has no algorithm in the preferred layout, the call runs again in the other (with copies);
// float64 has NCHW only.
bool other_layout_allowed(DType dt) { return dt != DType::Float64; }

MemoryFormat format_of(bool nhwc) { return nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous; }

Tensor dense_in(const Tensor& t, bool nhwc) {
  const MemoryFormat f = format_of(nhwc);
  return t.is_contiguous(f) ? t : t.contiguous(f);
}

Tensor empty_in(const Shape& sizes, DType dt, Device dev, bool nhwc) {
  return nhwc ? make_empty_strided(sizes, channels_last_strides(sizes), dt, dev) : make_empty(sizes, dt, dev);
}

// `res` is dense: zeros by one memset.
void zero_dense(const Tensor& res) {
  if (res.numel() == 0) return;
  TS_CUDA_CHECK(cudaMemsetAsync(res.data_ptr(), 0, res.nbytes(), stream_of(res)));
}

// ---- cuDNN types ----------------------------------------------------------------------------------
cudnnMathType_t math_type(DType dt) {
  if (dt == DType::Float16 || dt == DType::BFloat16) return CUDNN_TENSOR_OP_MATH;
  if (dt == DType::Float32) return cudnn_allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  return CUDNN_DEFAULT_MATH;
}

int to_int(int64_t v, const char* op, const char* what) {
  TS_CHECK(v >= 0 && v <= INT_MAX, NotImplementedError, op, ": ", what, " = ", v,
           " exceeds the 32-bit sizes of cuDNN's convolution descriptors");
  return static_cast<int>(v);
}

// The conv2d output size of the image side (what cuDNN derives from x, w and the descriptor).
int64_t full_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

struct ConvDescs {
  CudnnTensorDesc x, y;
  CudnnFilterDesc w;
  CudnnConvDesc conv;
};

struct ConvPtrs {
  void* x;
  void* w;
  void* y;
};

// Descriptors for `n` samples; y has the full conv2d output size (oh, ow).
void set_descs(ConvDescs& d, const char* op, const ConvGeometry& g, int64_t n, int64_t oh, int64_t ow, DType dt,
               bool nhwc, cudnnMathType_t math) {
  const cudnnDataType_t t = cudnn_dtype(dt, "conv2d");
  const cudnnTensorFormat_t f = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const int n32 = to_int(n, op, "batch");
  TS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.x.get(), f, t, n32, to_int(g.in_channels, op, "channels"),
                                            to_int(g.in_h, op, "height"), to_int(g.in_w, op, "width")));
  TS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.y.get(), f, t, n32, to_int(g.out_channels, op, "channels"),
                                            to_int(oh, op, "height"), to_int(ow, op, "width")));
  TS_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d.w.get(), t, f, to_int(g.out_channels, op, "output channels"),
                                            to_int(g.in_channels / g.groups, op, "input channels per group"),
                                            to_int(g.kernel_h, op, "kernel height"),
                                            to_int(g.kernel_w, op, "kernel width")));
  TS_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      d.conv.get(), to_int(g.pad_h, op, "padding"), to_int(g.pad_w, op, "padding"), to_int(g.stride_h, op, "stride"),
      to_int(g.stride_w, op, "stride"), to_int(g.dil_h, op, "dilation"), to_int(g.dil_w, op, "dilation"),
      CUDNN_CROSS_CORRELATION, dt == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
  TS_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv.get(), to_int(g.groups, op, "groups")));
  TS_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), math));
}

// ---- the three directions -------------------------------------------------------------------------
enum class Dir { Forward, BackwardData, BackwardFilter };

struct ForwardOps {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static cudnnStatus_t heuristics(cudnnHandle_t h, const ConvDescs& d, int* ret, Perf* perf) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), kCount, ret, perf);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const ConvDescs& d, const ConvPtrs& p, int* ret, Perf* perf, void* ws,
                            size_t wsb) {
    return cudnnFindConvolutionForwardAlgorithmEx(h, d.x.get(), p.x, d.w.get(), p.w, d.conv.get(), d.y.get(), p.y,
                                                  kCount, ret, perf, ws, wsb);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescs& d, int algo, size_t* size) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), size);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const ConvDescs& d, const ConvPtrs& p, int algo, void* ws, size_t wsb,
                           const void* alpha, const void* beta) {
    return cudnnConvolutionForward(h, alpha, d.x.get(), p.x, d.w.get(), p.w, d.conv.get(),
                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws, wsb, beta, d.y.get(), p.y);
  }
};

struct BackwardDataOps {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static cudnnStatus_t heuristics(cudnnHandle_t h, const ConvDescs& d, int* ret, Perf* perf) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), kCount, ret,
                                                       perf);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const ConvDescs& d, const ConvPtrs& p, int* ret, Perf* perf, void* ws,
                            size_t wsb) {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w.get(), p.w, d.y.get(), p.y, d.conv.get(), d.x.get(), p.x,
                                                       kCount, ret, perf, ws, wsb);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescs& d, int algo, size_t* size) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), size);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const ConvDescs& d, const ConvPtrs& p, int algo, void* ws, size_t wsb,
                           const void* alpha, const void* beta) {
    return cudnnConvolutionBackwardData(h, alpha, d.w.get(), p.w, d.y.get(), p.y, d.conv.get(),
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws, wsb, beta, d.x.get(),
                                        p.x);
  }
};

struct BackwardFilterOps {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static cudnnStatus_t heuristics(cudnnHandle_t h, const ConvDescs& d, int* ret, Perf* perf) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), kCount, ret,
                                                         perf);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const ConvDescs& d, const ConvPtrs& p, int* ret, Perf* perf, void* ws,
                            size_t wsb) {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x.get(), p.x, d.y.get(), p.y, d.conv.get(), d.w.get(),
                                                         p.w, kCount, ret, perf, ws, wsb);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescs& d, int algo, size_t* size) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), size);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const ConvDescs& d, const ConvPtrs& p, int algo, void* ws, size_t wsb,
                           const void* alpha, const void* beta) {
    return cudnnConvolutionBackwardFilter(h, alpha, d.x.get(), p.x, d.y.get(), p.y, d.conv.get(),
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws, wsb, beta, d.w.get(),
                                          p.w);
  }
};

// ---- algorithm cache ---------------------------------------------------------------------------------
struct ConvKey {
  int device, dir, dtype, nhwc, math, benchmark, deterministic;
  int64_t n, c, h, w, k, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
  bool operator==(const ConvKey&) const = default;
};

struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const {
    size_t h = 0;
    auto mix = [&h](int64_t v) { h ^= std::hash<int64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    for (int64_t v : {int64_t(k.device), int64_t(k.dir), int64_t(k.dtype), int64_t(k.nhwc), int64_t(k.math),
                      int64_t(k.benchmark), int64_t(k.deterministic), k.n, k.c, k.h, k.w, k.k, k.kh, k.kw, k.oh,
                      k.ow, k.sh, k.sw, k.ph, k.pw, k.dh, k.dw, k.groups})
      mix(v);
    return h;
  }
};

struct AlgoChoice {
  int algo;
  cudnnMathType_t math;
  size_t workspace;
};

// Candidates per key, shared by all threads (algorithms do not depend on the handle). Leaked on
// purpose, so that no destructor runs after the driver has gone at exit.
struct AlgoCache {
  std::mutex mu;
  std::unordered_map<ConvKey, std::vector<AlgoChoice>, ConvKeyHash> map;
};
AlgoCache& algo_cache() {
  static AlgoCache* c = new AlgoCache;
  return *c;
}

// The workspace for a benchmark search: as much as any algorithm asks for, less when that cannot be
// allocated.
DataPtr search_workspace(size_t want, size_t* got) {
  for (size_t size : {want, std::min<size_t>(want, size_t(256) << 20), size_t(0)}) {
    if (size == 0) break;
    try {
      DataPtr p = allocate_workspace(size);
      *got = size;
      return p;
    } catch (const OutOfMemoryError&) {
    }
  }
  *got = 0;
  return DataPtr();
}

template <class Ops>
std::vector<AlgoChoice> find_candidates(cudnnHandle_t h, const ConvDescs& d, const ConvPtrs& p, Dir dir,
                                        cudnnMathType_t math, bool benchmark, bool deterministic, size_t w_bytes) {
  typename Ops::Perf perf[Ops::kCount];
  int ret = 0;
  cudnnStatus_t st;
  if (benchmark) {
    size_t want = 0;
    for (int a = 0; a < Ops::kCount; ++a) {
      size_t s = 0;
      if (Ops::workspace(h, d, a, &s) == CUDNN_STATUS_SUCCESS) want = std::max(want, s);
    }
    size_t got = 0;
    DataPtr ws = search_workspace(want, &got);
    // The weight gradient accumulates over batch chunks: the search writes a scratch weight instead.
    DataPtr scratch;
    ConvPtrs q = p;
    if (dir == Dir::BackwardFilter) {
      scratch = allocate_workspace(w_bytes);
      q.w = scratch.get();
    }
    st = Ops::find(h, d, q, &ret, perf, ws.get(), got);
    TS_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), math));
  } else {
    st = Ops::heuristics(h, d, &ret, perf);
  }
  std::vector<AlgoChoice> out;
  if (cudnn_not_supported(st)) return out;
  TS_CUDNN_CHECK(st);
  for (int i = 0; i < ret; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;  // tessera/determinism.h
    // float32 with TF32 off: only FMA kernels (as PyTorch, a tensor-op result is skipped), and the
    // math type stays FMA so that no kernel may round the operands to TF32.
    cudnnMathType_t m = perf[i].mathType;
    if (math == CUDNN_FMA_MATH) {
      if (m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      m = CUDNN_FMA_MATH;
    }
    const int algo = static_cast<int>(perf[i].algo);
    bool seen = false;
    for (const AlgoChoice& c : out) seen |= c.algo == algo && c.math == m;
    if (seen) continue;
    TS_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), m));
    size_t s = 0;
    if (Ops::workspace(h, d, algo, &s) != CUDNN_STATUS_SUCCESS) continue;
    out.push_back({algo, m, s});
  }
  TS_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), math));
  return out;
}

// Runs one chunk with the key's candidates in order; false when none runs (nothing was written).
template <class Ops>
bool run_candidates(const ConvKey& key, cudnnHandle_t h, const ConvDescs& d, const ConvPtrs& p, Dir dir,
                    cudnnMathType_t math, size_t w_bytes, const void* alpha, const void* beta) {
  AlgoCache& cache = algo_cache();
  std::vector<AlgoChoice> cands;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.map.find(key);
    if (it != cache.map.end()) {
      cands = it->second;
      cached = true;
    }
  }
  if (!cached) {
    cands = find_candidates<Ops>(h, d, p, dir, math, key.benchmark != 0, key.deterministic != 0, w_bytes);
    std::lock_guard<std::mutex> lock(cache.mu);
    cache.map[key] = cands;
  }
  bool skipped_for_memory = false;
  for (size_t i = 0; i < cands.size(); ++i) {
    const AlgoChoice& a = cands[i];
    DataPtr ws;
    if (a.workspace > 0) {
      try {
        ws = allocate_workspace(a.workspace);
      } catch (const OutOfMemoryError&) {
        skipped_for_memory = true;
        continue;  // a candidate with less workspace may still run
      }
    }
    TS_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), a.math));
    const cudnnStatus_t st = Ops::run(h, d, p, a.algo, ws.get(), a.workspace, alpha, beta);
    if (st == CUDNN_STATUS_SUCCESS) {
      if (i > 0) {  // the first that ran leads from now on
        std::lock_guard<std::mutex> lock(cache.mu);
        cache.map[key] = std::vector<AlgoChoice>(cands.begin() + static_cast<std::ptrdiff_t>(i), cands.end());
      }
      return true;
    }
    if (!cudnn_not_supported(st)) TS_CUDNN_CHECK(st);
  }
  TS_CHECK(!skipped_for_memory, OutOfMemoryError, "convolution: CUDA out of memory for the workspace of every cuDNN ",
           "algorithm that applies to this shape");
  return false;
}

// One direction over the batch, in chunks below cuDNN's 2^31-element tensors. x, w, y are dense in
// the layout; y has the full conv2d output size (oh, ow). Returns false when cuDNN has no algorithm.
template <class Ops>
bool run_conv(const char* op, Dir dir, const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& y,
              int64_t oh, int64_t ow, bool nhwc) {
  const DType dt = y.dtype();
  const int64_t per_x = g.in_channels * g.in_h * g.in_w, per_y = g.out_channels * oh * ow;
  const int64_t per_sample = std::max(per_x, per_y);
  TS_CHECK(per_sample <= INT_MAX && w.numel() <= INT_MAX, NotImplementedError, op, ": a sample of ", per_sample,
           " elements or a weight of ", w.numel(), " elements exceeds cuDNN's 2^31-element tensors");
  const int64_t chunk = std::max<int64_t>(1, INT_MAX / std::max<int64_t>(per_sample, 1));
  const int64_t es = static_cast<int64_t>(element_size(dt));
  const cudnnMathType_t math = math_type(dt);
  cudnnHandle_t h = cudnn_handle(stream_of(y));
  ConvDescs d;
  int64_t described = -1;
  const double one_d = 1.0, zero_d = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const bool dbl = dt == DType::Float64;
  for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
    const int64_t nb = std::min(chunk, g.batch - n0);
    if (nb != described) {
      set_descs(d, op, g, nb, oh, ow, dt, nhwc, math);
      described = nb;
    }
    ConvPtrs p{static_cast<char*>(x.data_ptr()) + n0 * per_x * es, w.data_ptr(),
               static_cast<char*>(y.data_ptr()) + n0 * per_y * es};
    ConvKey key{};
    key.device = y.device().index();
    key.dir = static_cast<int>(dir);
    key.dtype = static_cast<int>(dt);
    key.nhwc = nhwc;
    key.math = static_cast<int>(math);
    key.benchmark = cudnn_benchmark();
    key.deterministic = is_deterministic();
    key.n = nb;
    key.c = g.in_channels;
    key.h = g.in_h;
    key.w = g.in_w;
    key.k = g.out_channels;
    key.kh = g.kernel_h;
    key.kw = g.kernel_w;
    key.oh = oh;
    key.ow = ow;
    key.sh = g.stride_h;
    key.sw = g.stride_w;
    key.ph = g.pad_h;
    key.pw = g.pad_w;
    key.dh = g.dil_h;
    key.dw = g.dil_w;
    key.groups = g.groups;
    // The weight gradient sums over chunks; the other directions write disjoint slices.
    const bool accumulate = dir == Dir::BackwardFilter && n0 > 0;
    const void* alpha = dbl ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
    const void* beta = accumulate ? (dbl ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f))
                                  : (dbl ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f));
    if (!run_candidates<Ops>(key, h, d, p, dir, math, w.nbytes(), alpha, beta)) return false;
  }
  return true;
}

// grad (N, C, oh, ow) as a dense tensor of the full conv2d output size (full_h, full_w) in the
// layout: the rows and columns grad lacks are zeros.
Tensor full_size_grad(const Tensor& grad, int64_t full_h, int64_t full_w, bool nhwc) {
  if (grad.size(2) == full_h && grad.size(3) == full_w) return dense_in(grad, nhwc);
  Tensor full = empty_in({grad.size(0), grad.size(1), full_h, full_w}, grad.dtype(), grad.device(), nhwc);
  zero_dense(full);
  full.narrow(2, 0, grad.size(2)).narrow(3, 0, grad.size(3)).copy_(grad);
  return full;
}

void check_devices(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor& first = **ts.begin();
  for (const Tensor* t : ts)
    if (t->defined())
      TS_CHECK(t->is_cuda() && t->device() == first.device(), DeviceError, op, ": the CUDA kernel got tensors on ",
               first.device().str(), " and ", t->device().str());
}

// ---- the slots -------------------------------------------------------------------------------------
// Each runs in one layout; false when cuDNN has no algorithm in it (the caller tries the other).

bool forward_in(bool nhwc, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                const ConvGeometry& g) {
  const char* op = "conv2d";
  Tensor res = out.is_contiguous(format_of(nhwc)) ? out : empty_in(out.sizes(), out.dtype(), out.device(), nhwc);
  if (x.numel() == 0 || w.numel() == 0) {  // an empty sum (no input channels): zeros
    zero_dense(res);
  } else {
    const int64_t oh = full_out(g.in_h, g.kernel_h, g.stride_h, g.pad_h, g.dil_h);
    const int64_t ow = full_out(g.in_w, g.kernel_w, g.stride_w, g.pad_w, g.dil_w);
    TS_CHECK(oh == g.out_h && ow == g.out_w, ValueError, op, ": internal error: output ", g.out_h, "x", g.out_w,
             " does not follow from the geometry (", oh, "x", ow, ")");
    if (!run_conv<ForwardOps>(op, Dir::Forward, g, dense_in(x, nhwc), dense_in(w, nhwc), res, oh, ow, nhwc))
      return false;
  }
  if (bias.defined()) add_bias(res, bias, nhwc);
  if (!res.is_same(out)) Tensor(out).copy_(res);
  return true;
}

bool input_backward_in(bool nhwc, const Tensor& out, const Tensor& grad, const Tensor& w, const Tensor& bias,
                       const ConvGeometry& g) {
  const char* op = "conv_transpose2d";
  Tensor res = out.is_contiguous(format_of(nhwc)) ? out : empty_in(out.sizes(), out.dtype(), out.device(), nhwc);
  if (grad.numel() == 0 || w.numel() == 0) {  // no output channel or position reaches the image
    zero_dense(res);
  } else {
    const int64_t oh = full_out(g.in_h, g.kernel_h, g.stride_h, g.pad_h, g.dil_h);
    const int64_t ow = full_out(g.in_w, g.kernel_w, g.stride_w, g.pad_w, g.dil_w);
    Tensor dy = full_size_grad(grad, oh, ow, nhwc);
    if (!run_conv<BackwardDataOps>(op, Dir::BackwardData, g, res, dense_in(w, nhwc), dy, oh, ow, nhwc)) return false;
  }
  if (bias.defined()) add_bias(res, bias, nhwc);
  if (!res.is_same(out)) Tensor(out).copy_(res);
  return true;
}

bool weight_backward_in(bool nhwc, const Tensor& out, const Tensor& grad, const Tensor& x, const ConvGeometry& g) {
  const char* op = "conv2d_backward_weight";
  Tensor res = out.is_contiguous(format_of(nhwc)) ? out : empty_in(out.sizes(), out.dtype(), out.device(), nhwc);
  if (grad.numel() == 0 || x.numel() == 0) {  // an empty batch (or no output positions): zeros
    zero_dense(res);
  } else {
    const int64_t oh = full_out(g.in_h, g.kernel_h, g.stride_h, g.pad_h, g.dil_h);
    const int64_t ow = full_out(g.in_w, g.kernel_w, g.stride_w, g.pad_w, g.dil_w);
    Tensor dy = full_size_grad(grad, oh, ow, nhwc);
    if (!run_conv<BackwardFilterOps>(op, Dir::BackwardFilter, g, dense_in(x, nhwc), res, dy, oh, ow, nhwc))
      return false;
  }
  if (!res.is_same(out)) Tensor(out).copy_(res);
  return true;
}

void conv2d_forward_cuda(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                         const ConvGeometry& g) {
  check_devices("conv2d", {&out, &x, &w, &bias});
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  if (conv1x1_forward_gemm(out, x, w, bias, g)) return;  // 1x1: a cuBLASLt GEMM (conv_gemm.h)
  const bool nhwc = prefer_nhwc(out.dtype(), {&out, &x, &w});
  if (forward_in(nhwc, out, x, w, bias, g)) return;
  TS_CHECK(other_layout_allowed(out.dtype()) && forward_in(!nhwc, out, x, w, bias, g), NotImplementedError,
           "conv2d: cuDNN has no algorithm for this convolution (input ", x.sizes(), ", weight ", w.sizes(),
           ", dtype ", dtype_name(out.dtype()), ")");
}

void conv2d_input_backward_cuda(const Tensor& out, const Tensor& grad, const Tensor& w, const Tensor& bias,
                                const ConvGeometry& g) {
  check_devices("conv_transpose2d", {&out, &grad, &w, &bias});
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  if (conv1x1_input_backward_gemm(out, grad, w, bias, g)) return;  // 1x1: a cuBLASLt GEMM (conv_gemm.h)
  const bool nhwc = prefer_nhwc(out.dtype(), {&out, &grad, &w});
  if (input_backward_in(nhwc, out, grad, w, bias, g)) return;
  TS_CHECK(other_layout_allowed(out.dtype()) && input_backward_in(!nhwc, out, grad, w, bias, g), NotImplementedError,
           "conv_transpose2d: cuDNN has no algorithm for this convolution (input ", grad.sizes(), ", weight ",
           w.sizes(), ", dtype ", dtype_name(out.dtype()), ")");
}

void conv2d_weight_backward_cuda(const Tensor& out, const Tensor& grad, const Tensor& x, const ConvGeometry& g) {
  check_devices("conv2d_backward_weight", {&out, &grad, &x});
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  if (conv1x1_weight_backward_gemm(out, grad, x, g)) return;  // 1x1: a cuBLASLt GEMM (conv_gemm.h)
  const bool nhwc = prefer_nhwc(out.dtype(), {&out, &grad, &x});
  if (weight_backward_in(nhwc, out, grad, x, g)) return;
  TS_CHECK(other_layout_allowed(out.dtype()) && weight_backward_in(!nhwc, out, grad, x, g), NotImplementedError,
           "conv2d_backward_weight: cuDNN has no algorithm for this convolution (grad ", grad.sizes(), ", input ",
           x.sizes(), ", dtype ", dtype_name(out.dtype()), ")");
}

}  // namespace

void register_conv() {
  conv2d_forward_kernel.set(DeviceType::CUDA, conv2d_forward_cuda);
  conv2d_input_backward_kernel.set(DeviceType::CUDA, conv2d_input_backward_cuda);
  conv2d_weight_backward_kernel.set(DeviceType::CUDA, conv2d_weight_backward_cuda);
  register_pool();
}

}  // namespace tessera::cuda
