// Statistical reductions and scans: var/std/var_mean (float64 accumulators, any correction),
// norm (p = 0, 1, 2, +-inf, any other p; "fro"), logsumexp (max-shifted) and cumsum/cumprod.
// Validation and dtype inference follow PyTorch: var/std/norm need floating inputs; logsumexp
// computes integers and bool in float32; scans of integers and bool give int64 unless a dtype is
// given, and a bool result dtype is refused. Derivatives: src/autograd/derivatives/reduce.cpp.
#include <cmath>
#include <limits>
#include <tuple>

#include "ops/autocast_hook.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "ops/reduce_kernel.h"
#include "ops/reduce_meta.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

namespace {

std::vector<int64_t> dims_or_all(const std::optional<Dims>& dims) {
  return dims ? dims->dims : std::vector<int64_t>{};
}

void check_floating(const char* op, const Tensor& x) {
  check_defined(op, x, "input");
  TS_CHECK(x.is_floating_point(), DTypeError, op,
           ": expected a floating point input (var, std and norm only support floating point dtypes), got ",
           dtype_name(x.dtype()));
}

// var and std share everything but the final square root.
std::tuple<Tensor, Tensor> var_impl(const char* op, const Tensor& x, const std::optional<Dims>& dims,
                                    double correction, bool keepdim, bool take_sqrt, bool want_mean) {
  check_floating(op, x);
  TS_CHECK(std::isfinite(correction), ValueError, op, ": correction must be finite, got ", correction);
  ReducePlan plan = plan_reduction(op, x, dims_or_all(dims), keepdim);
  Tensor var = make_reduce_output(plan, x.dtype(), x.device());
  Tensor mean = want_mean ? make_reduce_output(plan, x.dtype(), x.device()) : Tensor();
  var_kernel(x.device(), var, mean, rows_view(plan), correction, take_sqrt);
  return {var.view(plan.out_sizes), want_mean ? mean.view(plan.out_sizes) : Tensor()};
}

Tensor norm_impl(const Tensor& x, double p, const std::optional<Dims>& dims, bool keepdim) {
  check_floating("norm", x);
  TS_CHECK(!std::isnan(p), ValueError, "norm: the order p must be a number, got nan");
  ReduceParams params;
  if (p == 0) params.op = ReduceOp::NormL0;
  else if (p == 1) params.op = ReduceOp::NormL1;
  else if (p == 2) params.op = ReduceOp::NormL2;
  else if (p == std::numeric_limits<double>::infinity()) params.op = ReduceOp::NormInf;
  else if (p == -std::numeric_limits<double>::infinity()) params.op = ReduceOp::NormNegInf;
  else params = {ReduceOp::NormP, p};
  ReducePlan plan = plan_reduction("norm", x, dims_or_all(dims), keepdim);
  Tensor out = make_reduce_output(plan, x.dtype(), x.device());
  reduce_kernel(x.device(), out, plan.in, plan.nreduce, params);
  return out.view(plan.out_sizes);
}

Tensor scan_impl(const char* op, const Tensor& x, int64_t dim, std::optional<DType> dtype, ScanOp sop) {
  check_defined(op, x, "input");
  int64_t d = wrap_dim(dim, x.dim(), op);
  DType rd = dtype ? *dtype : (is_integral(x.dtype(), /*include_bool=*/true) ? kInt64 : x.dtype());
  TS_CHECK(rd != kBool, DTypeError, op, ": not implemented for result dtype bool (pass an integer or floating dtype)");
  Tensor in = cast_to(x, rd).contiguous();
  Tensor out = make_empty(x.sizes(), rd, x.device());
  scan_kernel(x.device(), out, in, x.dim() == 0 ? 0 : d, sop);
  return out;
}

}  // namespace

// Each op records itself with ReduceAttrs: dims (empty: every dim), keepdim; var, std and var_mean
// their correction, norm its p, the scans their one dim.
Tensor var(const Tensor& x, std::optional<Dims> dims, double correction, bool keepdim) {
  OpScope scope(OpId::var, {&x});
  const bool rec = should_record({&x});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = std::get<0>(var_impl("var", x, dims, correction, keepdim, false, false));
  }
  if (rec) record_op(OpId::var, {x}, {out}, correction_attrs(dims_or_all(dims), keepdim, correction));
  return out;
}

Tensor std(const Tensor& x, std::optional<Dims> dims, double correction, bool keepdim) {
  OpScope scope(OpId::std, {&x});
  const bool rec = should_record({&x});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = std::get<0>(var_impl("std", x, dims, correction, keepdim, true, false));
  }
  if (rec) record_op(OpId::std, {x}, {out}, correction_attrs(dims_or_all(dims), keepdim, correction));
  return out;
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, std::optional<Dims> dims, double correction, bool keepdim) {
  OpScope scope(OpId::var_mean, {&x});
  const bool rec = should_record({&x});
  Tensor v, m;
  {
    NoRecordScope no_record(rec);
    std::tie(v, m) = var_impl("var_mean", x, dims, correction, keepdim, false, true);
  }
  if (rec)
    record_op(OpId::var_mean, {x}, {v, m}, correction_attrs(dims_or_all(dims), keepdim, correction));
  return {v, m};
}

namespace {

Tensor recorded_norm(const Tensor& x, double p, const std::optional<Dims>& dims, bool keepdim) {
  const bool rec = should_record({&x});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = norm_impl(x, p, dims, keepdim);
  }
  if (rec)
    record_op(OpId::norm, {x}, {out},
              OpAttrs{.typed = ReduceAttrs{.dims = dims_or_all(dims), .keepdim = keepdim, .p = p}});
  return out;
}

}  // namespace

Tensor norm(const Tensor& x, double p, std::optional<Dims> dims, bool keepdim) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::norm, {&x}); c) return norm(c[0], p, dims, keepdim);
  OpScope scope(OpId::norm, {&x});
  return recorded_norm(x, p, dims, keepdim);
}

Tensor norm(const Tensor& x, const std::string& p, std::optional<Dims> dims, bool keepdim) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::norm, {&x}); c) return norm(c[0], p, dims, keepdim);
  OpScope scope(OpId::norm, {&x});
  TS_CHECK(p != "nuc", NotImplementedError, "norm: the nuclear norm (p='nuc') is not supported");
  TS_CHECK(p == "fro", ValueError, "norm: unknown order p='", p, "' (expected 'fro' or a number)");
  return recorded_norm(x, 2, dims, keepdim);
}

Tensor logsumexp(const Tensor& x, Dims dims, bool keepdim) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::logsumexp, {&x}); c) return logsumexp(c[0], dims, keepdim);
  OpScope scope(OpId::logsumexp, {&x});
  check_defined("logsumexp", x, "input");
  const bool rec = should_record({&x});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    // Integers and bool compute in the default float dtype, as PyTorch does.
    Tensor xf = x.is_floating_point() ? x : cast_to(x, kFloat32);
    ReducePlan plan = plan_reduction("logsumexp", xf, dims.dims, keepdim);
    out = make_reduce_output(plan, xf.dtype(), x.device());
    logsumexp_kernel(x.device(), out, rows_view(plan));
    out = out.view(plan.out_sizes);
  }
  if (rec) record_op(OpId::logsumexp, {x}, {out}, reduction_attrs(dims.dims, keepdim));
  return out;
}

namespace {

Tensor recorded_scan(OpId id, const Tensor& x, int64_t dim, std::optional<DType> dtype, ScanOp sop) {
  const char* op = op_name(id);
  const bool rec = should_record({&x});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = scan_impl(op, x, dim, dtype, sop);
  }
  if (rec) record_op(id, {x}, {out}, reduction_attrs({dim}, false));
  return out;
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  if (autocast_pending() && !dtype) [[unlikely]]
    if (AutocastArgs c(OpId::cumsum, {&x}); c) return cumsum(c[0], dim, dtype);
  OpScope scope(OpId::cumsum, {&x});
  return recorded_scan(OpId::cumsum, x, dim, dtype, ScanOp::Sum);
}

Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  if (autocast_pending() && !dtype) [[unlikely]]
    if (AutocastArgs c(OpId::cumprod, {&x}); c) return cumprod(c[0], dim, dtype);
  OpScope scope(OpId::cumprod, {&x});
  return recorded_scan(OpId::cumprod, x, dim, dtype, ScanOp::Prod);
}

}  // namespace tessera
