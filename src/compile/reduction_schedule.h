// Reductions inside a fusion group (Note [Reduction groups]): which reductions a generated kernel
// computes, and in which pass over a row each member of a group is computed.
//
// A reduction group has a full iteration space S (a reduction's input sizes) and a set of reduced
// dims. Its members are
//   Full    pointwise nodes over S,
//   Row     pointwise nodes over the rows: S with the reduced dims of size 1 (keepdim) or removed,
//   Reduce  sum, mean, amax, amin over the reduced dims of a Full value (its result is a Row value).
// The generated kernel gives each row to a thread (CPU) or a warp or block (CUDA) and walks the row's
// elements once per pass. A Reduce accumulates in the pass where its input is first computable; its
// result is available from the next pass on. A Full node is computed in every pass that needs it
// (recomputed from the inputs, which are read again: a row is in cache), a Row node once per row.
#pragma once
#include <string>
#include <vector>

#include "compile/graph.h"

namespace tessera::compiler {

// The most passes over a row one kernel makes (softmax and layer norm take three).
constexpr int kMaxReductionPasses = 3;

// A reduction node the generated kernels compute: its full space and reduced dims. False for other
// nodes and for reductions they leave to the eager kernels (an integer or bool dtype; rows of one
// element; few rows of many elements, Note [Reduction groups]).
bool fusible_reduction(const Graph& g, const Node& n, Shape* full = nullptr, std::vector<char>* mask = nullptr);

// The sizes of the rows of a full space: keepdim (reduced dims of size 1) or not (removed).
Shape row_sizes(const Shape& full, const std::vector<char>& mask, bool keepdim);

enum class MemberRole : uint8_t { Full, Row, Reduce };

struct ReductionSchedule {
  bool ok = false;
  std::string why;                 // when !ok
  std::vector<MemberRole> role;    // per member (the group's nodes, in their order)
  // Full: the first pass it can be computed in. Reduce: the pass it accumulates in. Row: the pass
  // before which it is computed (0: before the first pass; k: after pass k-1).
  std::vector<int> level;
  int passes = 0;
};

// The schedule of `members` (node indices in graph order) over space (full, mask).
ReductionSchedule schedule_reduction(const Graph& g, const std::vector<int>& members, const Shape& full,
                                     const std::vector<char>& mask);

}  // namespace tessera::compiler
