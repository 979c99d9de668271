#include "tensor/type_promotion.h"

#include "tensor/dispatch_dtype.h"

namespace tessera {
namespace {

std::optional<DType> promote_opt(std::optional<DType> a, DType b) { return a ? promote_types(*a, b) : b; }

// c10's combine_categories: keep `higher` unless `lower` is of a higher category.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating_point(*higher)) return higher;
  if (*higher == DType::Bool || is_floating_point(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

ResultType& ResultType::add(const Tensor& t) {
  if (t.dim() == 0) zero_dim_ = promote_opt(zero_dim_, t.dtype());
  else dim_ = promote_opt(dim_, t.dtype());
  return *this;
}

ResultType& ResultType::add(const Scalar& s) {
  wrapped_ = promote_opt(wrapped_, s.dtype());
  return *this;
}

DType ResultType::result() const {
  auto r = combine(dim_, combine(zero_dim_, wrapped_));
  return r.value_or(DType::Float32);
}

DType result_type(const Tensor& a, const Tensor& b) { return ResultType().add(a).add(b).result(); }
DType result_type(const Tensor& a, const Scalar& b) { return ResultType().add(a).add(b).result(); }

void throw_unsupported_dtype(const char* op, DType t) {
  TS_THROW(DTypeError, op, ": not implemented for dtype ", dtype_name(t));
}

}  // namespace tessera
