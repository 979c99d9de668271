// The IR verifier, run between passes (DESIGN.md "The compiler"): the graph's use-def structure, and
// each node's output metadata re-inferred by running its op on meta tensors (the meta functions:
// shapes, strides, dtypes; no data, no compute) and compared with what the graph says.
#pragma once
#include "compile/graph.h"

namespace tessera::compiler {

struct VerifyReport {
  int nodes = 0;
  int reinferred = 0;  // nodes whose outputs the meta functions re-inferred and matched
  int skipped = 0;     // nodes whose op needs data to know its output (none of the supported ones yet)
};

// Throws ValueError naming the node and what disagrees.
VerifyReport verify_graph(const Graph& g, bool reinfer = true);

}  // namespace tessera::compiler
