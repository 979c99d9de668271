// Direct kernel calls (direct_call.h, Note [Direct kernel calls]).
#include "compile/direct_call.h"

#include <optional>

#include "ops/copy_kernel.h"
#include "ops/elementwise_kernel.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera::compiler {
namespace {

// The unary ops whose public call is unary_impl with default parameters (unary_ops.cpp) and whose
// floating result has the input's dtype.
std::optional<UnaryOp> unary_of(const Node& n) {
  switch (n.op) {
#define TS_U(name, OP) \
  case OpId::name:     \
    return UnaryOp::OP;
    TS_U(neg, Neg) TS_U(abs, Abs) TS_U(exp, Exp) TS_U(exp2, Exp2) TS_U(log, Log) TS_U(log2, Log2)
    TS_U(log1p, Log1p) TS_U(expm1, Expm1) TS_U(sqrt, Sqrt) TS_U(rsqrt, Rsqrt) TS_U(sin, Sin) TS_U(cos, Cos)
    TS_U(tan, Tan) TS_U(tanh, Tanh) TS_U(sigmoid, Sigmoid) TS_U(relu, Relu) TS_U(silu, Silu) TS_U(erf, Erf)
    TS_U(floor, Floor) TS_U(ceil, Ceil) TS_U(round, Round) TS_U(trunc, Trunc) TS_U(sign, Sign)
    TS_U(reciprocal, Reciprocal) TS_U(hardswish, HardSwish)
#undef TS_U
    case OpId::gelu:
      if (n.attrs.str.empty() || n.attrs.str == "none") return UnaryOp::Gelu;
      if (n.attrs.str == "tanh") return UnaryOp::GeluTanh;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// The binary ops whose public call is binary_impl with the parameters below (binary_ops.cpp).
std::optional<BinaryOp> binary_of(const Node& n) {
  switch (n.op) {
    case OpId::add: return BinaryOp::Add;
    case OpId::sub: return BinaryOp::Sub;
    case OpId::mul: return BinaryOp::Mul;
    case OpId::div: return n.attrs.str.empty() ? std::optional<BinaryOp>(BinaryOp::Div) : std::nullopt;
    case OpId::maximum: return BinaryOp::Maximum;
    case OpId::minimum: return BinaryOp::Minimum;
    case OpId::eq: return BinaryOp::Eq;
    case OpId::ne: return BinaryOp::Ne;
    case OpId::lt: return BinaryOp::Lt;
    case OpId::le: return BinaryOp::Le;
    case OpId::gt: return BinaryOp::Gt;
    case OpId::ge: return BinaryOp::Ge;
    case OpId::threshold_backward: return BinaryOp::ThresholdBackward;  // attrs.scalars {threshold}
    default: return std::nullopt;
  }
}

bool is_cpu_scalar(const Tensor& t) { return t.dim() == 0 && t.is_cpu(); }

// Whether a and b broadcast to exactly `out` (no allocation): the recorded shape is the call's.
bool broadcasts_to(const Shape& a, const Shape& b, const Shape& out) {
  if (a.size() > out.size() || b.size() > out.size()) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1, y = i < b.size() ? b[b.size() - 1 - i] : 1;
    const int64_t o = out[out.size() - 1 - i];
    if ((x != o && x != 1) || (y != o && y != 1) || (x != o && y != o)) return false;
  }
  return true;
}

// Where the op would run: the output's device; an operand is on it, or is a 0-dim CPU scalar
// (Note [CPU scalars]), which the kernels read as the op passes it.
bool on_device(const Tensor& t, const TensorMeta& out) { return t.device() == out.device || is_cpu_scalar(t); }

Tensor empty_as(const TensorMeta& m) { return empty_strided(m.sizes, m.strides, TensorOptions(m.dtype, m.device)); }

}  // namespace

DirectCall plan_direct_call(const Graph& g, const Node& n) {
  DirectCall d;
  if (n.outputs.size() != 1) return d;
  const TensorMeta& out = g.values[n.outputs[0]].meta;
  if (out.offset != 0) return d;
  if (n.op == OpId::fill_) {
    if (n.inputs.size() == 1 && n.inputs[0] < 0 && n.attrs.scalars.size() == 1) d.kind = DirectCall::Kind::Fill;
    return d;
  }
  // The dtypes as captured; run_direct_call checks the call's tensors again.
  if (auto u = unary_of(n); u && n.inputs.size() == 1 && n.inputs[0] >= 0) {
    const DType x = g.values[n.inputs[0]].meta.dtype;
    if (x != out.dtype || !is_floating_point(x)) return d;
    d.kind = DirectCall::Kind::Unary;
    d.op = static_cast<uint8_t>(*u);
  } else if (auto b = binary_of(n); b && n.inputs.size() == 2 && n.inputs[0] >= 0 && n.inputs[1] >= 0) {
    if ((*b == BinaryOp::Add || *b == BinaryOp::Sub) && n.attrs.scalars.size() > 1) return d;
    const DType x = g.values[n.inputs[0]].meta.dtype, y = g.values[n.inputs[1]].meta.dtype;
    if (x != y || !is_floating_point(x) || out.dtype != (is_predicate(*b) ? kBool : x)) return d;
    if (*b == BinaryOp::ThresholdBackward && n.attrs.scalars.size() != 1) return d;
    d.kind = DirectCall::Kind::Binary;
    d.op = static_cast<uint8_t>(*b);
    d.predicate = is_predicate(*b);
  } else if (n.op == OpId::where && n.inputs.size() == 3 && n.inputs[0] >= 0 && n.inputs[1] >= 0 && n.inputs[2] >= 0) {
    // record {a, b}, then attrs.tensors {condition} (node_runner.cpp)
    const DType x = g.values[n.inputs[0]].meta.dtype, y = g.values[n.inputs[1]].meta.dtype;
    if (x != y || x != out.dtype || !is_floating_point(x) || g.values[n.inputs[2]].meta.dtype != kBool) return d;
    d.kind = DirectCall::Kind::Ternary;
    d.op = static_cast<uint8_t>(TernaryOp::Where);
  } else if (n.op == OpId::clamp && n.inputs.size() == 3 && n.inputs[0] >= 0 && (n.inputs[1] >= 0 || n.inputs[2] >= 0)) {
    const DType x = g.values[n.inputs[0]].meta.dtype;
    if (x != out.dtype || !is_floating_point(x)) return d;
    for (int k : {1, 2})
      if (n.inputs[k] >= 0 && g.values[n.inputs[k]].meta.dtype != x) return d;
    d.kind = DirectCall::Kind::Ternary;
    d.op = static_cast<uint8_t>(TernaryOp::Clamp);
  }
  return d;
}

Tensor run_direct_call(const DirectCall& d, const Node& n, const std::vector<Tensor>& in, const TensorMeta& out,
                       bool grad_enabled, const Tensor& into) {
  switch (d.kind) {
    case DirectCall::Kind::None:
      return Tensor();
    case DirectCall::Kind::Fill: {
      if (in.empty() || in[0].defined()) return Tensor();
      Tensor t = into.defined() ? into : empty_as(out);
      fill_kernel(t.device(), t, n.attrs.scalars[0]);
      t.impl()->bump_version();  // as fill_ does
      return t;
    }
    case DirectCall::Kind::Unary: {
      const Tensor& x = in[0];
      if (!x.defined() || x.dtype() != out.dtype || !is_floating_point(x.dtype()) || x.device() != out.device ||
          x.sizes() != out.sizes || (grad_enabled && x.requires_grad()))
        return Tensor();
      Tensor t = into.defined() ? into : empty_as(out);
      unary_kernel(out.device, t, x, static_cast<UnaryOp>(d.op), UnaryParams{});
      return t;
    }
    case DirectCall::Kind::Binary: {
      const Tensor &a = in[0], &b = in[1];
      if (!a.defined() || !b.defined() || a.dtype() != b.dtype() || !is_floating_point(a.dtype()) ||
          out.dtype != (d.predicate ? kBool : a.dtype()) || !on_device(a, out) || !on_device(b, out) ||
          !broadcasts_to(a.sizes(), b.sizes(), out.sizes) ||
          (grad_enabled && (a.requires_grad() || b.requires_grad())))
        return Tensor();
      const auto op = static_cast<BinaryOp>(d.op);
      BinaryParams p;
      if ((op == BinaryOp::Add || op == BinaryOp::Sub) && !n.attrs.scalars.empty()) p.alpha = n.attrs.scalars[0];
      if (op == BinaryOp::ThresholdBackward) p.threshold = n.attrs.scalars[0].to_double();
      Tensor t = into.defined() ? into : empty_as(out);
      binary_kernel(out.device, t, a, b, op, p);
      return t;
    }
    case DirectCall::Kind::Ternary: {
      // where: {a, b, condition}; clamp: {x, min or absent, max or absent}. Every operand on the
      // output's device (where's CPU-scalar conversion reads the host: that runs through the op).
      for (const Tensor& t : in)
        if (t.defined() && (t.device() != out.device || (grad_enabled && t.requires_grad()))) return Tensor();
      const auto op = static_cast<TernaryOp>(d.op);
      Tensor t = into.defined() ? into : empty_as(out);
      if (op == TernaryOp::Where) {
        if (in[0].dtype() != out.dtype || in[1].dtype() != out.dtype || in[2].dtype() != kBool) return Tensor();
        ternary_kernel(out.device, t, in[2], in[0], in[1], op, TernaryParams{});
        return t;
      }
      const Tensor& x = in[0];
      if (x.dtype() != out.dtype || x.sizes() != out.sizes) return Tensor();  // bounds that widen x: the op
      for (int k : {1, 2})
        if (in[k].defined() && in[k].dtype() != out.dtype) return Tensor();
      TernaryParams p;
      p.has_min = in[1].defined();
      p.has_max = in[2].defined();
      ternary_kernel(out.device, t, x, p.has_min ? in[1] : x, p.has_max ? in[2] : x, op, p);
      return t;
    }
  }
  return Tensor();
}

}  // namespace tessera::compiler
