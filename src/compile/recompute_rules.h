// What the min-cut partition (Note [Min-cut partition] in partition.h) may recompute in a backward
// graph, and what keeping a forward value for it costs: the rules per node, the storage each value
// shares (views and in-place results share their base's), and the capacity of each value's edge in
// the flow network.
//
// A node is recomputed only where running it again in the backward, on the same inputs, gives the
// same tensors as it gave in the forward: a pure op (no in-place write to an existing tensor, no out=
// write, no random draw) none of whose inputs or outputs is written in place afterwards (an input
// read again in the backward would have changed). Among those, the expensive ops are saved rather
// than recomputed (matmuls, convolutions, attention, the fused linear ops; the ones whose results
// depend on data for their shape), as are reductions whose outputs are under a quarter of their
// inputs' bytes (recomputing one would keep its large input alive instead).
#pragma once
#include <cstdint>
#include <vector>

#include "compile/graph.h"

namespace tessera::compiler {

enum class RecomputeRule : uint8_t {
  Cheap,          // pointwise, views, shapes, copies, indexing, factories: recomputed where the cut says
  Reduction,      // a reduction, normalization, softmax, pooling or loss with outputs >= 1/4 of its inputs
  Expensive,      // matmul, convolution, attention, fused linear ops, batch norm, foreach: saved
  SmallReduction, // a reduction whose outputs are < 1/4 of its inputs' bytes: saved
  Random,         // a random draw (the generator's state is not captured): saved
  SideEffect,     // an in-place write to an existing tensor or an out= write: saved
  Mutated,        // it reads or makes a tensor written in place later: saved as it was
  DataDependent,  // sort, topk, unique, nonzero, masked_select: saved
};
const char* recompute_rule_name(RecomputeRule r);
inline bool recomputable(RecomputeRule r) { return r == RecomputeRule::Cheap || r == RecomputeRule::Reduction; }

struct AliasInfo {
  std::vector<int> root;       // per value: the value whose storage it is (itself unless a view or an
                               // in-place result of another)
  std::vector<char> mutated;   // per value: whether an in-place or out= node writes its storage
};
// Follows views and in-place writes to the tensor they share storage with.
AliasInfo alias_info(const Graph& g);

// The rule for each node of the forward graph `g`.
std::vector<RecomputeRule> recompute_rules(const Graph& g, const AliasInfo& alias);

// Note [Remade outputs]: an output of a fused node that one cheap op makes again from another of its
// outputs. mlp_gelu's h (output 2) is gelu(pre, "tanh") of its pre-activation (output 1): the CPU op
// computes it by that very call, a device kernel by its own epilogue (the same formula, rounded its own
// way). The fused node is saved, never recomputed (it holds two matmuls); its h may still be remade in
// the backward from a saved pre, as it would be if the graph held the GELU as a node of its own. In
// the flow network h is made by the remaking op, not by the fused node.
struct RemadeOutput {
  int value = -1;  // the output remade
  int from = -1;   // the output it is remade from
  OpId op{};
  OpAttrs attrs;
};
// The outputs of `g` that may be remade (none written in place: Mutated nodes are left out).
std::vector<RemadeOutput> remade_outputs(const Graph& g, const std::vector<RecomputeRule>& rules);

// The bytes a value keeps alive when it is saved: 0 for a graph input (the caller, the module or the
// graph holds it anyway) and for a view or in-place result of one; the storage's bytes (the root
// value's span) otherwise.
int64_t storage_bytes(const Graph& g, const AliasInfo& alias, int value);

// The bytes of storage that saving `values` keeps alive beyond the graph's inputs, each storage once.
int64_t saved_storage_bytes(const Graph& g, const std::vector<int>& values);

}  // namespace tessera::compiler
