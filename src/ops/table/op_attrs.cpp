// Comparing, hashing and printing attribute sets (Note [Typed attributes], op_attrs.h).
#include "ops/table/op_attrs.h"

#include <functional>
#include <sstream>

namespace tessera {
namespace {

void mix(size_t& seed, size_t v) { seed ^= v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2); }
void mix_int(size_t& seed, int64_t v) { mix(seed, std::hash<int64_t>()(v)); }
void mix_hw(size_t& seed, HW v) {
  mix_int(seed, v.h);
  mix_int(seed, v.w);
}

std::string hw(HW v) {
  std::ostringstream s;
  s << "(" << v.h << ", " << v.w << ")";
  return s.str();
}

// A Scalar compares by its kind and value (bool, integer or floating, as it was given).
bool same_scalar(const Scalar& a, const Scalar& b) {
  if (a.is_bool() != b.is_bool() || a.is_integral() != b.is_integral()) return false;
  if (a.is_floating_point()) {
    const double x = a.to_double(), y = b.to_double();
    return x == y || (x != x && y != y);  // NaN equals NaN here: attributes are keys, not arithmetic
  }
  return a.to_int() == b.to_int();
}

bool same_meta(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() && a.device() == b.device();
}

std::string meta(const Tensor& t) {
  if (!t.defined()) return "undefined";
  std::ostringstream s;
  s << dtype_name(t.dtype()) << "(";
  for (size_t i = 0; i < t.sizes().size(); ++i) s << (i ? ", " : "") << t.sizes()[i];
  s << ")";
  if (!t.device().is_cpu()) s << "@" << t.device().str();
  return s.str();
}

}  // namespace

const char* OpAttrs::attrs_kind_name(AttrsKind k) {
  switch (k) {
    case AttrsKind::Positional: return "positional";
    case AttrsKind::Conv: return "ConvAttrs";
    case AttrsKind::Pool: return "PoolAttrs";
    case AttrsKind::Reduce: return "ReduceAttrs";
    case AttrsKind::Norm: return "NormAttrs";
    case AttrsKind::BatchNorm: return "BatchNormAttrs";
    case AttrsKind::Index: return "IndexAttrs";
  }
  return "?";
}

bool operator==(const OpAttrs& a, const OpAttrs& b) {
  if (a.typed != b.typed || a.ints != b.ints || a.str != b.str || a.flag != b.flag) return false;
  if (a.scalars.size() != b.scalars.size() || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.scalars.size(); ++i)
    if (!same_scalar(a.scalars[i], b.scalars[i])) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i)
    if (!same_meta(a.tensors[i], b.tensors[i])) return false;
  return true;
}

size_t hash_value(const ConvAttrs& a) {
  size_t h = 0x434f4e56;  // "CONV"
  for (HW v : {a.stride, a.padding, a.dilation, a.output_padding, a.kernel}) mix_hw(h, v);
  mix_int(h, a.groups);
  return h;
}

size_t hash_value(const PoolAttrs& a) {
  size_t h = 0x504f4f4c;  // "POOL"
  for (HW v : {a.kernel, a.stride, a.padding, a.dilation}) mix_hw(h, v);
  mix_int(h, a.ceil_mode);
  mix_int(h, a.count_include_pad);
  return h;
}

size_t hash_value(const ReduceAttrs& a) {
  size_t h = 0x52454455;  // "REDU"
  for (int64_t d : a.dims) mix_int(h, d);
  mix_int(h, static_cast<int64_t>(a.dims.size()));
  mix_int(h, a.keepdim);
  for (double v : {a.correction, a.p}) mix(h, std::hash<double>()(v == 0 ? 0.0 : v));
  return h;
}

size_t hash_value(const NormAttrs& a) {
  size_t h = 0x4e4f524d;  // "NORM"
  for (int64_t d : a.normalized_shape) mix_int(h, d);
  mix_int(h, static_cast<int64_t>(a.normalized_shape.size()));
  mix(h, std::hash<double>()(a.eps == 0 ? 0.0 : a.eps));
  return h;
}

size_t hash_value(const BatchNormAttrs& a) {
  size_t h = 0x424e524d;  // "BNRM"
  mix_int(h, a.training);
  mix(h, std::hash<double>()(a.eps == 0 ? 0.0 : a.eps));
  return h;
}

size_t hash_value(const IndexAttrs& a) {
  size_t h = 0x494e4458;  // "INDX"
  mix_int(h, a.dim);
  mix(h, std::hash<double>()(a.alpha == 0 ? 0.0 : a.alpha));
  mix_int(h, a.accumulate);
  mix_int(h, a.padding_idx);
  return h;
}

size_t hash_value(const OpAttrs& a) {
  size_t h = static_cast<size_t>(a.kind());
  if (const auto* c = std::get_if<ConvAttrs>(&a.typed)) mix(h, hash_value(*c));
  if (const auto* p = std::get_if<PoolAttrs>(&a.typed)) mix(h, hash_value(*p));
  if (const auto* r = std::get_if<ReduceAttrs>(&a.typed)) mix(h, hash_value(*r));
  if (const auto* n = std::get_if<NormAttrs>(&a.typed)) mix(h, hash_value(*n));
  if (const auto* b = std::get_if<BatchNormAttrs>(&a.typed)) mix(h, hash_value(*b));
  if (const auto* x = std::get_if<IndexAttrs>(&a.typed)) mix(h, hash_value(*x));
  for (int64_t v : a.ints) mix_int(h, v);
  for (const Scalar& s : a.scalars) {
    // Equal scalars hash equal: the kind, then the value as same_scalar compares it.
    mix_int(h, s.is_bool() ? 1 : s.is_integral() ? 2 : 3);
    if (s.is_floating_point()) {
      const double d = s.to_double();
      mix(h, d != d ? 0x7ff8 : std::hash<double>()(d == 0 ? 0.0 : d));
    } else {
      mix_int(h, s.to_int());
    }
  }
  for (const Tensor& t : a.tensors) {
    mix_int(h, t.defined());
    if (!t.defined()) continue;
    for (int64_t s : t.sizes()) mix_int(h, s);
    mix_int(h, static_cast<int64_t>(t.dtype()));
  }
  mix(h, std::hash<std::string>()(a.str));
  mix_int(h, a.flag);
  return h;
}

std::string to_string(const ConvAttrs& a) {
  return "ConvAttrs(stride=" + hw(a.stride) + ", padding=" + hw(a.padding) + ", dilation=" + hw(a.dilation) +
         ", output_padding=" + hw(a.output_padding) + ", groups=" + std::to_string(a.groups) +
         ", kernel=" + hw(a.kernel) + ")";
}

std::string to_string(const PoolAttrs& a) {
  return "PoolAttrs(kernel=" + hw(a.kernel) + ", stride=" + hw(a.stride) + ", padding=" + hw(a.padding) +
         ", dilation=" + hw(a.dilation) + ", ceil_mode=" + (a.ceil_mode ? "true" : "false") +
         ", count_include_pad=" + (a.count_include_pad ? "true" : "false") + ")";
}

std::string to_string(const ReduceAttrs& a) {
  std::ostringstream s;
  s << "ReduceAttrs(dims=[";
  for (size_t i = 0; i < a.dims.size(); ++i) s << (i ? ", " : "") << a.dims[i];
  s << "], keepdim=" << (a.keepdim ? "true" : "false") << ", correction=" << a.correction << ", p=" << a.p << ")";
  return s.str();
}

std::string to_string(const NormAttrs& a) {
  std::ostringstream s;
  s << "NormAttrs(normalized_shape=[";
  for (size_t i = 0; i < a.normalized_shape.size(); ++i) s << (i ? ", " : "") << a.normalized_shape[i];
  s << "], eps=" << a.eps << ")";
  return s.str();
}

std::string to_string(const BatchNormAttrs& a) {
  std::ostringstream s;
  s << "BatchNormAttrs(training=" << (a.training ? "true" : "false") << ", eps=" << a.eps << ")";
  return s.str();
}

std::string to_string(const IndexAttrs& a) {
  std::ostringstream s;
  s << "IndexAttrs(dim=" << a.dim << ", alpha=" << a.alpha << ", accumulate=" << (a.accumulate ? "true" : "false")
    << ", padding_idx=" << a.padding_idx << ")";
  return s.str();
}

std::string to_string(const OpAttrs& a) {
  std::ostringstream s;
  const char* sep = "";
  auto field = [&](const char* name) -> std::ostringstream& {
    s << sep << name << "=";
    sep = ", ";
    return s;
  };
  if (const auto* c = std::get_if<ConvAttrs>(&a.typed)) s << sep << to_string(*c), sep = ", ";
  if (const auto* p = std::get_if<PoolAttrs>(&a.typed)) s << sep << to_string(*p), sep = ", ";
  if (const auto* r = std::get_if<ReduceAttrs>(&a.typed)) s << sep << to_string(*r), sep = ", ";
  if (const auto* n = std::get_if<NormAttrs>(&a.typed)) s << sep << to_string(*n), sep = ", ";
  if (const auto* b = std::get_if<BatchNormAttrs>(&a.typed)) s << sep << to_string(*b), sep = ", ";
  if (const auto* x = std::get_if<IndexAttrs>(&a.typed)) s << sep << to_string(*x), sep = ", ";
  if (!a.ints.empty()) {
    field("ints") << "[";
    for (size_t i = 0; i < a.ints.size(); ++i) s << (i ? ", " : "") << a.ints[i];
    s << "]";
  }
  if (!a.scalars.empty()) {
    field("scalars") << "[";
    for (size_t i = 0; i < a.scalars.size(); ++i) s << (i ? ", " : "") << a.scalars[i];
    s << "]";
  }
  if (!a.str.empty()) field("str") << "'" << a.str << "'";
  if (a.flag) field("flag") << "true";
  if (!a.tensors.empty()) {
    field("tensors") << "[";
    for (size_t i = 0; i < a.tensors.size(); ++i) s << (i ? ", " : "") << meta(a.tensors[i]);
    s << "]";
  }
  return s.str();
}

}  // namespace tessera
