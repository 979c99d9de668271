// Meta helpers shared by the reduction ops: which dims are reduced, the output shape with and
// without keepdim, and the (kept..., reduced...) view the kernels take (Note [Reduction layout] in
// ops/reduce_kernel.h). Shape logic only; no data is touched here.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "ops/no_record.h"
#include "tessera/functions.h"

namespace tessera {

struct ReducePlan {
  Shape out_sizes;               // the result's sizes (keepdim applied)
  Shape kept_sizes;              // the sizes of the kept dims: the kernels' contiguous output
  Tensor in;                     // the input permuted to (kept..., reduced...)
  int64_t nreduce = 0;           // number of reduced dims at the end of `in`
  int64_t reduced_numel = 1;     // elements folded into each output
  std::vector<int64_t> reduced;  // the reduced dims of the input, wrapped and ascending
  bool all_dims = false;         // `dims` was empty: every dim is reduced
};

// Wraps `dims` (negative dims count from the end; a 0-dim tensor accepts 0 and -1), rejects
// repeats (ValueError) and out-of-range dims (IndexError). Empty `dims` reduces every dim.
ReducePlan plan_reduction(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);

// For reductions without an identity (max, min, argmax, ...): raises when a reduced dim is empty
// (IndexError, "Expected reduction dim 0 to have non-zero size") or when a full reduction of an
// empty tensor is asked for without a dim (ValueError).
void check_nonempty_reduction(const char* op, const Tensor& x, const ReducePlan& plan);

// The plan's input as (kept..., R) with a single reduced dim; made contiguous when neither R nor the
// innermost kept dim is unit-stride (the row kernels walk one of the two innermost).
Tensor rows_view(const ReducePlan& plan);

// What a reduction records for its derivative (Note [Autograd stage], Note [Typed attributes]):
// ReduceAttrs with the dims as the caller gave them and keepdim (and var's correction).
inline OpAttrs reduction_attrs(std::vector<int64_t> dims, bool keepdim) {
  return OpAttrs{.typed = ReduceAttrs{.dims = std::move(dims), .keepdim = keepdim}};
}
inline OpAttrs correction_attrs(std::vector<int64_t> dims, bool keepdim, double correction) {
  return OpAttrs{.typed = ReduceAttrs{.dims = std::move(dims), .keepdim = keepdim, .correction = correction}};
}

// Allocates the kernels' output (kept sizes, contiguous) on x's device.
Tensor make_reduce_output(const ReducePlan& plan, DType dtype, Device device);

}  // namespace tessera
