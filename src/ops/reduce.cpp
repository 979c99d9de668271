// Reductions over dims: sum, mean, prod, amax/amin, max/min (full and over a dim), argmax/argmin,
// any/all. Each op validates its dims and dtypes, infers the result dtype as PyTorch does (integer
// and bool sums and products give int64; mean needs a floating dtype; any/all give bool) and hands
// the (kept..., reduced...) view to a kernel of ops/reduce_kernel.h. The `dtype` argument casts the
// input before reducing. Results of a full reduction are 0-dim; keepdim leaves size-1 dims.
// Derivatives: src/autograd/derivatives/reduce.cpp.
#include <algorithm>
#include <tuple>

#include "ops/autocast_hook.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "ops/reduce_kernel.h"
#include "ops/reduce_meta.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<ReduceKernelFn> reduce_kernel("reduce");
KernelSlot<ArgReduceKernelFn> arg_reduce_kernel("arg_reduce");
KernelSlot<VarKernelFn> var_kernel("var");
KernelSlot<LogSumExpKernelFn> logsumexp_kernel("logsumexp");
KernelSlot<ScanKernelFn> scan_kernel("scan");

// ---- meta helpers ----------------------------------------------------------------------------
ReducePlan plan_reduction(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_defined(op, x, "input");
  const int64_t nd = x.dim();
  std::vector<bool> mask(static_cast<size_t>(nd), false);
  ReducePlan plan;
  plan.all_dims = dims.empty();
  if (dims.empty()) {
    std::fill(mask.begin(), mask.end(), true);
  } else {
    std::vector<bool> seen(static_cast<size_t>(nd > 0 ? nd : 1), false);
    for (int64_t d : dims) {
      int64_t w = wrap_dim(d, nd, op);
      TS_CHECK(!seen[w], ValueError, op, ": dim ", w, " appears multiple times in the list of dims ", dims);
      seen[w] = true;
      if (nd > 0) mask[w] = true;
    }
  }
  Shape perm;
  for (int64_t d = 0; d < nd; ++d) {
    if (mask[d]) {
      if (keepdim) plan.out_sizes.push_back(1);
      continue;
    }
    plan.out_sizes.push_back(x.size(d));
    plan.kept_sizes.push_back(x.size(d));
    perm.push_back(d);
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (!mask[d]) continue;
    perm.push_back(d);
    plan.reduced.push_back(d);
    plan.reduced_numel *= x.size(d);
  }
  plan.nreduce = static_cast<int64_t>(plan.reduced.size());
  bool identity = true;
  for (int64_t i = 0; i < nd; ++i) identity = identity && perm[i] == i;
  plan.in = identity ? x : x.permute(perm);
  return plan;
}

void check_nonempty_reduction(const char* op, const Tensor& x, const ReducePlan& plan) {
  if (x.numel() != 0) return;
  TS_CHECK(!plan.all_dims || x.dim() == 0, ValueError, op,
           ": Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
           "with the 'dim' argument.");
  for (int64_t d : plan.reduced)
    TS_CHECK(x.size(d) != 0, IndexError, op, ": Expected reduction dim ", d, " to have non-zero size.");
}

Tensor rows_view(const ReducePlan& plan) {
  Shape rows = plan.kept_sizes;
  rows.push_back(plan.reduced_numel);
  Tensor r = plan.in.reshape(rows);
  if (plan.reduced_numel <= 1 || r.stride(-1) == 1) return r;
  // A strided R is walked natively when the innermost kept dim (of size > 1) is unit-stride.
  for (int64_t d = r.dim() - 2; d >= 0; --d) {
    if (r.size(d) == 1) continue;
    if (r.stride(d) == 1) return r;
    break;
  }
  return r.contiguous();
}

Tensor make_reduce_output(const ReducePlan& plan, DType dtype, Device device) {
  return make_empty(plan.kept_sizes, dtype, device);
}

namespace {

// Runs the reduction engine and returns the result in the caller's (keepdim) shape.
Tensor run_reduce(const ReducePlan& plan, ReduceParams params, DType out_dtype) {
  Tensor out = make_reduce_output(plan, out_dtype, plan.in.device());
  reduce_kernel(plan.in.device(), out, plan.in, plan.nreduce, params);
  return out.view(plan.out_sizes);
}

// sum and prod: integers and bool accumulate in int64 unless a dtype is given.
Tensor sum_or_prod(const char* op, const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype,
                   bool is_sum) {
  check_defined(op, x, "input");
  DType rd = dtype ? *dtype : (is_integral(x.dtype(), /*include_bool=*/true) ? kInt64 : x.dtype());
  // Without a dtype argument the kernel widens integers itself; with one, the input is cast first.
  Tensor xc = dtype ? cast_to(x, rd) : x;
  ReducePlan plan = plan_reduction(op, xc, dims.dims, keepdim);
  // In bool, a sum saturates at true (any) and a product is all.
  ReduceOp rop = is_sum ? (rd == kBool ? ReduceOp::Any : ReduceOp::Sum) : (rd == kBool ? ReduceOp::All : ReduceOp::Prod);
  return run_reduce(plan, {rop}, rd);
}

Tensor amax_amin(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool is_max) {
  ReducePlan plan = plan_reduction(op, x, dims, keepdim);
  check_nonempty_reduction(op, x, plan);
  return run_reduce(plan, {is_max ? ReduceOp::Max : ReduceOp::Min}, x.dtype());
}

std::tuple<Tensor, Tensor> max_min_dim(const char* op, const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  ReducePlan plan = plan_reduction(op, x, {dim}, keepdim);
  check_nonempty_reduction(op, x, plan);
  Tensor values = make_reduce_output(plan, x.dtype(), x.device());
  Tensor indices = make_reduce_output(plan, kInt64, x.device());
  arg_reduce_kernel(x.device(), values, indices, rows_view(plan), is_max);
  return {values.view(plan.out_sizes), indices.view(plan.out_sizes)};
}

Tensor arg_max_min(const char* op, const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  check_defined(op, x, "input");
  TS_CHECK(x.dtype() != kBool, DTypeError, op, ": not implemented for dtype bool (expected a numeric dtype)");
  Tensor values;  // not asked for
  if (dim) {
    ReducePlan plan = plan_reduction(op, x, {*dim}, keepdim);
    check_nonempty_reduction(op, x, plan);
    Tensor indices = make_reduce_output(plan, kInt64, x.device());
    arg_reduce_kernel(x.device(), values, indices, rows_view(plan), is_max);
    return indices.view(plan.out_sizes);
  }
  // No dim: the index into the flattened tensor.
  TS_CHECK(x.numel() != 0, IndexError, op, ": Expected reduction dim to be specified for input.numel() == 0.");
  Tensor flat = x.reshape({x.numel()});
  if (flat.numel() > 1 && flat.stride(0) != 1) flat = flat.contiguous();
  Tensor indices = make_empty({}, kInt64, x.device());
  arg_reduce_kernel(x.device(), values, indices, flat, is_max);
  return keepdim ? indices.view(Shape(static_cast<size_t>(x.dim()), 1)) : indices;
}

Tensor any_all(const char* op, const Tensor& x, const Dims& dims, bool keepdim, bool is_any) {
  ReducePlan plan = plan_reduction(op, x, dims.dims, keepdim);
  return run_reduce(plan, {is_any ? ReduceOp::Any : ReduceOp::All}, kBool);
}

}  // namespace

// ---- public ops --------------------------------------------------------------------------------
// The differentiable ones record themselves with the caller's input (before any dtype cast: the
// engine casts the gradient back) and ReduceAttrs{dims, keepdim}.
Tensor sum(const Tensor& x, Dims dims, bool keepdim, std::optional<DType> dtype) {
  if (autocast_pending() && !dtype) [[unlikely]]
    if (AutocastArgs c(OpId::sum, {&x}); c) return sum(c[0], dims, keepdim, dtype);
  OpScope scope(OpId::sum, {&x});
  const bool rec = should_record({&x});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = sum_or_prod("sum", x, dims, keepdim, dtype, /*is_sum=*/true);
  }
  if (rec) record_op(OpId::sum, {x}, {out}, reduction_attrs(dims.dims, keepdim));
  return out;
}

Tensor prod(const Tensor& x, Dims dims, bool keepdim, std::optional<DType> dtype) {
  if (autocast_pending() && !dtype) [[unlikely]]
    if (AutocastArgs c(OpId::prod, {&x}); c) return prod(c[0], dims, keepdim, dtype);
  OpScope scope(OpId::prod, {&x});
  const bool rec = should_record({&x});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = sum_or_prod("prod", x, dims, keepdim, dtype, /*is_sum=*/false);
  }
  if (rec) record_op(OpId::prod, {x}, {out}, reduction_attrs(dims.dims, keepdim));
  return out;
}

Tensor mean(const Tensor& x, Dims dims, bool keepdim, std::optional<DType> dtype) {
  OpScope scope(OpId::mean, {&x});
  check_defined("mean", x, "input");
  if (dtype) {
    TS_CHECK(is_floating_point(*dtype), DTypeError,
             "mean: could not infer output dtype. Optional dtype must be either a floating point or complex "
             "dtype. Got: ", dtype_name(*dtype));
  } else {
    TS_CHECK(x.is_floating_point(), DTypeError,
             "mean: could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
             "Got: ", dtype_name(x.dtype()));
  }
  const bool rec = should_record({&x});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    DType rd = dtype.value_or(x.dtype());
    Tensor xc = cast_to(x, rd);
    ReducePlan plan = plan_reduction("mean", xc, dims.dims, keepdim);
    out = run_reduce(plan, {ReduceOp::Mean}, rd);
  }
  if (rec) record_op(OpId::mean, {x}, {out}, reduction_attrs(dims.dims, keepdim));
  return out;
}

namespace {

// amax/amin, and max/min over every dim (recorded as "max"/"min": their gradient also goes to NaNs).
Tensor recorded_extremum(const char* op, OpId record_as, const Tensor& x, const std::vector<int64_t>& dims,
                         bool keepdim, bool is_max) {
  const bool rec = should_record({&x});
  Tensor out;
  {
    NoRecordScope no_record(rec);
    out = amax_amin(op, x, dims, keepdim, is_max);
  }
  if (rec) record_op(record_as, {x}, {out}, reduction_attrs(dims, keepdim));
  return out;
}

// max/min over one dim: the gradient goes to the returned index, which the derivative takes from
// attrs.tensors (a copy, so that a caller writing into the returned indices cannot change it).
std::tuple<Tensor, Tensor> recorded_max_min_dim(const char* op, OpId record_as, const Tensor& x, int64_t dim,
                                                bool keepdim, bool is_max) {
  const bool rec = should_record({&x});
  Tensor values, indices;
  {
    NoRecordScope no_record(rec);
    std::tie(values, indices) = max_min_dim(op, x, dim, keepdim, is_max);
  }
  if (rec) {
    OpAttrs attrs = reduction_attrs({dim}, keepdim);
    attrs.tensors = {capturing() ? indices : indices.clone()};  // the capture follows the returned indices
    record_op(record_as, {x}, {values}, std::move(attrs));
  }
  return {values, indices};
}

}  // namespace

Tensor amax(const Tensor& x, Dims dims, bool keepdim) {
  OpScope scope(OpId::amax, {&x});
  return recorded_extremum("amax", OpId::amax, x, dims.dims, keepdim, true);
}

Tensor amin(const Tensor& x, Dims dims, bool keepdim) {
  OpScope scope(OpId::amin, {&x});
  return recorded_extremum("amin", OpId::amin, x, dims.dims, keepdim, false);
}

Tensor max(const Tensor& x) {
  OpScope scope(OpId::max, {&x});
  return recorded_extremum("max", OpId::max, x, {}, false, true);
}

Tensor min(const Tensor& x) {
  OpScope scope(OpId::min, {&x});
  return recorded_extremum("min", OpId::min, x, {}, false, false);
}

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  OpScope scope(OpId::max, {&x});
  return recorded_max_min_dim("max", OpId::max_dim, x, dim, keepdim, true);
}

std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  OpScope scope(OpId::min, {&x});
  return recorded_max_min_dim("min", OpId::min_dim, x, dim, keepdim, false);
}

// argmax/argmin and any/all have no gradient: they record only for the compiler's capture (Note
// [Trace records]; argmax/argmin's ReduceAttrs: dims empty for all of them, else the one dim).
namespace {
Tensor traced_reduction(OpId id, const Tensor& x, Tensor out, std::vector<int64_t> dims, bool keepdim) {
  if (capturing()) detail::trace_record(id, {x}, {out}, OpAttrs{.typed = ReduceAttrs{.dims = std::move(dims), .keepdim = keepdim}});
  return out;
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  OpScope scope(OpId::argmax, {&x});
  return traced_reduction(OpId::argmax, x, arg_max_min("argmax", x, dim, keepdim, true),
                          dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{}, keepdim);
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  OpScope scope(OpId::argmin, {&x});
  return traced_reduction(OpId::argmin, x, arg_max_min("argmin", x, dim, keepdim, false),
                          dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{}, keepdim);
}

Tensor any(const Tensor& x, Dims dims, bool keepdim) {
  OpScope scope(OpId::any, {&x});
  return traced_reduction(OpId::any, x, any_all("any", x, dims, keepdim, true), dims.dims, keepdim);
}

Tensor all(const Tensor& x, Dims dims, bool keepdim) {
  OpScope scope(OpId::all, {&x});
  return traced_reduction(OpId::all, x, any_all("all", x, dims, keepdim, false), dims.dims, keepdim);
}

}  // namespace tessera
