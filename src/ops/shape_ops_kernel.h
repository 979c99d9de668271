// Kernel slots of the shape-and-order family: index remapping (flip, roll, pad reflect/replicate/
// circular, repeat_interleave with per-element counts), triangular masks, sort/topk and unique.
// cat, stack, repeat and constant pad need no slot of their own: they copy_ into narrow()/view()s of
// the output, which is already a kernel call.
//
// Invariants every slot relies on (the ops' meta functions guarantee them):
//  - outputs are freshly allocated, contiguous, on the inputs' device, and never alias an input;
//  - dims are already wrapped, sizes already checked, index maps already in range.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

// out[o_0, ..., o_n] = x[m_0(o_0), ..., m_n(o_n)] where m_d is maps[d] (maps[d][o] in [0, x.size(d)))
// or the identity when maps[d] is empty (then out.size(d) == x.size(d)). maps.size() == x.dim();
// out and x have the same dtype and rank. A pure data movement, so it works on raw element bytes.
using IndexMapKernelFn = void(const Tensor& out, const Tensor& x, const std::vector<std::vector<int64_t>>& maps);
extern KernelSlot<IndexMapKernelFn> index_map_kernel;

// out = x with the elements above (tril: upper=false) or below (triu: upper=true) diagonal
// `diagonal` of the last two dims zeroed; leading dims are batch dims. x.dim() >= 2, same sizes
// and dtype as out.
using TrilTriuKernelFn = void(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper);
extern KernelSlot<TrilTriuKernelFn> tril_triu_kernel;

// values/indices (x's sizes; indices int64) = x sorted along `dim`. NaN sorts as the largest value;
// equal elements keep their input order (stable) in both directions. x.dim() >= 1.
using SortKernelFn = void(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                          bool descending);
extern KernelSlot<SortKernelFn> sort_kernel;

// values/indices (x's sizes except k along `dim`) = the k largest (or smallest) elements along
// `dim`, in sorted order (ties: lower index first); NaN counts as the largest. 0 <= k <= x.size(dim).
using TopkKernelFn = void(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t k, int64_t dim,
                          bool largest);
extern KernelSlot<TopkKernelFn> topk_kernel;

// Unique rows of the contiguous 2-D `rows` (n, m), in ascending lexicographic order (NaN largest;
// NaNs never compare equal, so each is its own row, as in PyTorch). The output sizes depend on the
// data, so the kernel allocates them: values (u, m) of rows' dtype; inverse (n) int64 when asked
// (else left undefined); counts (u) int64 when asked (else undefined).
using UniqueKernelFn = void(const Tensor& rows, bool return_inverse, bool return_counts, Tensor& values,
                            Tensor& inverse, Tensor& counts);
extern KernelSlot<UniqueKernelFn> unique_kernel;

}  // namespace tessera
