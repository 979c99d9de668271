// Planning of advanced indexing (Note [Advanced index plan] in ops/index_kernel.h), shared by index,
// index_put and the one-dim ops built on the same kernels (index_select, index_add, embedding).
#pragma once
#include <optional>
#include <vector>

#include "ops/index_kernel.h"
#include "tessera/tensor.h"

namespace tessera {

struct AdvancedIndex {
  // The tensor the plan addresses: the input, or a view of it with a size-1 dim inserted for each
  // 0-dim boolean index (as NumPy and PyTorch treat x[True]).
  Tensor self;
  IndexPlan plan;
  Shape result_sizes;  // pre + index_shape + post
};

// Validates `indices` against `self` (device, dtype, count, mask shapes, broadcast) and plans the
// access. Boolean (and uint8) masks become their nonzero() coordinates, so on the meta device they
// raise NotImplementedError. `self` is not copied: index_put passes its output so the plan addresses it.
AdvancedIndex plan_advanced_index(const char* op, const Tensor& self,
                                  const std::vector<std::optional<Tensor>>& indices, bool wrap_negative);

}  // namespace tessera
