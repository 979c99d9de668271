// Decompositions (DESIGN.md "The compiler", Note [Decompositions]): composite ops of a graph
// rewritten into the primitives that the fusion pass groups, before it runs.
//
// Softmax, log-softmax, layer norm and RMS norm (forward, and layer norm's backward) are each one
// node with a tuned eager kernel. Written out as reductions and pointwise ops, they fuse with what
// surrounds them (a residual add before a layer norm, a scale before a softmax) by the same rules as
// any chain, instead of by patterns that know their names. In inference, a batch norm after a
// convolution folds into the convolution's weight and bias (Note [Conv and batch norm folding]).
#pragma once
#include "compile/graph.h"

namespace tessera::compiler {

// Rewrites every node of `g` that has a decomposition and whose primitives code generation can all
// compute; other nodes are kept as they are. The graph's inputs and outputs keep their meaning (the
// values are renumbered). Returns how many nodes were rewritten.
int decompose_for_fusion(Graph& g);

}  // namespace tessera::compiler
