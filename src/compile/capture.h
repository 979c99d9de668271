// Capture: a program run once with the tracer stage installed, recorded as a Graph (graph.h).
//
// The program runs for real (its outputs are the first call's result) while the op layer hands the
// tracer a trace record of every op call (Note [Trace records] in ops/trace_hook.h). Each record
// becomes a node; each tensor it names is resolved to a value of the graph.
//
// Note [Capture provenance]: a tensor is resolved, in this order, as
//   1. a value already in the graph (an argument, a parameter, a node's output), by its TensorImpl;
//   2. an alias made without an op (detach()) of such a value: same storage and the same layout;
//   3. a constant: a tensor whose storage existed before the capture began (a tensor the callable
//      closes over), held by the graph and read as it is at each run;
//   4. a fresh buffer: a tensor made during the capture without an op (empty, the start of zeros())
//      that an op overwrites whole (fill_, copy_, uniform_, normal_, bernoulli_, random_) before any
//      other use; the node then allocates it (its input 0 is absent);
//   5. otherwise the capture stops: the tensor came from something the tracer cannot see.
// The capture also stops at a host read of tensor data (item(), printing, data_ptr(): a graph
// break), at an op without a replay entry (node_runner.h), and at a kernel that ran inside an op
// which made no record (nor did any op around it). Everything the capture cannot see is refused, so
// a graph never replays a stale value in silence.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compile/graph.h"

namespace tessera::compiler {

struct CaptureResult {
  Graph graph;
  std::vector<Tensor> outputs;       // the program's outputs from this run
  bool complete = true;              // false: the capture stopped (stop_reason says why)
  bool graph_break = false;          // the stop was a host read (a graph break), not an unsupported op
  std::string stop_reason;
  int nodes_before_stop = 0;         // nodes recorded before the stop
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Runs `program` once on `args` (the flattened tensor arguments it reads) and `params` (a module's
// parameters and buffers by name), capturing it. The program's own errors propagate (after the
// tracer is removed).
CaptureResult capture_program(const std::vector<Tensor>& args, const NamedTensors& params,
                              const std::function<std::vector<Tensor>()>& program);

}  // namespace tessera::compiler
