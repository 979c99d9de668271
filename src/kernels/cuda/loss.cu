// Cross-entropy fused with log_softmax on the GPU: the slots of ops/loss_kernel.h (formulas and
// invariants there; the CPU kernel, kernels/cpu/loss.cpp, is the reference).
//
// x is contiguous (M, C), e.g. (B*T, 50257) bfloat16 logits. One block per row (a grid-stride loop
// over rows), 32..512 threads by C.
//  * Loads: a row starts at x + r * C, so with odd C its 16-byte alignment changes from row to row.
//    Each row is read as a scalar head up to the first 16-byte boundary, a body of 16-byte vectors
//    (8 bf16/fp16, 4 float, 2 double) and a scalar tail; any C works (1, odd, 50257, ...).
//  * Forward: one pass over the row. Each thread keeps an online state (m = its running max,
//    s = sum e^(x - m), and with label smoothing S = sum w_c (m - x_c) and W = sum w_c, both sums of
//    non-negative terms relative to m, rescaled when m grows); the block combines the states in a
//    fixed tree (warp butterflies, then the warps' states in order), so results do not depend on
//    timing. lse = M + log(s); loss as the CPU: (M - x_t) + log(s) for the nll term, and
//    W * log(s) + S for the smoothing sum. float accumulation (double for float64).
//  * Backward: one pass reading x and writing dx: dx_c = a e^(x_c - lse) - b w_c, minus
//    g (1 - ls) w_t at c == t (a, b as in kernels/cpu/loss.cpp). dx is vectorized like x when both
//    rows share their alignment (same base address mod 16), element by element otherwise.
//  * Indexing: the row offset r * C is int64 (so M * C may pass 2^31); offsets within a row are
//    int64 too, computed once per vector, which costs nothing next to the memory traffic.
//  * Bad targets: thread 0 of a row checks its target; one out of [0, C) that is not ignore_index is
//    recorded in a device word (Note [Bad index flag], kernels/cuda/index_common.cuh, key = the row,
//    so the first bad row is reported as on the CPU) and that row's loss is 0. The forward entry hands
//    the word to Note [Deferred device checks]: IndexError "cross_entropy: Target <v> is out of
//    bounds." is raised at the next synchronization or checked op, with no wait here. While a CUDA graph is being captured there is no
//    check (the word is not allocated). The backward trusts the targets the forward checked and gives
//    a row with an out-of-range target a zero gradient.
//  * Special values as the CPU kernel: a NaN logit makes its row NaN; a -inf logit adds nothing to s
//    and +inf to S; +inf logits give NaN.
#include <math_constants.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/index_common.cuh"
#include "kernels/cuda/reduce_common.cuh"
#include "ops/loss_kernel.h"

namespace tessera::cuda {
namespace {

using red::ceil_div;
using red::dev_exp;
using red::dev_log;
using red::grid_x;
using red::kVec;
using red::load_acc;
using red::pow2_ceil;
using red::Vec;

constexpr int kMaxThreads = 512;

struct CeParams {
  const void* x = nullptr;
  const int64_t* target = nullptr;
  const void* weight = nullptr;      // acc (C) or null
  const void* weight_sum = nullptr;  // acc () or null (backward, weighted with smoothing)
  void* loss = nullptr;              // acc (M)
  void* lse = nullptr;               // acc (M); read by the backward
  const void* grad = nullptr;        // acc (M)
  void* dx = nullptr;                // T (M, C)
  int64_t M = 0, C = 0, ignore_index = -100;
  int64_t classes = 0;  // targets lie in [0, classes), classes <= C (CrossEntropyParams::classes)
  double label_smoothing = 0.0;
  bool dx_vec = false;  // dx rows have x rows' alignment
  unsigned long long* status = nullptr;
};

template <class A>
__device__ __forceinline__ A neg_inf() {
  return -static_cast<A>(CUDART_INF);
}

// The online state of a thread's share of a row (S and W only with label smoothing).
template <class A>
struct RowState {
  A m, s, S, W;
};

// Folds one element x (weight w) into the state.
template <class A, bool SMOOTH>
__device__ __forceinline__ void fold(RowState<A>& st, A x, A w) {
  if (x > st.m) {  // the max grows (never for NaN)
    // x - x + 1 is 1, or NaN for x = +inf (as e^(x - max) on the CPU).
    st.s = (st.m == neg_inf<A>() ? A(0) : st.s * dev_exp(st.m - x)) + (x - x + A(1));
    if (SMOOTH && st.m != neg_inf<A>()) st.S += st.W * (x - st.m);
    st.m = x;
  } else if (x != neg_inf<A>()) {
    st.s += dev_exp(x - st.m);  // NaN for a NaN x
  }
  if (SMOOTH) {
    st.S += x == neg_inf<A>() ? w * static_cast<A>(CUDART_INF) : w * (st.m - x);
    st.W += w;
  }
}

// The combination of two states, symmetric in (a, b) so that every lane of a butterfly agrees.
template <class A, bool SMOOTH>
__device__ __forceinline__ RowState<A> combine(const RowState<A>& a, const RowState<A>& b) {
  RowState<A> r;
  r.m = a.m > b.m ? a.m : b.m;
  auto scale = [&](A mi) { return mi == r.m ? A(1) : (mi == neg_inf<A>() ? A(0) : dev_exp(mi - r.m)); };
  r.s = a.s * scale(a.m) + b.s * scale(b.m);
  if (SMOOTH) {
    auto shift = [&](const RowState<A>& v) { return v.m == r.m || v.m == neg_inf<A>() ? A(0) : v.W * (r.m - v.m); };
    r.S = (a.S + shift(a)) + (b.S + shift(b));
    r.W = a.W + b.W;
  } else {
    r.S = 0;
    r.W = 0;
  }
  return r;
}

// The row's state on every thread of the block (blockDim.x a multiple of 32, at most 1024).
template <class A, bool SMOOTH>
__device__ __forceinline__ RowState<A> block_allreduce(RowState<A> v, RowState<A>* smem) {
  v = red::butterfly(v, 32, [](const RowState<A>& a, const RowState<A>& b) { return combine<A, SMOOTH>(a, b); });
  const int nw = blockDim.x >> 5;
  __syncthreads();  // smem may still be read for the previous row
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  RowState<A> r = smem[0];
  for (int w = 1; w < nw; ++w) r = combine<A, SMOOTH>(r, smem[w]);
  return r;
}

// Calls f(c, x_c) for the elements of the row this thread owns: the scalar head (up to the first
// 16-byte boundary), 16-byte vectors, the scalar tail.
template <class T, class F>
__device__ __forceinline__ void for_row(const T* __restrict__ row, int64_t C, F&& f) {
  constexpr int V = kVec<T>;
  const int64_t mis = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16) / static_cast<int64_t>(sizeof(T));
  const int64_t head = mis == 0 ? 0 : (V - mis < C ? V - mis : C);
  const int64_t nvec = (C - head) / V;
  const int64_t tail0 = head + nvec * V;
  const int tid = threadIdx.x, nt = blockDim.x;
  if (tid < head) f(static_cast<int64_t>(tid), load_acc(row[tid]));
  const Vec<T, V>* body = reinterpret_cast<const Vec<T, V>*>(row + head);
  for (int64_t v = tid; v < nvec; v += nt) {
    const Vec<T, V> xv = body[v];
#pragma unroll
    for (int j = 0; j < V; ++j) f(head + v * V + j, load_acc(xv.v[j]));
  }
  if (tail0 + tid < C) f(tail0 + tid, load_acc(row[tail0 + tid]));
}

template <class T, bool SMOOTH>
static __global__ __launch_bounds__(kMaxThreads) void ce_forward_kernel(CeParams p) {
  using A = dacc_t<T>;
  __shared__ RowState<A> smem[kMaxThreads / 32];
  const A* __restrict__ w = static_cast<const A*>(p.weight);
  for (int64_t r = blockIdx.x; r < p.M; r += gridDim.x) {  // uniform over the block
    const T* __restrict__ row = static_cast<const T*>(p.x) + r * p.C;
    RowState<A> st{neg_inf<A>(), A(0), A(0), A(0)};
    for_row(row, p.C, [&](int64_t c, A x) { fold<A, SMOOTH>(st, x, SMOOTH && w != nullptr ? w[c] : A(1)); });
    st = block_allreduce<A, SMOOTH>(st, smem);
    if (threadIdx.x != 0) continue;
    const A log_s = dev_log(st.s);
    static_cast<A*>(p.lse)[r] = st.m + log_s;
    const int64_t t = p.target[r];
    A l = 0;
    if (t != p.ignore_index) {
      if (t < 0 || t >= p.classes) {
        report_bad(p.status, static_cast<uint64_t>(r));
      } else {
        const A wt = w != nullptr ? w[t] : A(1);
        l = static_cast<A>(1.0 - p.label_smoothing) * wt * ((st.m - load_acc(row[t])) + log_s);
        if (SMOOTH) l += static_cast<A>(p.label_smoothing / static_cast<double>(p.C)) * (st.W * log_s + st.S);
      }
    }
    static_cast<A*>(p.loss)[r] = l;
  }
}

template <class T, bool WEIGHTED>
static __global__ __launch_bounds__(kMaxThreads) void ce_backward_kernel(CeParams p) {
  using A = dacc_t<T>;
  constexpr int V = kVec<T>;
  const A* __restrict__ w = static_cast<const A*>(p.weight);
  const double ls = p.label_smoothing;
  const A keep = static_cast<A>(1.0 - ls), smooth = static_cast<A>(ls / static_cast<double>(p.C));
  for (int64_t r = blockIdx.x; r < p.M; r += gridDim.x) {
    const T* __restrict__ row = static_cast<const T*>(p.x) + r * p.C;
    T* __restrict__ out = static_cast<T*>(p.dx) + r * p.C;
    const int64_t t = p.target[r];
    const bool skip = t == p.ignore_index || t < 0 || t >= p.classes;
    A a = 0, b = 0, at_t = 0, L = 0;
    if (!skip) {
      const A g = static_cast<const A*>(p.grad)[r];
      L = static_cast<const A*>(p.lse)[r];
      const A wt = WEIGHTED ? w[t] : A(1);
      A total = 0;
      if (ls > 0) total = WEIGHTED ? *static_cast<const A*>(p.weight_sum) : static_cast<A>(p.C);
      a = g * (keep * wt + (ls > 0 ? smooth * total : A(0)));
      b = ls > 0 ? g * smooth : A(0);
      at_t = g * keep * wt;
    }
    // dx_c for element c of value x (0 on a skipped row).
    auto grad_of = [&](int64_t c, A x) -> T {
      if (skip) return convert<T>(A(0));
      A d = a * dev_exp(x - L) - (WEIGHTED ? b * w[c] : b);
      if (c == t) d -= at_t;
      return convert<T>(d);
    };
    if (p.dx_vec) {
      const int64_t mis = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16) / static_cast<int64_t>(sizeof(T));
      const int64_t head = mis == 0 ? 0 : (V - mis < p.C ? V - mis : p.C);
      const int64_t nvec = (p.C - head) / V;
      const int64_t tail0 = head + nvec * V;
      const int tid = threadIdx.x, nt = blockDim.x;
      if (tid < head) out[tid] = grad_of(tid, load_acc(row[tid]));
      const Vec<T, V>* xb = reinterpret_cast<const Vec<T, V>*>(row + head);
      Vec<T, V>* ob = reinterpret_cast<Vec<T, V>*>(out + head);
      for (int64_t v = tid; v < nvec; v += nt) {
        const Vec<T, V> xv = xb[v];
        Vec<T, V> yv;
#pragma unroll
        for (int j = 0; j < V; ++j) yv.v[j] = grad_of(head + v * V + j, load_acc(xv.v[j]));
        ob[v] = yv;
      }
      if (tail0 + tid < p.C) out[tail0 + tid] = grad_of(tail0 + tid, load_acc(row[tail0 + tid]));
    } else {
      for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x) out[c] = grad_of(c, load_acc(row[c]));
    }
  }
}

// Threads per row: about 4 vectors per thread, 32..512.
template <class T>
int threads_for(int64_t C) {
  return static_cast<int>(std::min<int64_t>(kMaxThreads, std::max<int64_t>(32, pow2_ceil(ceil_div(C, kVec<T> * 4)))));
}

template <class T>
void launch_forward(const CeParams& p, cudaStream_t stream) {
  const int threads = threads_for<T>(p.C);
  if (p.label_smoothing > 0) {
    ce_forward_kernel<T, true><<<grid_x(p.M), threads, 0, stream>>>(p);
  } else {
    ce_forward_kernel<T, false><<<grid_x(p.M), threads, 0, stream>>>(p);
  }
  check_launch("cross_entropy", "ce_forward_kernel");
}

template <class T>
void launch_backward(const CeParams& p, cudaStream_t stream) {
  const int threads = threads_for<T>(p.C);
  if (p.weight != nullptr) {
    ce_backward_kernel<T, true><<<grid_x(p.M), threads, 0, stream>>>(p);
  } else {
    ce_backward_kernel<T, false><<<grid_x(p.M), threads, 0, stream>>>(p);
  }
  check_launch("cross_entropy_backward", "ce_backward_kernel");
}

void cross_entropy_forward_cuda(const Tensor& loss, const Tensor& lse, const Tensor& x, const Tensor& target,
                                const Tensor& weight, const CrossEntropyParams& cp) {
  const int64_t M = x.size(0), C = x.size(1);
  if (M == 0) return;
  CurrentDevice guard(x.device().index());
  const cudaStream_t stream = stream_of(x);
  DeviceStatus status(stream);
  CeParams p;
  p.x = x.data_ptr();
  p.target = static_cast<const int64_t*>(target.data_ptr());
  p.weight = weight.defined() ? weight.data_ptr() : nullptr;
  p.loss = loss.data_ptr();
  p.lse = lse.data_ptr();
  p.M = M;
  p.C = C;
  p.classes = cp.classes < 0 ? C : cp.classes;
  p.ignore_index = cp.ignore_index;
  p.label_smoothing = cp.label_smoothing;
  p.status = status.dev();
  dispatch_device_dtype<DTypeSet::Floating>(x.dtype(), "cross_entropy",
                                            [&]<class T>(TypeTag<T>) { launch_forward<T>(p, stream); });
  // Checked later, without waiting here (Note [Bad index flag]).
  status.defer([target, stream](uint64_t word, uint64_t) {
    if (word == 0) return;
    const int64_t row = static_cast<int64_t>(~word);
    const int64_t v = read_index_value(static_cast<const int64_t*>(target.data_ptr()) + row, kInt64, stream);
    TS_THROW(IndexError, "cross_entropy: Target ", v, " is out of bounds.");
  });
}

void cross_entropy_backward_cuda(const Tensor& dx, const Tensor& grad, const Tensor& x, const Tensor& target,
                                 const Tensor& weight, const Tensor& weight_sum, const Tensor& lse,
                                 const CrossEntropyParams& cp) {
  const int64_t M = x.size(0), C = x.size(1);
  if (M == 0 || C == 0) return;
  CurrentDevice guard(x.device().index());
  const cudaStream_t stream = stream_of(x);
  CeParams p;
  p.x = x.data_ptr();
  p.target = static_cast<const int64_t*>(target.data_ptr());
  p.weight = weight.defined() ? weight.data_ptr() : nullptr;
  p.weight_sum = weight_sum.defined() ? weight_sum.data_ptr() : nullptr;
  p.lse = lse.data_ptr();
  p.grad = grad.data_ptr();
  p.dx = dx.data_ptr();
  p.M = M;
  p.C = C;
  p.classes = cp.classes < 0 ? C : cp.classes;
  p.ignore_index = cp.ignore_index;
  p.label_smoothing = cp.label_smoothing;
  p.dx_vec = reinterpret_cast<uintptr_t>(p.x) % 16 == reinterpret_cast<uintptr_t>(p.dx) % 16;
  dispatch_device_dtype<DTypeSet::Floating>(x.dtype(), "cross_entropy_backward",
                                            [&]<class T>(TypeTag<T>) { launch_backward<T>(p, stream); });
}

}  // namespace

void register_loss() {
  cross_entropy_forward_kernel.set(DeviceType::CUDA, &cross_entropy_forward_cuda);
  cross_entropy_backward_kernel.set(DeviceType::CUDA, &cross_entropy_backward_cuda);
}

}  // namespace tessera::cuda
