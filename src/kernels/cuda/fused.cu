// CUDA kernels of the fused linear-layer ops (ops/fused_kernel.h):
//  * linear_gelu: one cuBLASLt GEMM with the GELU_AUX(_BIAS) epilogue (matmul_lt.h gemm_gelu_aux), which
//    writes y = gelu_tanh(x W^T + b) and keeps the pre-activation for the backward; where the epilogue
//    does not apply, the GEMM with the bias epilogue into pre, then the gelu op.
//  * gelu_tanh_backward: dpre = grad * gelu_tanh'(pre), one elementwise pass over contiguous (M, N)
//    (16-byte loads where aligned), computed in float (double for float64), rounded once.
//  * linear_dgelu_bgrad: dpre = (g @ w2) * gelu_tanh'(pre) with c_fc's bias gradient, from one GEMM with
//    the DGELU_BGRAD epilogue (gemm_dgelu_bgrad); where it does not apply, the GEMM, then the kernel
//    above and a row-sum reduction.
//  * linear_weight_bias_grad: dW = g^T x with db = the row sums of g from the same GEMM (BGRADB
//    epilogue, gemm_bgradb); where cuBLASLt offers no algorithm, the GEMM and a row-sum reduction.
// The cuBLASLt GELU is the tanh approximation: the same function as gelu(approximate = "tanh").
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_math.cuh"
#include "kernels/cuda/matmul_lt.h"
#include "kernels/cuda/reduce_common.cuh"
#include "ops/fused_kernel.h"
#include "ops/gemm_kernel.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera::cuda {
namespace {

using red::aligned16;
using red::kVec;
using red::load_acc;
using red::Vec;

struct GeluBwdParams {
  const void* grad = nullptr;
  const void* pre = nullptr;
  void* dpre = nullptr;
  int64_t n = 0;    // elements
  bool vec = false;  // every pointer 16-byte aligned: slots of kVec<T> elements
};

template <class A>
__device__ __forceinline__ A gelu_tanh_grad(A v) {
  constexpr A kBeta = A(0.79788456080286535588), kKappa = A(0.044715);
  const A v2 = v * v;
  const A t = dm::tanh(kBeta * (v + kKappa * v2 * v));
  return A(0.5) * (A(1) + t) + A(0.5) * v * (A(1) - t * t) * (kBeta * (A(1) + A(3) * kKappa * v2));
}

// Grid-stride over slots of V elements (V = kVec<T> with `vec`, else element by element via the tail
// loop); I is the index type (int32 where the tensors fit, else int64).
template <class T, class I>
static __global__ void gelu_tanh_bwd_kernel(GeluBwdParams p) {
  using A = dacc_t<T>;
  constexpr int V = kVec<T>;
  const T* __restrict__ g = static_cast<const T*>(p.grad);
  const T* __restrict__ x = static_cast<const T*>(p.pre);
  T* __restrict__ d = static_cast<T*>(p.dpre);
  const I n = static_cast<I>(p.n);
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  const I tid = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x;
  I head = 0;
  if (p.vec) {
    const I slots = n / V;
    for (I s = tid; s < slots; s += stride) {
      const Vec<T, V> gv = *reinterpret_cast<const Vec<T, V>*>(g + s * V);
      const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(x + s * V);
      Vec<T, V> out;
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = convert<T>(load_acc(gv.v[j]) * gelu_tanh_grad(load_acc(xv.v[j])));
      *reinterpret_cast<Vec<T, V>*>(d + s * V) = out;
    }
    head = slots * V;
  }
  for (I i = head + tid; i < n; i += stride) d[i] = convert<T>(load_acc(g[i]) * gelu_tanh_grad(load_acc(x[i])));
}

template <class T>
void launch_gelu_tanh_bwd(GeluBwdParams p, bool small_index, cudaStream_t stream) {
  constexpr int kThreads = 256;
  p.vec = aligned16<T>(p.grad) && aligned16<T>(p.pre) && aligned16<T>(p.dpre);
  const int64_t per_thread = p.vec ? kVec<T> : 1;
  const unsigned grid = grid_for(p.n, kThreads * per_thread, int64_t(1) << 16);
  if (small_index)
    gelu_tanh_bwd_kernel<T, int32_t><<<grid, kThreads, 0, stream>>>(p);
  else
    gelu_tanh_bwd_kernel<T, int64_t><<<grid, kThreads, 0, stream>>>(p);
  check_launch("gelu_tanh_backward", "gelu_tanh_bwd_kernel");
}

void gelu_tanh_backward_cuda(const Tensor& dpre, const Tensor& grad, const Tensor& pre) {
  if (pre.numel() == 0) return;
  CurrentDevice guard(pre.device().index());
  GeluBwdParams p;
  p.grad = grad.data_ptr();
  p.pre = pre.data_ptr();
  p.dpre = dpre.data_ptr();
  p.n = pre.numel();
  // 32-bit indices while every element index (and a grid stride past the end) stays below 2^31.
  const bool small = p.n < (int64_t(1) << 30);
  const cudaStream_t stream = stream_of(pre);
  dispatch_device_dtype<DTypeSet::Floating>(pre.dtype(), "gelu_tanh_backward", [&]<class T>(TypeTag<T>) {
    launch_gelu_tanh_bwd<T>(p, small, stream);
  });
}

void linear_gelu_cuda(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& b) {
  CurrentDevice guard(x.device().index());
  if (!pre.defined()) {  // inference: the GELU_BIAS epilogue, no pre-activation written
    gemm_bias_act(out, x, w.t(), b, Activation::Gelu);
    return;
  }
  if (gemm_gelu_aux(out, pre, x, w.t(), b)) return;
  // No fused algorithm: pre = x W^T + b (bias epilogue), then the gelu op.
  gemm_bias_act(pre, x, w.t(), b, Activation::None);
  Tensor(out).copy_(gelu(pre, "tanh"));
}

void linear_dgelu_bgrad_cuda(const Tensor& dpre, const Tensor& dbias, const Tensor& g, const Tensor& w2,
                             const Tensor& pre) {
  CurrentDevice guard(g.device().index());
  if (gemm_dgelu_bgrad(dpre, dbias, g, w2, pre)) return;
  // No fused algorithm: dh = g @ w2, then the elementwise GELU derivative and the row sum.
  Tensor dh = make_empty(dpre.sizes(), dpre.dtype(), dpre.device());
  gemm_lt(GemmParams{g.unsqueeze(0), w2.unsqueeze(0), dh.unsqueeze(0), 1, 0});
  gelu_tanh_backward_cuda(dpre, dh, pre);
  if (dbias.defined()) Tensor(dbias).copy_(sum(dpre, std::vector<int64_t>{0}));
}

void linear_weight_bias_grad_cuda(const Tensor& dw, const Tensor& db, const Tensor& g, const Tensor& x) {
  CurrentDevice guard(g.device().index());
  if (gemm_bgradb(dw, db, g.t(), x)) return;
  gemm_lt(GemmParams{g.t().unsqueeze(0), x.unsqueeze(0), dw.unsqueeze(0), 1, 0});
  Tensor(db).copy_(sum(g, std::vector<int64_t>{0}));
}

}  // namespace

void register_fused() {
  linear_gelu_kernel.set(DeviceType::CUDA, &linear_gelu_cuda);
  linear_dgelu_bgrad_kernel.set(DeviceType::CUDA, &linear_dgelu_bgrad_cuda);
  gelu_tanh_backward_kernel.set(DeviceType::CUDA, &gelu_tanh_backward_cuda);
  linear_weight_bias_grad_kernel.set(DeviceType::CUDA, &linear_weight_bias_grad_cuda);
}

}  // namespace tessera::cuda
