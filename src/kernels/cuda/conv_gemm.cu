// 1x1 convolutions as cuBLASLt GEMMs (conv_gemm.h), through the GEMM entries of matmul_lt.h.
//
// A 1x1 convolution with padding 0 and one group maps each position (n, h, w) to itself: with the
// positions as rows and the channels as columns,
//   forward          Y (P, K) = X (P, C) @ W^T (C, K) + bias     W = w (K, C, 1, 1) as a (K, C) matrix
//   input backward  dX (P, C) = dY (P, K) @ W (K, C) + bias
//   weight backward dW (K, C) = dY^T (K, P) @ X (P, C)
// where P runs over (n, h, w). Every 4-D operand is read in place through a 3-D view (batch, positions,
// channels): when (n, h, w) fold into one stride in every operand of the call (channels-last, or NCHW
// with N == 1 or H = W = 1), one GEMM with P = N*H*W; otherwise, when (h, w) fold (NCHW), a batched
// GEMM over n with P = H*W and the weight broadcast (batch stride 0). Transposes and leading dims are
// gemm_lt's business (each matrix is row- or column-major in one of the two). An operand whose (h, w)
// do not fold (a transposed or stepped view) is not copied here: the path declines and cuDNN, which
// copies such inputs anyway, runs. The weight gradient sums over the batch, so it takes the one-GEMM
// form only (an NCHW grad with N > 1 goes to cuDNN).
//
// A grad smaller than the full conv2d output (conv_transpose2d with output_padding, a cut weight
// gradient): the input gradient computes dY @ W into a dense (N, C, gh, gw) buffer and scatters it
// onto zeros; the weight gradient gathers the positions of x that grad covers into a dense copy.
//
// Stride s > 1 (ResNet's downsampling shortcut) runs the same way when kConv1x1GemmStrided is set: the
// forward and the weight gradient gather x's positions (h*s, w*s) into a dense copy (strided reads
// would make the GEMM a batch of (OW x C) products with a step in the rows), the input gradient
// scatters onto zeros. It is off: at s = 2 the traffic beyond reading and writing in place (two
// gathers of a quarter of x, and for dX a buffer written and read before the scatter onto zeros: about
// 7 M*C elements for M output positions) costs, at the H200's ~4 TB/s against ~600 TFLOP/s of bfloat16
// GEMM, about 350 / K of the three GEMMs' time: two thirds again at ResNet-50's K = 512 (layer2's
// shortcut, where cuDNN already runs at PyTorch's speed), a sixth at K = 2048. cuDNN's implicit GEMM
// reads the strided positions in place and keeps those layers (an estimate, to measure on the GPU
// with the flag set).
//
// Types: float16 / bfloat16 (float accumulation, one rounding on store), float64, and float32 where
// cuda::allow_tf32() (what gemm_lt reads) agrees with cuda::cudnn_allow_tf32() (what a convolution
// promises): with the defaults (matmul off, cuDNN on) a float32 1x1 convolution stays on cuDNN, so that
// neither switch is overridden. Bias: the cuBLASLt BIAS epilogue where the result has unit stride along
// the channels (channels-last), else an add after the GEMM. Sizes: operands past 2^31 elements decline
// (cuDNN's batch chunks take them). cuBLASLt's algorithm for a key is fixed, so results are run-to-run
// identical (the determinism switch needs nothing more). Where cuBLASLt offers no algorithm (gemm_lt
// raises NotImplementedError before running anything), the path declines.
#include "kernels/cuda/conv_gemm.h"

#include <climits>
#include <initializer_list>
#include <optional>
#include <vector>

#include "kernels/cuda/matmul_lt.h"
#include "ops/gemm_kernel.h"
#include "tensor/tensor_impl.h"
#include "tessera/cuda.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

constexpr MemoryFormat kChannelsLast = MemoryFormat::ChannelsLast;

bool dtype_taken(DType dt) {
  switch (dt) {
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float64: return true;
    case DType::Float32: return allow_tf32() == cudnn_allow_tf32();
    default: return false;
  }
}

// A 1x1 kernel, no padding, one group, stride 1 (any with kConv1x1GemmStrided); dilation is free.
bool geometry_taken(const ConvGeometry& g, DType dt) {
  const bool stride_ok = kConv1x1GemmStrided ? g.stride_h >= 1 && g.stride_w >= 1 : g.stride_h == 1 && g.stride_w == 1;
  return g.kernel_h == 1 && g.kernel_w == 1 && g.pad_h == 0 && g.pad_w == 0 && g.groups == 1 && stride_ok &&
         dtype_taken(dt);
}

bool below_2e31(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->numel() > INT32_MAX) return false;
  return true;
}

// The positions of t (N, C, H, W), (h, w) or (n, h, w) when with_batch, as one strided dim: its size
// and stride, or nullopt when they do not fold. Size-1 dims fold with any stride.
struct Fold {
  int64_t size, stride;
};
std::optional<Fold> fold(const Tensor& t, bool with_batch) {
  int64_t size = 1, stride = 0;
  bool any = false;
  for (int64_t d = 3; d >= (with_batch ? 0 : 2); --d) {  // inner to outer: w, h, (n)
    if (d == 1) continue;
    const int64_t s = t.size(d);
    if (s == 1) continue;
    if (!any) {
      size = s;
      stride = t.stride(d);
      any = true;
    } else if (t.stride(d) == size * stride) {
      size *= s;
    } else {
      return std::nullopt;
    }
  }
  // One position: any stride; the one of a dense matrix keeps cuBLASLt's leading dims plain.
  if (!any) stride = t.stride(1) == 1 ? std::max<int64_t>(t.size(1), 1) : 1;
  return Fold{size, stride};
}

// The (batch, positions, channels) views of 4-D tensors sharing N: one batch when every tensor's
// (n, h, w) fold, else N batches when batched is allowed and every (h, w) folds; empty when neither.
std::vector<Tensor> row_views(std::initializer_list<const Tensor*> ts, bool batched) {
  bool merged = true;
  for (const Tensor* t : ts) merged = merged && fold(*t, true).has_value();
  if (!merged && !batched) return {};
  std::vector<Tensor> views;
  for (const Tensor* t : ts) {
    const std::optional<Fold> f = fold(*t, merged);
    if (!f) return {};
    const int64_t b = merged ? 1 : t->size(0);
    views.push_back(t->as_strided({b, f->size, t->size(1)}, {merged ? 0 : t->stride(0), f->stride, t->stride(1)}));
  }
  return views;
}

// w (K, C, 1, 1) as the (K, C) matrix (any strides).
Tensor weight_matrix(const Tensor& w) { return w.select(3, 0).select(2, 0); }

// x's positions (i * stride_h, j * stride_w) for i < rows, j < cols, as a dense (N, C, rows, cols)
// copy, channels-last or row-major.
Tensor gather(const Tensor& x, int64_t rows, int64_t cols, const ConvGeometry& g, bool channels_last) {
  Tensor v = x.slice(2, 0, (rows - 1) * g.stride_h + 1, g.stride_h).slice(3, 0, (cols - 1) * g.stride_w + 1, g.stride_w);
  return v.contiguous(channels_last ? kChannelsLast : MemoryFormat::Contiguous);
}

// c (B, P, n) = a (B, P, k) @ b (B, k, n) + bias (n, or undefined); false, having written nothing,
// where cuBLASLt has no algorithm.
bool run_gemm(const Tensor& c, const Tensor& a, const Tensor& b, const Tensor& bias) {
  try {
    if (bias.defined() && c.stride(2) == 1) {
      gemm_bias_act(c, a, b, bias, Activation::None);
    } else {
      gemm_lt(GemmParams{a, b, c, 1, 0});
      if (bias.defined()) Tensor(c).add_(bias);
    }
  } catch (const NotImplementedError&) {
    return false;
  }
  return true;
}

// bias (C) as (1, C, 1, 1), to add onto a 4-D result.
Tensor bias_4d(const Tensor& bias) { return bias.unsqueeze(0).unsqueeze(2).unsqueeze(3); }

}  // namespace

bool conv1x1_forward_gemm(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                          const ConvGeometry& g) {
  if (!geometry_taken(g, out.dtype()) || x.numel() == 0 || out.numel() == 0 || !below_2e31({&x, &out})) return false;
  const bool strided = g.stride_h != 1 || g.stride_w != 1;
  const Tensor xs = strided ? gather(x, out.size(2), out.size(3), g, out.is_contiguous(kChannelsLast)) : x;
  const std::vector<Tensor> v = row_views({&xs, &out}, true);
  if (v.empty()) return false;
  const int64_t batches = v[1].size(0);
  const Tensor wt = weight_matrix(w).t().unsqueeze(0).expand({batches, g.in_channels, g.out_channels});
  return run_gemm(v[1], v[0], wt, bias);
}

bool conv1x1_input_backward_gemm(const Tensor& out, const Tensor& grad, const Tensor& w, const Tensor& bias,
                                 const ConvGeometry& g) {
  if (!geometry_taken(g, out.dtype()) || grad.numel() == 0 || out.numel() == 0 || !below_2e31({&grad, &out}))
    return false;
  const int64_t gh = grad.size(2), gw = grad.size(3);
  // Every image position is the (only) tap of one grad position: the product is the result itself.
  // Otherwise (stride > 1, or a grad smaller than the image) it lands on every stride-th row and
  // column of zeros.
  const bool direct = gh == out.size(2) && gw == out.size(3);
  const Shape sizes{out.size(0), out.size(1), gh, gw};
  const Tensor res = direct ? out
                     : out.is_contiguous(kChannelsLast)
                         ? make_empty_strided(sizes, channels_last_strides(sizes), out.dtype(), out.device())
                         : make_empty(sizes, out.dtype(), out.device());
  const std::vector<Tensor> v = row_views({&grad, &res}, true);
  if (v.empty()) return false;
  const int64_t batches = v[1].size(0);
  const Tensor wm = weight_matrix(w).unsqueeze(0).expand({batches, g.out_channels, g.in_channels});
  if (!run_gemm(v[1], v[0], wm, direct ? bias : Tensor())) return false;
  if (direct) return true;
  Tensor o(out);
  o.zero_();
  o.slice(2, 0, (gh - 1) * g.stride_h + 1, g.stride_h).slice(3, 0, (gw - 1) * g.stride_w + 1, g.stride_w).copy_(res);
  if (bias.defined()) o.add_(bias_4d(bias));
  return true;
}

bool conv1x1_weight_backward_gemm(const Tensor& out, const Tensor& grad, const Tensor& x, const ConvGeometry& g) {
  if (!geometry_taken(g, out.dtype()) || grad.numel() == 0 || x.numel() == 0 || out.numel() == 0 ||
      !below_2e31({&grad, &x}))
    return false;
  // The sum runs over (n, h, w): grad must be one (positions, K) matrix.
  if (!fold(grad, true)) return false;
  const int64_t gh = grad.size(2), gw = grad.size(3);
  const bool all_positions = gh == x.size(2) && gw == x.size(3);
  const Tensor xs = all_positions && fold(x, true) ? x : gather(x, gh, gw, g, true);
  const std::vector<Tensor> v = row_views({&grad, &xs}, false);
  if (v.empty()) return false;
  return run_gemm(weight_matrix(out).unsqueeze(0), v[0].transpose(1, 2), v[1], Tensor());
}

}  // namespace tessera::cuda
