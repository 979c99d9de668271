// Kernel slots of the indexing family: gather/scatter along one dim, advanced indexing through an
// IndexPlan (index, index_put, index_select, index_add, embedding), masked_fill, nonzero,
// masked_select, one_hot. The ops (ops/indexing.cpp, ops/advanced_index.cpp) validate shapes, dtypes
// and devices and allocate outputs; the kernels read index values, so they validate those and raise
// IndexError naming the op.
//
// Invariant shared by every writing kernel: the tensor written is a fresh tensor the op allocated
// (a clone of the input for scatter, index_put, index_add), so a kernel that raises part-way leaves
// no user-visible tensor half-written.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/kernel_slot.h"
#include "tessera/scalar.h"
#include "tessera/tensor.h"

namespace tessera {

// Note [Advanced index plan]
// Every advanced-indexing op addresses the indexed tensor `self` as
//     self[pre..., idx_0[b], ..., idx_{K-1}[b], post...]        for b over index_shape
// (with the indexed dims in their own places in self): the K index tensors, broadcast to index_shape,
// each address one dim of self; the other dims of self are split into the ones placed before the
// index block in the result (pre) and the ones after it (post). The result of `index` (and the values
// of `index_put`) has sizes pre + index_shape + post. When PyTorch moves the index block to the front
// (advanced indices separated by a slice), pre is empty and every non-indexed dim is in post.
// The plan holds layout only; the kernel reads index values, wraps negatives when `wrap_negative`
// and raises IndexError for a value out of range before it writes anything.
struct IndexPlan {
  const char* op = "index";           // named in errors
  Shape pre_sizes, pre_strides;        // strides of self, in elements
  Shape post_sizes, post_strides;
  Shape index_shape;                   // broadcast shape of the index tensors
  std::vector<Tensor> indices;         // int64 or int32, each with sizes index_shape (strides may be 0)
  Shape indexed_sizes, indexed_strides;  // size and element stride of the dim of self each index addresses
  Shape indexed_dims;                  // that dim's number in the op's input (for messages)
  bool wrap_negative = true;           // index/index_put wrap; index_select/index_add/embedding do not
};

// out (contiguous, sizes pre + index_shape + post, self's dtype) = self read through the plan.
using IndexKernelFn = void(const Tensor& out, const Tensor& self, const IndexPlan& plan);
extern KernelSlot<IndexKernelFn> index_kernel;

// self[plan] = values, or self[plan] += alpha * values when `accumulate`. `values` has sizes
// pre + index_shape + post (broadcast strides allowed) and self's dtype; self does not overlap itself.
// Duplicate positions: accumulate sums them in index order; otherwise the last in index order wins.
// Deterministic: serial over index_shape, parallel only over pre/post positions (which never alias).
using IndexPutKernelFn = void(const Tensor& self, const Tensor& values, const IndexPlan& plan, bool accumulate,
                              const Scalar& alpha);
extern KernelSlot<IndexPutKernelFn> index_put_kernel;

// The indexed dim of gather/scatter. Strides are in elements.
struct ScatterGatherDim {
  int64_t dim = 0;          // for messages
  int64_t self_size = 0;    // index values must lie in [0, self_size); never wrapped (PyTorch)
  int64_t self_stride = 0;
  int64_t index_size = 0;   // scatter: length of the dim walked inside the kernel
  int64_t index_stride = 0;
  int64_t src_stride = 0;
};

// out[p] = self_r[p + index[p] * self_stride] for every position p of index's sizes. out and index
// have index's sizes; self_r is self restrided to index's sizes with stride 0 along dim. int64 index.
using GatherKernelFn = void(const Tensor& out, const Tensor& self_r, const Tensor& index, const ScatterGatherDim& d);
extern KernelSlot<GatherKernelFn> gather_kernel;

enum class ScatterReduce { None, Add };
// For every position p of the views (sizes of index with size 1 along dim) and j < d.index_size:
// self_r[p + index_r[p + j*index_stride] * self_stride] (=, +=) src_r[p + j*src_stride].
// The dim is walked serially inside one thread, so threads never write the same element and Add is
// deterministic. src_r may be a broadcast scalar (scatter with a value).
using ScatterKernelFn = void(const Tensor& self_r, const Tensor& index_r, const Tensor& src_r,
                             const ScatterGatherDim& d, ScatterReduce reduce);
extern KernelSlot<ScatterKernelFn> scatter_kernel;

// out = mask ? value : self; self and mask (bool) broadcast to out's sizes.
using MaskedFillKernelFn = void(const Tensor& out, const Tensor& self, const Tensor& mask, const Scalar& value);
extern KernelSlot<MaskedFillKernelFn> masked_fill_kernel;

// *count = the number of nonzero elements of x (any dtype, any strides).
using CountNonzeroKernelFn = void(const Tensor& x, int64_t* count);
extern KernelSlot<CountNonzeroKernelFn> count_nonzero_kernel;

// out (contiguous (count, x.dim()) int64) = the coordinates of x's nonzero elements, row-major order.
using NonzeroKernelFn = void(const Tensor& out, const Tensor& x);
extern KernelSlot<NonzeroKernelFn> nonzero_kernel;

// out (contiguous 1-D) = self's elements where mask (bool, same sizes as self) is true, row-major.
using MaskedSelectKernelFn = void(const Tensor& out, const Tensor& self, const Tensor& mask);
extern KernelSlot<MaskedSelectKernelFn> masked_select_kernel;

// *min, *max of a non-empty int64 tensor.
using IndexMinMaxKernelFn = void(const Tensor& x, int64_t* min, int64_t* max);
extern KernelSlot<IndexMinMaxKernelFn> index_min_max_kernel;

// out (contiguous int64, sizes indices.sizes() + (num_classes,)) = one_hot(indices); raises IndexError
// for a class value outside [0, num_classes).
using OneHotKernelFn = void(const Tensor& out, const Tensor& indices, int64_t num_classes);
extern KernelSlot<OneHotKernelFn> one_hot_kernel;

}  // namespace tessera
