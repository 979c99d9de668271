// Matrix products: mm, bmm, matmul (PyTorch's broadcasting rules), addmm, baddbmm, linear, dot, outer.
// Each op validates devices, dtypes and shapes with PyTorch's messages, allocates a contiguous result
// and lowers onto the one batched GEMM slot (ops/gemm_kernel.h) with 3-D views of its operands.
// Transposed or sliced operands are passed as they are (the kernel reads them in place where BLAS can);
// only broadcast batch dims that cannot collapse into one batch stride are materialized, as PyTorch's
// expand + reshape does.
//
// Autograd (Note [Autograd stage]): mm, bmm, addmm, baddbmm, dot, outer and linear record themselves
// (derivatives in src/autograd/derivatives/linalg.cpp); matmul records nothing of its own: it is views
// around a recorded mm, dot or bmm. addmm/baddbmm record attrs.scalars = {beta, alpha}.
#include <string>

#include "ops/autocast_hook.h"
#include "ops/gemm_kernel.h"
#include "ops/no_record.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tensor/type_promotion.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<GemmKernelFn> gemm_kernel("gemm");

GemmParams bias_as_input(const GemmParams& p) {
  Tensor(p.c).copy_(p.bias.expand(p.c.sizes()));
  return GemmParams{p.a, p.b, p.c, p.alpha, 1, Tensor()};
}

namespace {

std::string mat_str(const Tensor& t) { return detail::str_cat(t.size(0), "x", t.size(1)); }

Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void check_dtypes(const char* op, const Tensor& a, const Tensor& b, const char* na = "m1", const char* nb = "m2") {
  TS_CHECK(a.dtype() == b.dtype(), DTypeError, op, ": expected ", na, " and ", nb,
           " to have the same dtype, but got: ", dtype_name(a.dtype()), " != ", dtype_name(b.dtype()));
  TS_CHECK(a.dtype() != DType::Bool, DTypeError, op, ": not implemented for 'bool' (matrix products take ",
           "floating and integer dtypes)");
}

// Integer products take integral alpha/beta only (a float factor would be silently truncated).
void check_factors(const char* op, DType dt, const Scalar& beta, const Scalar& alpha) {
  if (is_floating_point(dt)) return;
  TS_CHECK(!beta.is_floating_point(), ValueError, op,
           ": for integral input tensors, argument beta must not be a floating point number (got ", beta, ")");
  TS_CHECK(!alpha.is_floating_point(), ValueError, op,
           ": for integral input tensors, argument alpha must not be a floating point number (got ", alpha, ")");
}

// The `input` of addmm/baddbmm/linear broadcasts to the product's shape (never the other way).
void check_expandable(const char* op, const Tensor& input, const Shape& target) {
  const Shape& s = input.sizes();
  bool ok = s.size() <= target.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    int64_t have = s[s.size() - 1 - i], want = target[target.size() - 1 - i];
    ok = have == want || have == 1;
  }
  TS_CHECK(ok, ShapeError, op, ": the input of shape ", s, " cannot be broadcast to the product's shape ", target);
}

// Whether dims [0, t.dim()-1) of `t` merge into one dim by a view (each outer stride spans the inner).
bool can_fold_leading(const Tensor& t) {
  int64_t expected = -1;  // stride the next outer (non-size-1) dim must have
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (expected >= 0 && t.stride(d) != expected) return false;
    expected = t.stride(d) * t.size(d);
  }
  return true;
}

// c = alpha * a @ b + beta * input (+ bias, a vector (n) added to every row, with no input) over 3-D
// views; returns c (batch, m, n), contiguous. When beta is 0 the input is not read (NaN in it does not
// propagate, as PyTorch).
Tensor gemm3(const Tensor& a3, const Tensor& b3, const Tensor* input, const Scalar& beta, const Scalar& alpha,
             const Tensor& bias = Tensor()) {
  Tensor c = make_empty({a3.size(0), a3.size(1), b3.size(2)}, a3.dtype(), a3.device());
  const bool use_input = input && beta.to_double() != 0.0;
  TS_CHECK(!bias.defined() || (!use_input && bias.dim() == 1 && bias.size(0) == c.size(2)), ValueError,
           "matmul: internal error: a GEMM bias must be a vector of the product's ", c.size(2),
           " columns with no input term, got ", bias.sizes());
  if (use_input) c.copy_(input->expand(c.sizes()));
  GemmParams p{a3, b3, c, alpha, use_input ? beta : Scalar(0), bias};
  gemm_kernel(c.device(), p);
  return c;
}

Tensor mm_body(const char* op, const Tensor& a, const Tensor& b, const Tensor* input, const Scalar& beta,
               const Scalar& alpha) {
  check_same_device(op, {input, &a, &b});
  TS_CHECK(a.dim() == 2, ShapeError, op, ": self must be a matrix (2-D), got a ", a.dim(), "-D tensor of shape ", a.sizes());
  TS_CHECK(b.dim() == 2, ShapeError, op, ": mat2 must be a matrix (2-D), got a ", b.dim(), "-D tensor of shape ", b.sizes());
  check_dtypes(op, a, b);
  if (input) check_dtypes(op, *input, a, "self", "mat1");
  TS_CHECK(a.size(1) == b.size(0), ShapeError, op, ": mat1 and mat2 shapes cannot be multiplied (", mat_str(a),
           " and ", mat_str(b), ")");
  if (input) {
    check_expandable(op, *input, {a.size(0), b.size(1)});
    check_factors(op, a.dtype(), beta, alpha);
  }
  Tensor c = gemm3(a.unsqueeze(0), b.unsqueeze(0), input, beta, alpha);
  return c.select(0, 0);
}

Tensor bmm_body(const char* op, const Tensor& a, const Tensor& b, const Tensor* input, const Scalar& beta,
                const Scalar& alpha) {
  check_same_device(op, {input, &a, &b});
  TS_CHECK(a.dim() == 3, ShapeError, op, ": batch1 must be a 3D tensor, got a ", a.dim(), "-D tensor of shape ", a.sizes());
  TS_CHECK(b.dim() == 3, ShapeError, op, ": batch2 must be a 3D tensor, got a ", b.dim(), "-D tensor of shape ", b.sizes());
  check_dtypes(op, a, b, "batch1", "batch2");
  if (input) check_dtypes(op, *input, a, "self", "batch1");
  TS_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), ShapeError, op,
           ": expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ", a.size(2),
           "] but got: [", b.size(0), ", ", b.size(1), "] (batch1 ", a.sizes(), ", batch2 ", b.sizes(), ")");
  if (input) {
    check_expandable(op, *input, {a.size(0), a.size(1), b.size(2)});
    check_factors(op, a.dtype(), beta, alpha);
  }
  return gemm3(a, b, input, beta, alpha);
}

Tensor dot_body(const char* op, const Tensor& a, const Tensor& b) {
  check_same_device(op, {&a, &b});
  TS_CHECK(a.dim() == 1 && b.dim() == 1, ShapeError, op, ": 1D tensors expected, but got ", a.dim(), "D and ",
           b.dim(), "D tensors");
  check_dtypes(op, a, b, "self", "other");
  TS_CHECK(a.size(0) == b.size(0), ShapeError, op, ": inconsistent tensor size, expected tensor [", a.size(0),
           "] and src [", b.size(0), "] to have the same number of elements, but got ", a.size(0), " and ",
           b.size(0), " elements respectively");
  const int64_t k = a.size(0);
  Tensor c = gemm3(a.reshape({1, 1, k}), b.reshape({1, k, 1}), nullptr, 0, 1);
  return c.reshape({});
}

// addmm/baddbmm record attrs.scalars = {beta, alpha}.
OpAttrs factor_attrs(const Scalar& beta, const Scalar& alpha) {
  OpAttrs a;
  a.scalars = {beta, alpha};
  return a;
}

// The recording entries: the checks and the product run with grad mode off (NoRecordScope), then the
// op records itself under its public name whichever public op called it (matmul records "mm").
Tensor mm_impl(const char* op, const Tensor& a, const Tensor& b, const Tensor* input = nullptr,
               const Scalar& beta = 0, const Scalar& alpha = 1) {
  const bool rec = should_record({input, &a, &b});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = mm_body(op, a, b, input, beta, alpha);
  }
  if (rec) {
    if (input) record_op(OpId::addmm, {*input, a, b}, {out}, factor_attrs(beta, alpha));
    else record_op(OpId::mm, {a, b}, {out});
  }
  return out;
}

Tensor bmm_impl(const char* op, const Tensor& a, const Tensor& b, const Tensor* input = nullptr,
                const Scalar& beta = 0, const Scalar& alpha = 1) {
  const bool rec = should_record({input, &a, &b});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = bmm_body(op, a, b, input, beta, alpha);
  }
  if (rec) {
    if (input) record_op(OpId::baddbmm, {*input, a, b}, {out}, factor_attrs(beta, alpha));
    else record_op(OpId::bmm, {a, b}, {out});
  }
  return out;
}

Tensor dot_impl(const char* op, const Tensor& a, const Tensor& b) {
  const bool rec = should_record({&a, &b});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = dot_body(op, a, b);
  }
  if (rec) record_op(OpId::dot, {a, b}, {out});
  return out;
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::mm, {&a, &b}); c) return mm(c[0], c[1]);
  OpScope scope(OpId::mm, {&a, &b});
  check_defined("mm", a, "self");
  check_defined("mm", b, "mat2");
  return mm_impl("mm", a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::bmm, {&a, &b}); c) return bmm(c[0], c[1]);
  OpScope scope(OpId::bmm, {&a, &b});
  check_defined("bmm", a, "self");
  check_defined("bmm", b, "mat2");
  return bmm_impl("bmm", a, b);
}

Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::addmm, {&input, &a, &b}); c) return addmm(c[0], c[1], c[2], beta, alpha);
  OpScope scope(OpId::addmm, {&input, &a, &b});
  check_defined("addmm", input, "self");
  check_defined("addmm", a, "mat1");
  check_defined("addmm", b, "mat2");
  return mm_impl("addmm", a, b, &input, beta, alpha);
}

Tensor baddbmm(const Tensor& input, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::baddbmm, {&input, &a, &b}); c) return baddbmm(c[0], c[1], c[2], beta, alpha);
  OpScope scope(OpId::baddbmm, {&input, &a, &b});
  check_defined("baddbmm", input, "self");
  check_defined("baddbmm", a, "batch1");
  check_defined("baddbmm", b, "batch2");
  return bmm_impl("baddbmm", a, b, &input, beta, alpha);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::dot, {&a, &b}); c) return dot(c[0], c[1]);
  OpScope scope(OpId::dot, {&a, &b});
  check_defined("dot", a, "self");
  check_defined("dot", b, "other");
  return dot_impl("dot", a, b);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::matmul, {&a, &b}); c) return matmul(c[0], c[1]);
  OpScope scope(OpId::matmul, {&a, &b});
  check_defined("matmul", a, "self");
  check_defined("matmul", b, "other");
  check_same_device("matmul", {&a, &b});
  const int64_t da = a.dim(), db = b.dim();
  TS_CHECK(da > 0 && db > 0, ShapeError, "matmul: both arguments to matmul need to be at least 1D, but they are ",
           da, "D and ", db, "D");
  if (da == 1 && db == 1) return dot_impl("matmul", a, b);
  if (da == 2 && db == 1) return mm_impl("matmul", a, b.unsqueeze(1)).squeeze(1);
  if (da == 1 && db == 2) return mm_impl("matmul", a.unsqueeze(0), b).squeeze(0);
  if (da == 2 && db == 2) return mm_impl("matmul", a, b);
  check_dtypes("matmul", a, b);

  // (..., m, k) @ (k, n) or (k): one big mm when the leading dims fold into rows without a copy.
  if (da >= 3 && db <= 2 && can_fold_leading(a)) {
    Tensor b2 = db == 1 ? b.unsqueeze(1) : b;
    const int64_t k = a.size(-1);
    Shape out(a.sizes().begin(), a.sizes().end() - 1);
    Tensor r = mm_impl("matmul", a.view({numel_of(out), k}), b2);
    if (db == 2) out.push_back(b2.size(1));
    return r.view(out);
  }

  // Batched: a vector operand becomes a 1-row / 1-column matrix, batch dims broadcast.
  Tensor a2 = da == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = db == 1 ? b.unsqueeze(1) : b;
  const int64_t m = a2.size(-2), k = a2.size(-1), k2 = b2.size(-2), n = b2.size(-1);
  TS_CHECK(k == k2, ShapeError, "matmul: mat1 and mat2 shapes cannot be multiplied (", m, "x", k, " and ", k2, "x",
           n, "); shapes ", a.sizes(), " and ", b.sizes());
  Shape batch_a(a2.sizes().begin(), a2.sizes().end() - 2), batch_b(b2.sizes().begin(), b2.sizes().end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  const int64_t nb = numel_of(batch);
  Tensor a3 = a2.expand(concat(batch, {m, k})).reshape({nb, m, k});
  Tensor b3 = b2.expand(concat(batch, {k, n})).reshape({nb, k, n});
  const bool rec = should_record({&a3, &b3});
  Tensor c;
  {
    NoRecordScope no_record(rec);
    c = gemm3(a3, b3, nullptr, 0, 1);
  }
  if (rec) record_op(OpId::bmm, {a3, b3}, {c});
  Shape out = batch;
  if (da > 1) out.push_back(m);
  if (db > 1) out.push_back(n);
  return c.view(out);
}

namespace {

Tensor linear_body(const Tensor& x, const Tensor& weight, const Tensor* bp) {
  check_defined("linear", x, "input");
  check_defined("linear", weight, "weight");
  check_same_device("linear", {&x, &weight, bp});
  TS_CHECK(x.dim() >= 1, ShapeError, "linear: input must have at least 1 dim, got a 0-D tensor");
  TS_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be a matrix (out_features, in_features), got shape ",
           weight.sizes());
  check_dtypes("linear", x, weight, "input", "weight");
  if (bp) check_dtypes("linear", *bp, x, "bias", "input");
  const int64_t in = x.size(-1), out_f = weight.size(0);
  Tensor x1 = x.dim() == 1 ? x.unsqueeze(0) : x;
  const int64_t rows = numel_of(Shape(x1.sizes().begin(), x1.sizes().end() - 1));
  TS_CHECK(weight.size(1) == in, ShapeError, "linear: mat1 and mat2 shapes cannot be multiplied (", rows, "x", in,
           " and ", weight.size(1), "x", out_f, ")");
  Shape out(x.sizes().begin(), x.sizes().end() - 1);
  out.push_back(out_f);
  if (bp) check_expandable("linear", *bp, out);
  // Folding the leading dims is free for a contiguous (or row-sliced) input; otherwise reshape copies.
  Tensor x2 = can_fold_leading(x1) ? x1.view({rows, in}) : x1.reshape({rows, in});
  // A bias vector goes to the GEMM as its bias (an epilogue where the backend has one); a bias of
  // another broadcastable shape is written into the result first.
  const bool vector_bias = bp && bp->dim() == 1;
  Tensor in3;
  if (bp && !vector_bias) in3 = bp->expand(out).reshape({1, rows, out_f});
  Tensor c = gemm3(x2.unsqueeze(0), weight.t().unsqueeze(0), in3.defined() ? &in3 : nullptr, 1, 1,
                   vector_bias ? bp->expand({out_f}) : Tensor());
  return c.view(out);
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  const Tensor* bp = bias && bias->defined() ? &*bias : nullptr;
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::linear, {&x, &weight, bp}); c) return linear(c[0], c[1], c.opt(2));
  static const Tensor kNoBias;  // observers see an undefined tensor, never a null pointer
  OpScope scope(OpId::linear, {&x, &weight, bp ? bp : &kNoBias});
  const bool rec = should_record({&x, &weight, bp});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = linear_body(x, weight, bp);
  }
  // An absent bias is recorded as an undefined input (no edge, no gradient).
  if (rec) record_op(OpId::linear, {x, weight, bp ? *bp : kNoBias}, {out});
  return out;
}

namespace {

Tensor outer_body(const Tensor& a, const Tensor& b) {
  check_defined("outer", a, "self");
  check_defined("outer", b, "vec2");
  check_same_device("outer", {&a, &b});
  TS_CHECK(a.dim() == 1, ShapeError, "outer: expected 1-D argument self, but got ", a.dim(), "-D");
  TS_CHECK(b.dim() == 1, ShapeError, "outer: expected 1-D argument vec2, but got ", b.dim(), "-D");
  // outer is a broadcasting multiply in PyTorch, so its dtypes promote; bool is a logical and, which
  // the 0/1 product in uint8 reproduces.
  const DType dt = result_type(a, b);
  const DType compute = dt == DType::Bool ? DType::UInt8 : dt;
  Tensor c = gemm3(cast_to(a, compute).reshape({1, a.size(0), 1}), cast_to(b, compute).reshape({1, 1, b.size(0)}),
                   nullptr, 0, 1);
  Tensor r = c.select(0, 0);
  return dt == compute ? r : r.to(dt);
}

}  // namespace

Tensor outer(const Tensor& a, const Tensor& b) {
  OpScope scope(OpId::outer, {&a, &b});
  const bool rec = should_record({&a, &b});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = outer_body(a, b);
  }
  if (rec) record_op(OpId::outer, {a, b}, {out});
  return out;
}

}  // namespace tessera
