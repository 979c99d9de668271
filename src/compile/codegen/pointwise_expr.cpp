// The pointwise expression table (pointwise_expr.h). Each formula is the eager CPU kernel's
// (src/kernels/cpu/{unary,binary,ternary}.cpp), in the same order of operations, so that a fused
// kernel rounds as the eager ops do.
#include "compile/codegen/pointwise_expr.h"

#include <cmath>
#include <cstdio>

namespace tessera::compiler {
namespace {

double scalar_or(const OpAttrs& a, size_t k, double dflt) {
  return a.scalars.size() > k ? a.scalars[k].to_double() : dflt;
}

std::string call(const char* f, const std::vector<std::string>& a) {
  std::string s = std::string(f) + "(" + a[0];
  for (size_t i = 1; i < a.size(); ++i) s += ", " + a[i];
  return s + ")";
}

}  // namespace

const char* c_type(ComputeType t) {
  switch (t) {
    case ComputeType::Bool: return "bool";
    case ComputeType::Float: return "float";
    case ComputeType::Double: return "double";
  }
  return "float";
}

ComputeType compute_type_of(DType d) {
  if (d == kBool) return ComputeType::Bool;
  if (d == kFloat64) return ComputeType::Double;
  return ComputeType::Float;
}

std::string literal(double v, ComputeType t) {
  if (t == ComputeType::Bool) return v != 0.0 ? "true" : "false";
  const char* ty = c_type(t);
  if (std::isnan(v)) return std::string("((") + ty + ")TS_NAN)";
  if (std::isinf(v)) return std::string("(") + (v < 0 ? "-" : "") + "(" + ty + ")TS_INF)";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "((%s)%a)", ty, v);
  return buf;
}

bool has_pointwise_expr(const Node& n) {
  switch (n.op) {
    case OpId::neg: case OpId::abs: case OpId::exp: case OpId::exp2: case OpId::log: case OpId::log2:
    case OpId::log1p: case OpId::expm1: case OpId::sqrt: case OpId::rsqrt: case OpId::sin: case OpId::cos:
    case OpId::tan: case OpId::tanh: case OpId::sigmoid: case OpId::relu: case OpId::silu:
    case OpId::hardswish: case OpId::erf: case OpId::floor: case OpId::ceil: case OpId::round:
    case OpId::trunc: case OpId::sign: case OpId::reciprocal: case OpId::isnan: case OpId::isinf:
    case OpId::isfinite: case OpId::logical_not:
    case OpId::add: case OpId::sub: case OpId::mul: case OpId::pow: case OpId::maximum: case OpId::minimum:
    case OpId::fmod: case OpId::remainder: case OpId::atan2: case OpId::logaddexp: case OpId::eq: case OpId::ne:
    case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge: case OpId::logical_and: case OpId::logical_or:
    case OpId::logical_xor: case OpId::where: case OpId::lerp: case OpId::addcmul: case OpId::addcdiv:
      return true;
    case OpId::copy_:  // into a fresh buffer: a conversion to its dtype
      return n.inputs.size() == 2 && n.inputs[0] < 0 && n.inputs[1] >= 0;
    case OpId::gelu:
      return n.attrs.str.empty() || n.attrs.str == "none" || n.attrs.str == "tanh";
    case OpId::softplus:
      return n.attrs.scalars.size() >= 2;
    case OpId::threshold_backward:
      return !n.attrs.scalars.empty();
    case OpId::div:
      return n.attrs.str.empty();  // true division; trunc and floor modes stay eager
    case OpId::clamp:
      return n.inputs.size() == 3 && (n.inputs[1] >= 0 || n.inputs[2] >= 0);
    default:
      return false;
  }
}

ComputeType node_compute_type(const Graph& g, const Node& n) {
  switch (n.op) {
    case OpId::eq: case OpId::ne: case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge:
    case OpId::logical_and: case OpId::logical_or: case OpId::logical_xor: case OpId::logical_not:
    case OpId::isnan: case OpId::isinf: case OpId::isfinite: {
      ComputeType t = ComputeType::Bool;
      for (int v : n.inputs) {
        if (v < 0) continue;
        const ComputeType c = compute_type_of(g.values[v].meta.dtype);
        if (c == ComputeType::Double || (c == ComputeType::Float && t == ComputeType::Bool)) t = c;
      }
      return t;
    }
    default:
      return compute_type_of(g.values[n.outputs[0]].meta.dtype);
  }
}

ComputeType operand_type(const Node& n, size_t k, ComputeType node_type) {
  if (n.op == OpId::where && k == 2) return ComputeType::Bool;
  return node_type;
}

std::string pointwise_expr(const Node& n, ComputeType t, const std::vector<std::string>& a) {
  auto L = [t](double v) { return literal(v, t); };
  const bool logic = t == ComputeType::Bool;
  switch (n.op) {
    case OpId::copy_: return a[1];
    case OpId::neg: return "(-" + a[0] + ")";
    case OpId::abs: return call("ts_abs", a);
    case OpId::exp: return call("ts_exp", a);
    case OpId::exp2: return call("ts_exp2", a);
    case OpId::log: return call("ts_log", a);
    case OpId::log2: return call("ts_log2", a);
    case OpId::log1p: return call("ts_log1p", a);
    case OpId::expm1: return call("ts_expm1", a);
    case OpId::sqrt: return call("ts_sqrt", a);
    case OpId::rsqrt: return "(" + L(1) + " / ts_sqrt(" + a[0] + "))";
    case OpId::sin: return call("ts_sin", a);
    case OpId::cos: return call("ts_cos", a);
    case OpId::tan: return call("ts_tan", a);
    case OpId::tanh: return call("ts_tanh", a);
    case OpId::sigmoid: return call("ts_sigmoid", a);
    case OpId::relu: return "(" + a[0] + " < " + L(0) + " ? " + L(0) + " : " + a[0] + ")";
    case OpId::gelu:
      if (n.attrs.str == "tanh")
        return "(" + L(0.5) + " * " + a[0] + " * (" + L(1) + " + ts_tanh(" + L(0.79788456080286535588) + " * (" + a[0] +
               " + " + L(0.044715) + " * " + a[0] + " * " + a[0] + " * " + a[0] + "))))";
      return call("ts_gelu", a);
    case OpId::silu: return "(" + a[0] + " * ts_sigmoid(" + a[0] + "))";
    case OpId::softplus: {
      const std::string b = L(n.attrs.scalars[0].to_double()), th = L(n.attrs.scalars[1].to_double());
      return "(" + a[0] + " * " + b + " > " + th + " ? " + a[0] + " : ts_log1p(ts_exp(" + a[0] + " * " + b + ")) / " + b + ")";
    }
    case OpId::hardswish: return call("ts_hardswish", a);
    case OpId::erf: return call("ts_erf", a);
    case OpId::floor: return call("ts_floor", a);
    case OpId::ceil: return call("ts_ceil", a);
    case OpId::round: return call("ts_round", a);
    case OpId::trunc: return call("ts_trunc", a);
    case OpId::sign:
      return "((" + std::string(c_type(t)) + ")((" + L(0) + " < " + a[0] + ") - (" + a[0] + " < " + L(0) + ")))";
    case OpId::reciprocal: return "(" + L(1) + " / " + a[0] + ")";
    case OpId::isnan: return logic ? "false" : "(" + a[0] + " != " + a[0] + ")";
    case OpId::isinf: return logic ? "false" : "(ts_abs(" + a[0] + ") == (" + c_type(t) + ")TS_INF)";
    case OpId::isfinite: return logic ? "true" : "(" + a[0] + " - " + a[0] + " == " + L(0) + ")";
    case OpId::logical_not: return "(" + a[0] + " == " + L(0) + ")";
    case OpId::add: {
      const double alpha = scalar_or(n.attrs, 0, 1.0);
      return alpha == 1.0 ? "(" + a[0] + " + " + a[1] + ")" : "(" + a[0] + " + " + L(alpha) + " * " + a[1] + ")";
    }
    case OpId::sub: {
      const double alpha = scalar_or(n.attrs, 0, 1.0);
      return alpha == 1.0 ? "(" + a[0] + " - " + a[1] + ")" : "(" + a[0] + " + " + L(-alpha) + " * " + a[1] + ")";
    }
    case OpId::mul: return "(" + a[0] + " * " + a[1] + ")";
    case OpId::div: return "(" + a[0] + " / " + a[1] + ")";
    case OpId::pow: return call("ts_pow", a);
    case OpId::maximum: return call("ts_maximum", a);
    case OpId::minimum: return call("ts_minimum", a);
    case OpId::fmod: return call("ts_fmod", a);
    case OpId::remainder: return call("ts_remainder", a);
    case OpId::atan2: return call("ts_atan2", a);
    case OpId::logaddexp: return call("ts_logaddexp", a);
    case OpId::threshold_backward:
      return "(" + a[1] + " <= " + L(n.attrs.scalars[0].to_double()) + " ? " + L(0) + " : " + a[0] + ")";
    case OpId::eq: return "(" + a[0] + " == " + a[1] + ")";
    case OpId::ne: return "(" + a[0] + " != " + a[1] + ")";
    case OpId::lt: return "(" + a[0] + " < " + a[1] + ")";
    case OpId::le: return "(" + a[0] + " <= " + a[1] + ")";
    case OpId::gt: return "(" + a[0] + " > " + a[1] + ")";
    case OpId::ge: return "(" + a[0] + " >= " + a[1] + ")";
    case OpId::logical_and: return "(" + a[0] + " != " + L(0) + " && " + a[1] + " != " + L(0) + ")";
    case OpId::logical_or: return "(" + a[0] + " != " + L(0) + " || " + a[1] + " != " + L(0) + ")";
    case OpId::logical_xor: return "((" + a[0] + " != " + L(0) + ") != (" + a[1] + " != " + L(0) + "))";
    case OpId::where: return "(" + a[2] + " ? " + a[0] + " : " + a[1] + ")";
    case OpId::clamp: {
      std::string r = a[0];
      if (!a[1].empty()) r = "ts_nan_max(" + r + ", " + a[1] + ")";
      if (!a[2].empty()) r = "ts_nan_min(" + r + ", " + a[2] + ")";
      return r;
    }
    case OpId::lerp: return call("ts_lerp", a);
    case OpId::addcmul:
      return "(" + a[0] + " + " + L(scalar_or(n.attrs, 0, 1.0)) + " * " + a[1] + " * " + a[2] + ")";
    case OpId::addcdiv:
      return "(" + a[0] + " + " + L(scalar_or(n.attrs, 0, 1.0)) + " * (" + a[1] + " / " + a[2] + "))";
    default:
      TS_THROW(NotImplementedError, "compile: no generated expression for ", op_name(n.op));
  }
}

}  // namespace tessera::compiler
