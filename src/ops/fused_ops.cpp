// The fused linear-layer ops (ops/fused_ops.h): meta checks, then the slot of ops/fused_kernel.h where
// the device has a kernel, else the composition of tessera ops that defines the semantics. Every
// helper op inside runs with grad mode off (they are implementation); the ops record themselves once.
//
// linear_cross_entropy runs no kernel of its own: it chains the GEMM slot and the fused cross-entropy
// op (ops/loss_ops.h) over row chunks, computing the gradients in the forward (Note [Chunked
// classifier loss]).
#include <algorithm>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "ops/autocast_hook.h"
#include "ops/autograd_hook.h"
#include "ops/fused_kernel.h"
#include "ops/fused_ops.h"
#include "ops/gemm_kernel.h"
#include "ops/loss_ops.h"
#include "ops/no_record.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<LinearGeluFn> linear_gelu_kernel("linear_gelu");
KernelSlot<LinearDgeluBgradFn> linear_dgelu_bgrad_kernel("linear_dgelu_bgrad");
KernelSlot<GeluTanhBackwardFn> gelu_tanh_backward_kernel("gelu_tanh_backward");
KernelSlot<LinearWeightBiasGradFn> linear_weight_bias_grad_kernel("linear_weight_bias_grad");

namespace {

DType compute_dtype(DType d) { return d == kFloat16 || d == kBFloat16 ? kFloat32 : d; }

Shape leading(const Tensor& x) { return Shape(x.sizes().begin(), x.sizes().end() - 1); }

}  // namespace

namespace {

// pre = x2 @ w^T + b and h = gelu_tanh(pre), both (M, N), through the slot where the device has it
// (call with grad mode off; x2 (M, K), w, b contiguous). Without keep_pre the slot need not write
// the pre-activation (no backward will read it) and pre may come back undefined.
std::pair<Tensor, Tensor> pre_and_gelu(const Tensor& x2, const Tensor& w, const Tensor& b, bool keep_pre) {
  const int64_t m = x2.size(0), k = x2.size(1), n = w.size(0);
  if (m > 0 && n > 0 && k > 0 && linear_gelu_kernel.has(x2.device().type())) {
    Tensor h = make_empty({m, n}, x2.dtype(), x2.device());
    Tensor pre = keep_pre ? make_empty({m, n}, x2.dtype(), x2.device()) : Tensor();
    linear_gelu_kernel(x2.device(), h, pre, x2, w, b);
    return {pre, h};
  }
  Tensor pre = linear(x2, w, b.defined() ? std::optional<Tensor>(b) : std::nullopt);
  return {pre, gelu(pre, "tanh")};
}

}  // namespace

namespace {
// linear_gelu's body; keep_saved computes the pre-activation even when nothing records (the
// compiler's replay of a joint graph's forward reads it as an output).
std::tuple<Tensor, Tensor> linear_gelu_body(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                                            bool keep_saved) {
  const Tensor* bp = bias && bias->defined() ? &*bias : nullptr;
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::linear_gelu, {&x, &weight, bp}); c) return linear_gelu_body(c[0], c[1], c.opt(2), keep_saved);
  static const Tensor kNoBias;  // observers see an undefined tensor, never a null pointer
  const OpId id = OpId::linear_gelu;
  const char* op = op_name(id);
  OpScope scope(id, {&x, &weight, bp ? bp : &kNoBias});
  check_defined(op, x, "input");
  check_defined(op, weight, "weight");
  check_same_device(op, {&x, &weight, bp});
  TS_CHECK(x.dim() >= 1, ShapeError, op, ": input must have at least 1 dim, got a 0-D tensor");
  TS_CHECK(weight.dim() == 2, ShapeError, op, ": weight must be a matrix (out_features, in_features), got shape ",
           weight.sizes());
  TS_CHECK(is_floating_point(x.dtype()), DTypeError, op, ": expected a floating-point input, got ",
           dtype_name(x.dtype()));
  TS_CHECK(weight.dtype() == x.dtype() && (!bp || bp->dtype() == x.dtype()), DTypeError, op,
           ": expected input, weight and bias of one dtype, got ", dtype_name(x.dtype()), ", ",
           dtype_name(weight.dtype()), bp ? ", " + std::string(dtype_name(bp->dtype())) : std::string());
  const int64_t k = x.size(-1), n = weight.size(0), m = numel_of(leading(x));
  TS_CHECK(weight.size(1) == k, ShapeError, op, ": mat1 and mat2 shapes cannot be multiplied (", m, "x", k, " and ",
           weight.size(1), "x", n, ")");
  if (bp)
    TS_CHECK(bp->dim() == 1 && bp->size(0) == n, ShapeError, op, ": expected a bias of size (", n, "), got ",
             bp->sizes());
  Shape out_shape = leading(x);
  out_shape.push_back(n);
  const bool rec = should_record({&x, &weight, bp});
  Tensor y, pre;
  {
    NoRecordScope no_record;
    const Tensor x2 = x.detach().reshape({m, k}).contiguous();
    const Tensor w = weight.detach().contiguous();
    const Tensor b = bp ? bp->detach().contiguous() : Tensor();
    std::tie(pre, y) = pre_and_gelu(x2, w, b, rec || keep_saved);
    y = y.view(out_shape);
  }
  if (rec) {
    OpAttrs attrs;
    attrs.tensors = {pre};
    record_op(id, {x, weight, bp ? *bp : kNoBias}, {y}, std::move(attrs));
  }
  return {y, pre};
}
}  // namespace

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  return std::get<0>(linear_gelu_body(x, weight, bias, false));
}
std::tuple<Tensor, Tensor> linear_gelu_saving(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  return linear_gelu_body(x, weight, bias, true);
}

namespace {
// mlp_gelu's body; keep_saved as linear_gelu_body's.
std::tuple<Tensor, Tensor, Tensor> mlp_gelu_body(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1,
                                                 const Tensor& w2, const std::optional<Tensor>& b2, bool keep_saved) {
  const Tensor* b1p = b1 && b1->defined() ? &*b1 : nullptr;
  const Tensor* b2p = b2 && b2->defined() ? &*b2 : nullptr;
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::mlp_gelu, {&x, &w1, b1p, &w2, b2p}); c)
      return mlp_gelu_body(c[0], c[1], c.opt(2), c[3], c.opt(4), keep_saved);
  static const Tensor kNoBias;
  const OpId id = OpId::mlp_gelu;
  const char* op = op_name(id);
  OpScope scope(id, {&x, &w1, b1p ? b1p : &kNoBias, &w2, b2p ? b2p : &kNoBias});
  check_defined(op, x, "input");
  check_defined(op, w1, "weight1");
  check_defined(op, w2, "weight2");
  check_same_device(op, {&x, &w1, b1p, &w2, b2p});
  TS_CHECK(x.dim() >= 1, ShapeError, op, ": input must have at least 1 dim, got a 0-D tensor");
  TS_CHECK(w1.dim() == 2 && w2.dim() == 2, ShapeError, op, ": expected matrix weights, got ", w1.sizes(), " and ",
           w2.sizes());
  TS_CHECK(is_floating_point(x.dtype()), DTypeError, op, ": expected a floating-point input, got ",
           dtype_name(x.dtype()));
  for (const Tensor* t : {&w1, b1p, &w2, b2p})
    TS_CHECK(!t || t->dtype() == x.dtype(), DTypeError, op, ": expected the weights and biases in the input's dtype ",
             dtype_name(x.dtype()), ", got ", dtype_name(t->dtype()));
  const int64_t k = x.size(-1), n1 = w1.size(0), n2 = w2.size(0), m = numel_of(leading(x));
  TS_CHECK(w1.size(1) == k && w2.size(1) == n1, ShapeError, op, ": shapes cannot be multiplied: input ", x.sizes(),
           ", weight1 ", w1.sizes(), ", weight2 ", w2.sizes());
  TS_CHECK(!b1p || (b1p->dim() == 1 && b1p->size(0) == n1), ShapeError, op, ": expected bias1 of size (", n1,
           "), got ", b1p ? b1p->sizes() : Shape{});
  TS_CHECK(!b2p || (b2p->dim() == 1 && b2p->size(0) == n2), ShapeError, op, ": expected bias2 of size (", n2,
           "), got ", b2p ? b2p->sizes() : Shape{});
  Shape out_shape = leading(x);
  out_shape.push_back(n2);
  const bool rec = should_record({&x, &w1, b1p, &w2, b2p});
  Tensor y, pre, h;
  {
    NoRecordScope no_record;
    const Tensor x2 = x.detach().reshape({m, k}).contiguous();
    const Tensor b1c = b1p ? b1p->detach().contiguous() : Tensor();
    std::tie(pre, h) = pre_and_gelu(x2, w1.detach().contiguous(), b1c, rec || keep_saved);
    y = linear(h, w2.detach(), b2p ? std::optional<Tensor>(b2p->detach()) : std::nullopt).view(out_shape);
  }
  if (rec) {
    OpAttrs attrs;
    attrs.tensors = {pre, h};
    record_op(id, {x, w1, b1p ? *b1p : kNoBias, w2, b2p ? *b2p : kNoBias}, {y}, std::move(attrs));
  }
  return {y, pre, h};
}
}  // namespace

Tensor mlp_gelu(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1, const Tensor& w2,
                const std::optional<Tensor>& b2) {
  return std::get<0>(mlp_gelu_body(x, w1, b1, w2, b2, false));
}
std::tuple<Tensor, Tensor, Tensor> mlp_gelu_saving(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1,
                                                   const Tensor& w2, const std::optional<Tensor>& b2) {
  return mlp_gelu_body(x, w1, b1, w2, b2, true);
}

std::tuple<Tensor, Tensor> linear_dgelu_bgrad(const Tensor& g, const Tensor& w2, const Tensor& pre, bool want_bias) {
  const OpId id = OpId::linear_dgelu_bgrad;
  const char* op = op_name(id);
  OpScope scope(id, {&g, &w2, &pre});
  check_defined(op, g, "grad");
  check_defined(op, w2, "weight");
  check_defined(op, pre, "pre");
  check_same_device(op, {&g, &w2, &pre});
  TS_CHECK(g.dim() == 2 && w2.dim() == 2 && pre.dim() == 2 && g.size(1) == w2.size(0) && pre.size(0) == g.size(0) &&
               pre.size(1) == w2.size(1),
           ShapeError, op, ": expected grad (M, N2), weight (N2, N1) and pre (M, N1), got ", g.sizes(), ", ",
           w2.sizes(), " and ", pre.sizes());
  TS_CHECK(is_floating_point(g.dtype()) && w2.dtype() == g.dtype() && pre.dtype() == g.dtype(), DTypeError, op,
           ": expected grad, weight and pre of one floating dtype, got ", dtype_name(g.dtype()), ", ",
           dtype_name(w2.dtype()), " and ", dtype_name(pre.dtype()));
  auto [dpre, db] = [&]() -> std::tuple<Tensor, Tensor> {
    NoRecordScope no_record;
    const int64_t m = g.size(0), n2 = g.size(1), n1 = w2.size(1);
    if (m > 0 && n1 > 0 && n2 > 0 && linear_dgelu_bgrad_kernel.has(g.device().type())) {
      Tensor d = make_empty({m, n1}, g.dtype(), g.device());
      Tensor b = want_bias ? make_empty({n1}, g.dtype(), g.device()) : Tensor();
      linear_dgelu_bgrad_kernel(g.device(), d, b, g.contiguous(), w2.contiguous(), pre.contiguous());
      return {d, b};
    }
    Tensor d = gelu_tanh_backward(mm(g, w2), pre);
    return {d, want_bias ? sum(d, std::vector<int64_t>{0}) : Tensor()};
  }();
  if (capturing())  // Note [Trace records]: the call as made
    detail::trace_record(id, {g, w2, pre}, defined_only({dpre, db}), OpAttrs{.flag = want_bias});
  return {dpre, db};
}

Tensor gelu_tanh_backward(const Tensor& grad, const Tensor& pre) {
  const OpId id = OpId::gelu_tanh_backward;
  const char* op = op_name(id);
  OpScope scope(id, {&grad, &pre});
  check_defined(op, grad, "grad");
  check_defined(op, pre, "pre");
  check_same_device(op, {&grad, &pre});
  TS_CHECK(grad.sizes() == pre.sizes(), ShapeError, op, ": expected grad of size ", pre.sizes(), ", got ",
           grad.sizes());
  TS_CHECK(is_floating_point(pre.dtype()) && grad.dtype() == pre.dtype(), DTypeError, op,
           ": expected grad and pre of one floating dtype, got ", dtype_name(grad.dtype()), " and ",
           dtype_name(pre.dtype()));
  Tensor dpre = [&] {
    NoRecordScope no_record;
    if (pre.numel() > 0 && gelu_tanh_backward_kernel.has(pre.device().type())) {
      Tensor d = make_empty(pre.sizes(), pre.dtype(), pre.device());
      gelu_tanh_backward_kernel(pre.device(), d, grad.contiguous(), pre.contiguous());
      return d;
    }
    // d/dv of 0.5 v (1 + tanh(b (v + c v^3))), b = sqrt(2 / pi), c = 0.044715; 16-bit in float32.
    constexpr double kBeta = 0.7978845608028654, kKappa = 0.044715;
    const DType cd = compute_dtype(pre.dtype());
    const Tensor v = pre.to(cd), v2 = v * v;
    const Tensor t = tanh((v + v2 * v * kKappa) * kBeta);
    const Tensor left = (t + 1) * 0.5;
    const Tensor right = v * 0.5 * (1 - t * t) * ((v2 * (3 * kKappa) + 1) * kBeta);
    return (grad.to(cd) * (left + right)).to(pre.dtype());
  }();
  if (capturing()) detail::trace_record(id, {grad, pre}, {dpre}, OpAttrs{});  // Note [Trace records]
  return dpre;
}

std::tuple<Tensor, Tensor> linear_weight_bias_grad(const Tensor& g, const Tensor& x, std::array<bool, 2> output_mask) {
  const OpId id = OpId::linear_weight_bias_grad;
  const char* op = op_name(id);
  OpScope scope(id, {&g, &x});
  check_defined(op, g, "grad");
  check_defined(op, x, "input");
  check_same_device(op, {&g, &x});
  TS_CHECK(g.dim() == 2 && x.dim() == 2 && g.size(0) == x.size(0), ShapeError, op,
           ": expected grad (M, N) and input (M, K), got ", g.sizes(), " and ", x.sizes());
  TS_CHECK(is_floating_point(g.dtype()) && g.dtype() == x.dtype(), DTypeError, op,
           ": expected grad and input of one floating dtype, got ", dtype_name(g.dtype()), " and ",
           dtype_name(x.dtype()));
  auto [dw, db] = [&]() -> std::tuple<Tensor, Tensor> {
    NoRecordScope no_record;
    const int64_t m = g.size(0), n = g.size(1), k = x.size(1);
    if (output_mask[0] && output_mask[1] && m > 0 && n > 0 && k > 0 &&
        linear_weight_bias_grad_kernel.has(g.device().type())) {
      Tensor w_grad = make_empty({n, k}, g.dtype(), g.device());
      Tensor b_grad = make_empty({n}, g.dtype(), g.device());
      linear_weight_bias_grad_kernel(g.device(), w_grad, b_grad, g.contiguous(), x.contiguous());
      return {w_grad, b_grad};
    }
    return {output_mask[0] ? mm(g.t(), x) : Tensor(), output_mask[1] ? sum(g, std::vector<int64_t>{0}) : Tensor()};
  }();
  if (capturing())  // Note [Trace records]: the call as made
    detail::trace_record(id, {g, x}, defined_only({dw, db}), OpAttrs{.ints = {output_mask[0], output_mask[1]}});
  return {dw, db};
}

// Note [Chunked classifier loss]: with l_i the cross-entropy of row i's logits z_i = W x_i and s the
// reduction's scale (1 / the number of counted targets for "mean", 1 for "sum"), the loss is
// s * sum_i l_i and its gradient in z_i is s * (softmax(z_i) - onehot(t_i)) (0 on ignored rows): the
// fused cross-entropy backward with a per-row gradient s. So each chunk of rows needs its logits only
// while its loss, its dlogits and their products dx_chunk = dlogits @ W and dW += dlogits^T @ x_chunk
// are computed; the backward multiplies the saved dx and dW by the incoming gradient of the loss.
// The count of the "mean" stays on the device (a 0-dim tensor): no synchronization.
//
// Note [Padded logits rows]: on the GPU, cuBLASLt runs a product whose M, N or K is not a whole
// number of 16-byte vectors (GPT-2's V = 50257) on old, slow kernels (sm_75 CUTLASS tiles, ~100
// TFLOP/s on an H200 instead of ~700), whatever the leading dims. So the classifier runs on Vp = V
// rounded up to 16 bytes: W gets Vp - V zero rows (a copy of W, small against the products), the
// chunk's logits are (rows, Vp) with -inf written over the pad columns, and the cross-entropy runs
// over all Vp columns. exp(-inf) = 0 adds nothing to the log-sum-exp (the targets are below V), so
// the loss is unchanged; the pad columns of dlogits are exactly 0, so dx = dlogits @ Wp is unchanged
// and dWp's pad rows are dropped.
namespace {
// linear_cross_entropy's body -> (loss, dx, dW); want_dx / want_dw compute those gradients even when
// nothing records (the compiler's replay of a joint graph's forward, which runs without autograd).
std::tuple<Tensor, Tensor, Tensor> linear_cross_entropy_body(const Tensor& x, const Tensor& weight, const Tensor& target,
                                                             int64_t ignore_index, const std::string& reduction,
                                                             int64_t chunk_rows, bool want_dx, bool want_dw) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::linear_cross_entropy, {&x, &weight}); c)
      return linear_cross_entropy_body(c[0], c[1], target, ignore_index, reduction, chunk_rows, want_dx, want_dw);
  const OpId id = OpId::linear_cross_entropy;
  const char* op = op_name(id);
  OpScope scope(id, {&x, &weight, &target});
  check_defined(op, x, "input");
  check_defined(op, weight, "weight");
  check_defined(op, target, "target");
  check_same_device(op, {&x, &weight, &target});
  TS_CHECK(x.dim() == 2 && weight.dim() == 2, ShapeError, op, ": expected input (N, C) and weight (V, C), got ",
           x.sizes(), " and ", weight.sizes());
  TS_CHECK(weight.size(1) == x.size(1), ShapeError, op, ": mat1 and mat2 shapes cannot be multiplied (", x.size(0),
           "x", x.size(1), " and ", weight.size(1), "x", weight.size(0), ")");
  TS_CHECK(weight.size(0) > 0, ShapeError, op, ": expected at least one class, got weight of size ", weight.sizes());
  TS_CHECK(is_floating_point(x.dtype()) && weight.dtype() == x.dtype(), DTypeError, op,
           ": expected input and weight of one floating dtype, got ", dtype_name(x.dtype()), " and ",
           dtype_name(weight.dtype()));
  TS_CHECK(is_integral(target.dtype()), DTypeError, op, ": expected a target of class indices (an integer dtype), got ",
           dtype_name(target.dtype()));
  TS_CHECK(target.sizes() == Shape({x.size(0)}), ShapeError, op, ": expected target of shape ", Shape({x.size(0)}),
           " for input of shape ", x.sizes(), ", got ", target.sizes());
  TS_CHECK(reduction == "mean" || reduction == "sum", ValueError, op, ": reduction must be 'mean' or 'sum', got '",
           reduction, "'");
  TS_CHECK(chunk_rows > 0, ValueError, op, ": chunk_rows must be positive, got ", chunk_rows);
  const bool rec = should_record({&x, &weight});
  const bool need_x = (rec && requires_grad(x)) || want_dx, need_w = (rec && requires_grad(weight)) || want_dw;
  const DType d = x.dtype(), ldt = d == kFloat64 ? kFloat64 : kFloat32;
  const Device dev = x.device();
  const int64_t n = x.size(0), c = x.size(1), v = weight.size(0);
  Tensor loss, dx, dw, t64;
  {
    NoRecordScope no_record;
    const Tensor xc = x.detach().contiguous(), w = weight.detach().contiguous();
    t64 = cast_to(target.detach(), kInt64).contiguous();
    // The scale of every row's loss: 1 / count for "mean" (NaN loss when nothing counts, as PyTorch).
    Tensor scale = reduction == "mean" ? 1.0 / (t64 != ignore_index).sum().to(ldt)
                                       : full({}, Scalar(1.0), TensorOptions(ldt, dev));
    Tensor total = zeros({}, TensorOptions(ldt, dev));
    if (need_x) dx = make_empty({n, c}, d, dev);
    // Note [Padded logits rows]: the classes padded to vp >= V.
    const int64_t align = 16 / static_cast<int64_t>(element_size(d));
    const int64_t vp = dev.is_cuda() && v % align != 0 ? (v + align - 1) / align * align : v;
    // dW (Vp rows) accumulates over the chunks: in float32 for 16-bit inputs (one rounding at the end).
    const bool acc32 = need_w && compute_dtype(d) != d && n > chunk_rows;
    // The first chunk's product is dW's first value (no zero fill, no read of C); zeros only where
    // no product runs (no rows, or c == 0).
    Tensor dw_acc;
    if (need_w && (n == 0 || c == 0)) dw_acc = zeros({vp, c}, TensorOptions(acc32 ? kFloat32 : d, dev));
    else if (need_w && !acc32) dw_acc = make_empty({vp, c}, d, dev);
    Tensor wp = w;
    if (vp != v) {
      wp = make_empty({vp, c}, d, dev);
      wp.narrow(0, 0, v).copy_(w);
      wp.narrow(0, v, vp - v).zero_();
    }
    for (int64_t r0 = 0; r0 < n; r0 += chunk_rows) {
      const int64_t rc = std::min(chunk_rows, n - r0);
      const Tensor x_chunk = xc.narrow(0, r0, rc), t_chunk = t64.narrow(0, r0, rc);
      Tensor logits = mm(x_chunk, wp.t());  // (rc, Vp)
      if (vp != v) logits.narrow(1, v, vp - v).fill_(-std::numeric_limits<double>::infinity());
      auto [row_loss, lse] = cross_entropy_loss_rows(logits, t_chunk, Tensor(), ignore_index, 0.0, v);
      total = total + row_loss.sum();
      if (!need_x && !need_w) continue;
      Tensor dlogits = cross_entropy_loss_rows_backward(scale.expand({rc}), logits, t_chunk, Tensor(), lse,
                                                        ignore_index, 0.0, v);  // (rc, Vp), d
      logits = Tensor();  // release the chunk's logits before the products
      if (need_x && c > 0)
        gemm_kernel(dev, GemmParams{dlogits.unsqueeze(0), wp.unsqueeze(0), dx.narrow(0, r0, rc).unsqueeze(0), 1, 0});
      if (need_w && c > 0) {
        if (acc32) {
          Tensor part = mm(dlogits.t(), x_chunk).to(kFloat32);
          if (dw_acc.defined()) dw_acc.add_(part);
          else dw_acc = std::move(part);
        } else {
          gemm_kernel(dev, GemmParams{dlogits.t().unsqueeze(0), x_chunk.unsqueeze(0), dw_acc.unsqueeze(0), 1,
                                      r0 == 0 ? 0 : 1});
        }
      }
    }
    loss = reduction == "mean" ? total * scale : total;
    if (need_w) dw = dw_acc.narrow(0, 0, v).to(d);  // the first V rows: contiguous
  }
  if (capturing()) {  // the call as made (Note [Trace records]): t64 is made inside the op; dx and dW,
                      // which the derivative saves, are outputs (ints: ignore_index, chunk_rows, and
                      // whether each was computed)
    OpAttrs call = make_attrs({ignore_index, chunk_rows, dx.defined() ? 1 : 0, dw.defined() ? 1 : 0});
    call.str = reduction;
    detail::trace_record(id, {x, weight, target}, defined_only({loss, dx, dw}), call);
  }
  if (rec) {
    OpAttrs attrs = make_attrs({ignore_index}, {dx, dw, t64});
    attrs.str = reduction;
    record_op_untraced(id, {x, weight}, {loss}, std::move(attrs));
  }
  return {loss, dx, dw};
}
}  // namespace

Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& target, int64_t ignore_index,
                            const std::string& reduction, int64_t chunk_rows) {
  return std::get<0>(linear_cross_entropy_body(x, weight, target, ignore_index, reduction, chunk_rows, false, false));
}
std::tuple<Tensor, Tensor, Tensor> linear_cross_entropy_saving(const Tensor& x, const Tensor& weight,
                                                               const Tensor& target, int64_t ignore_index,
                                                               const std::string& reduction, int64_t chunk_rows,
                                                               bool want_dx, bool want_dw) {
  return linear_cross_entropy_body(x, weight, target, ignore_index, reduction, chunk_rows, want_dx, want_dw);
}

}  // namespace tessera
