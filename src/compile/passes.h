// Graph passes before fusion (DESIGN.md "The compiler"): common subexpressions and constant folding
// of scalars. Dead code is graph.h's eliminate_dead_code, run after each of them.
//
// Both keep the graph's meaning exactly: a node is merged with an earlier identical one, or a scalar
// computed now, only where nothing could tell the difference (Note [Passes before fusion]).
#pragma once
#include "compile/graph.h"

namespace tessera::compiler {

// Replaces each node by an earlier one with the same op, inputs, attributes and output layouts, and
// removes the nodes left dead. The first `distinct_outputs` graph outputs (all when negative) are
// what the program returns and stay distinct tensors; later ones (a joint forward's saved values)
// may merge. Returns how many nodes it merged.
int eliminate_common_subexpressions(Graph& g, int distinct_outputs = -1);

// Computes now every pointwise node whose inputs are all scalar literals (0-dim fill_ nodes, the
// Scalar operands of `x * (2 * 3)`), replacing it by a fill_ of its value. Returns how many it folded.
int fold_scalar_constants(Graph& g);

// Rewrites an in-place ReLU, add, sub or mul into its functional op where nobody could see the
// difference: it writes a value that a functional node of the graph made, that no view aliases, that
// nothing reads afterwards and that the graph does not return (Note [Private writes]). Returns how
// many it rewrote.
int functionalize_private_writes(Graph& g);

// Drops the saved outputs of linear_gelu ({y, pre}) and mlp_gelu ({y, pre, h}) where nothing reads
// them (an inference graph: no backward node takes them), so that the node runs the op that does not
// write them (Note [Unread saved outputs]). Returns how many nodes it shrank.
int drop_unread_saved_outputs(Graph& g);

// The passes of the codegen backend, in order: unread saved outputs, scalar constants, common
// subexpressions, private writes made functional, the decompositions (decompose.h), common
// subexpressions again (two decompositions cast one input alike); the verifier (verify.h) checks the
// graph after them. Returns whether anything changed.
bool run_codegen_passes(Graph& g, int distinct_outputs = -1);

}  // namespace tessera::compiler
