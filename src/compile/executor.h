// The graph executor (backend "eager"): runs a Graph's nodes in order through the ops of the table,
// with inputs bound once per call and every intermediate released after its last use.
//
// The plan is made once per graph (ExecutionPlan): where each input comes from, the last node that
// reads each value, and the memory the intermediates need (MemoryPlan: the peak of the bytes live at
// once, by liveness, against the sum over all of them). Autograd records the nodes as it records
// eager ops, so a compiled forward is differentiated as its eager run is.
#pragma once
#include <vector>

#include "compile/capture.h"
#include "compile/graph.h"

namespace tessera::compiler {

struct MemoryPlan {
  int64_t peak_bytes = 0;    // the most bytes of intermediates alive at once
  int64_t total_bytes = 0;   // the sum over every intermediate that owns its storage
  int buffers = 0;           // how many intermediates own their storage (views and in-place results do not)
};

struct OpReplay;

struct ExecutionPlan {
  std::vector<int> last_use;   // per value: the last node reading it; nodes.size() for a graph output
  std::vector<const OpReplay*> replay;                 // per node
  std::vector<std::vector<TensorMeta>> output_meta;    // per node, what its outputs were at capture
  std::vector<std::vector<int>> release_after;         // per node, the values its run is the last use of
  MemoryPlan memory;
};

ExecutionPlan plan_execution(const Graph& g);

// Runs `g` with `args` (the flattened tensor arguments) and `params` (bound by position, as at
// capture); returns the graph's outputs.
std::vector<Tensor> execute(const Graph& g, const ExecutionPlan& plan, const std::vector<Tensor>& args,
                            const NamedTensors& params, const std::vector<Tensor>& saved = {});

}  // namespace tessera::compiler
