// The flash attention ops (ops/attention_ops.h): meta checks with clear messages, the kernel layout
// of Note [Flash attention layout] (last dim contiguous, other strides as given; a copy only where
// that or the GPU's 16-byte row alignment does not hold), output allocation and one call of a slot
// of ops/attention_kernel.h. The forward records {q, k, v} -> {out} with attrs.tensors = {lse},
// attrs.ints = {is_causal} and attrs.scalars = {scale}.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "ops/attention_kernel.h"
#include "ops/attention_ops.h"
#include "ops/autograd_hook.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tessera/cuda.h"

namespace tessera {

KernelSlot<AttentionForwardFn> attention_forward_kernel("flash_attention_forward");
KernelSlot<AttentionBackwardFn> attention_backward_kernel("flash_attention_backward");

namespace {

DType stat_dtype(DType t) { return t == kFloat64 ? kFloat64 : kFloat32; }

bool gpu_dtype(DType t) { return t == kFloat16 || t == kBFloat16; }
bool gpu_head_dim(int64_t d) { return d == 64 || d == 128; }

// The GPU kernels use mma.sync / ldmatrix / cp.async (sm_80 and newer).
bool gpu_arch_ok(const Device& d) {
  const cuda::DeviceProperties p = cuda::get_device_properties(d.index());
  return p.major >= 8;
}

// Row starts of t 16-byte aligned: the pointer and every stride but the last.
bool rows_aligned(const Tensor& t) {
  const int64_t es = static_cast<int64_t>(element_size(t.dtype()));
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.size(d) > 1 && (t.stride(d) * es) % 16 != 0) return false;
  return true;
}

// A detached alias of t in dtype d whose last dim is contiguous (16-byte aligned rows on the GPU).
Tensor kernel_arg(const Tensor& t, DType d) {
  Tensor r = cast_to(t.detach(), d);
  if (r.size(-1) > 1 && r.stride(-1) != 1) r = r.contiguous();
  if (r.device().is_cuda() && !rows_aligned(r)) {
    r = r.contiguous();
    // A contiguous tensor at a misaligned storage offset is its own contiguous(): copy it.
    if (!rows_aligned(r)) r = r.clone();
  }
  return r;
}

// Validates q, k, v; returns the kernel parameters.
AttentionParams check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                          double scale) {
  check_defined(op, q, "query");
  check_defined(op, k, "key");
  check_defined(op, v, "value");
  TS_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, ShapeError, op,
           ": expected 4-D query, key and value (batch, heads, seq, head_dim), got ", q.sizes(), ", ", k.sizes(),
           " and ", v.sizes());
  TS_CHECK(is_floating_point(q.dtype()), DTypeError, op, ": expected a floating-point query, got ",
           dtype_name(q.dtype()));
  TS_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), DTypeError, op,
           ": expected query, key and value of one dtype, got ", dtype_name(q.dtype()), ", ", dtype_name(k.dtype()),
           " and ", dtype_name(v.dtype()));
  check_same_device(op, {&q, &k, &v});
  TS_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) && v.size(1) == q.size(1),
           ShapeError, op, ": expected query, key and value with the same batch and head dims, got ", q.sizes(), ", ",
           k.sizes(), " and ", v.sizes());
  TS_CHECK(k.size(2) == v.size(2), ShapeError, op, ": key and value must have the same sequence length, got ",
           k.size(2), " and ", v.size(2));
  TS_CHECK(k.size(3) == q.size(3) && v.size(3) == q.size(3), ShapeError, op,
           ": expected query, key and value with one head dim, got ", q.size(3), ", ", k.size(3), " and ", v.size(3));
  TS_CHECK(q.size(3) >= 1, ShapeError, op, ": expected a head dim of at least 1, got ", q.sizes());
  TS_CHECK(k.size(2) >= 1 || q.numel() == 0, ShapeError, op,
           ": expected at least one key (key of size ", k.sizes(), ")");
  if (q.device().is_cuda()) {
    TS_CHECK(gpu_dtype(q.dtype()), NotImplementedError, op, ": the GPU kernel takes float16 or bfloat16, got ",
             dtype_name(q.dtype()));
    TS_CHECK(gpu_head_dim(q.size(3)), NotImplementedError, op, ": the GPU kernel takes head dim 64 or 128, got ",
             q.size(3));
    TS_CHECK(gpu_arch_ok(q.device()), NotImplementedError, op,
             ": the GPU kernel needs compute capability 8.0 or newer (", q.device().str(), ")");
  }
  TS_CHECK(scale == scale, ValueError, op, ": scale is NaN");
  return AttentionParams{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), causal, scale};
}

// An output of x's (B, H, N, D) shape (Note [Flash attention layout]): dense with x's dim order (dims
// sorted by x's strides, largest outermost, ties in dim order) and the last dim innermost, as PyTorch's
// cuDNN attention allocates them. A (B, H, N, D)-contiguous x gets a contiguous output; GPT-2's
// transposed (B, N, H, D) views get (B, N, H, D) memory. The same on every device, the meta device
// included: the layout is a function of x's layout alone, so a captured graph's layouts re-infer.
Tensor make_output(const Tensor& x, DType d) {
  std::array<int64_t, 3> order = {0, 1, 2};  // outermost first; dim 3 is innermost
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x.stride(a) > x.stride(b); });
  Shape strides(4);
  int64_t step = x.size(3);
  strides[3] = 1;
  for (int i = 2; i >= 0; --i) {
    strides[order[i]] = step;
    step *= x.size(order[i]);
  }
  return make_empty_strided(x.sizes(), strides, d, x.device());
}

// Whether sizes / strides are dense: the dims (size > 1), by increasing stride, each step exactly over
// the dims before (no two elements at one address, no holes).
bool dense_layout(const Shape& sizes, const Shape& strides) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t span = 1;
  for (size_t d : dims) {
    if (strides[d] != span) return false;
    span *= sizes[d];
  }
  return true;
}

// Note [Packed attention gradients]: q, k and v cut from one projection (GPT-2's qkv = c_attn(x),
// split into three (B, T, C) pieces, each viewed as (B, H, T, D)) are views of one storage with equal
// sizes and strides, k at q + delta and v at q + 2 delta. Their gradients are then allocated the same
// way, as the slices [0], [1], [2] of one (3, B, H, L, D) buffer with strides (delta, q's strides),
// where that buffer is dense and its rows 16-byte aligned. The split's backward (autograd/derivatives/
// shape_ops.cpp, split_back) finds the three gradients adjacent in one storage and returns their union
// as a view instead of concatenating them: the qkv gradient costs no copy. Otherwise each gradient is
// its own buffer (make_output). GPU only, where the packed buffer saves GPT-2's qkv gradient copy;
// the CPU and the meta device give each gradient its own buffer. Not while a program is being
// captured (ts::compile): the capture replays a view (recorded_strided in ops/views.cpp) on the base it
// knows for the viewed tensor, and split's union view of three packed gradients (as_strided over the
// pack) replayed on dq's own value overruns it; set_layout refuses it (seen on the CPU in a joint
// backward capture, and on the GPU in GPT-2's training step captured up to its backward's graph
// break). Without the packing the capture holds; the graph calls that follow pack again.
std::optional<std::array<Tensor, 3>> packed_grads(const Tensor& q, const Tensor& k, const Tensor& v, DType d) {
  if (!q.device().is_cuda() || detail::t_capturing) return std::nullopt;
  const auto& sq = q.impl_ptr()->storage();
  if (sq != k.impl_ptr()->storage() || sq != v.impl_ptr()->storage()) return std::nullopt;
  if (k.sizes() != q.sizes() || v.sizes() != q.sizes() || k.strides() != q.strides() || v.strides() != q.strides())
    return std::nullopt;
  const int64_t delta = k.storage_offset() - q.storage_offset();
  if (delta <= 0 || v.storage_offset() - k.storage_offset() != delta || q.stride(3) != 1) return std::nullopt;
  Shape sizes = q.sizes(), strides = q.strides();
  sizes.insert(sizes.begin(), 3);
  strides.insert(strides.begin(), delta);
  if (!dense_layout(sizes, strides)) return std::nullopt;
  const int64_t es = static_cast<int64_t>(element_size(d));
  for (size_t i = 0; i + 1 < strides.size(); ++i)
    if (sizes[i] > 1 && (strides[i] * es) % 16 != 0) return std::nullopt;
  const Tensor pack = make_empty_strided(sizes, strides, d, q.device());
  return std::array<Tensor, 3>{pack.select(0, 0), pack.select(0, 1), pack.select(0, 2)};
}

}  // namespace

bool flash_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (!q.defined() || !k.defined() || !v.defined() || q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  if (!is_floating_point(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype()) return false;
  if (k.device() != q.device() || v.device() != q.device()) return false;
  for (int d = 0; d < 2; ++d)
    if (k.size(d) != q.size(d) || v.size(d) != q.size(d)) return false;
  if (k.size(2) != v.size(2) || k.size(3) != q.size(3) || v.size(3) != q.size(3)) return false;
  if (q.size(2) < 1 || k.size(2) < 1 || q.size(3) < 1) return false;
  if (q.device().is_cuda()) return gpu_dtype(q.dtype()) && gpu_head_dim(q.size(3)) && gpu_arch_ok(q.device());
  return q.device().is_cpu();
}

std::tuple<Tensor, Tensor> flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                                                   double scale) {
  const OpId id = OpId::flash_attention_forward;
  const char* op = op_name(id);
  OpScope scope(id, {&q, &k, &v});
  const AttentionParams p = check_qkv(op, q, k, v, is_causal, scale);
  const DType d = q.dtype();
  Tensor out = make_output(q, d);
  Tensor lse = make_empty({p.batch, p.heads, p.q_len}, stat_dtype(d), q.device());
  if (q.numel() > 0)
    attention_forward_kernel(q.device(), out, lse, kernel_arg(q, d), kernel_arg(k, d), kernel_arg(v, d), p);
  if (should_record({&q, &k, &v})) {
    OpAttrs a;
    a.scalars = {Scalar(scale)};
    a.ints = {is_causal ? 1 : 0};
    a.tensors = {lse};
    record_op(id, {q, k, v}, {out}, std::move(a));
  }
  return {out, lse};
}

std::tuple<Tensor, Tensor, Tensor> flash_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                                            const Tensor& v, const Tensor& out, const Tensor& lse,
                                                            bool is_causal, double scale) {
  const OpId id = OpId::flash_attention_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad_out, &q, &k, &v, &out, &lse});
  const AttentionParams p = check_qkv(op, q, k, v, is_causal, scale);
  check_defined(op, grad_out, "grad_out");
  check_defined(op, out, "out");
  check_defined(op, lse, "lse");
  TS_CHECK(grad_out.sizes() == q.sizes(), ShapeError, op, ": expected grad_out of the query's size ", q.sizes(),
           ", got ", grad_out.sizes());
  TS_CHECK(out.sizes() == q.sizes(), ShapeError, op, ": expected out of the query's size ", q.sizes(), ", got ",
           out.sizes());
  const Shape lse_shape{p.batch, p.heads, p.q_len};
  TS_CHECK(lse.sizes() == lse_shape, ShapeError, op, ": expected lse of size ", lse_shape, ", got ", lse.sizes());
  const DType d = q.dtype();
  TS_CHECK(is_floating_point(grad_out.dtype()) && is_floating_point(out.dtype()), DTypeError, op,
           ": expected floating-point grad_out and out, got ", dtype_name(grad_out.dtype()), " and ",
           dtype_name(out.dtype()));
  TS_CHECK(lse.dtype() == stat_dtype(d), DTypeError, op, ": expected lse of dtype ", dtype_name(stat_dtype(d)),
           " for inputs of dtype ", dtype_name(d), ", got ", dtype_name(lse.dtype()));
  check_same_device(op, {&q, &grad_out, &out, &lse});
  Tensor dq, dk, dv;
  if (auto packed = packed_grads(q, k, v, d)) {
    dq = (*packed)[0];
    dk = (*packed)[1];
    dv = (*packed)[2];
  } else {
    dq = make_output(q, d);
    dk = make_output(k, d);
    dv = make_output(v, d);
  }
  if (q.numel() == 0) {
    // No query: nothing flows to key and value.
    if (dk.numel() > 0) {
      dk.zero_();
      dv.zero_();
    }
    return {dq, dk, dv};
  }
  attention_backward_kernel(q.device(), dq, dk, dv, kernel_arg(grad_out, d), kernel_arg(q, d), kernel_arg(k, d),
                            kernel_arg(v, d), kernel_arg(out, d), lse.detach().contiguous(), p);
  if (capturing())  // Note [Trace records]: the call as made
    detail::trace_record(id, {grad_out, q, k, v, out, lse}, {dq, dk, dv},
                         OpAttrs{.scalars = {Scalar(scale)}, .ints = {is_causal ? 1 : 0}});
  return {dq, dk, dv};
}

}  // namespace tessera
