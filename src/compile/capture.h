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

// Note [Joint graph]: with derive_backward, when the program's outputs take a gradient (grad mode
// on, an input requiring grad), the capture also runs the engine once from those outputs to the
// inputs that require grad, with placeholder output gradients, and captures that as a second graph:
// the backward. Its inputs are the output gradients (Argument i for the i-th differentiable output)
// and the forward values the derivatives read (Saved, which the forward graph returns after the
// program's outputs); its outputs are the input gradients that are defined. At run time the forward
// graph runs without autograd and one autograd node runs the backward graph: no per-op nodes, no
// per-op saved tensors. What the capture saves is what eager autograd would save; the min-cut
// partition then chooses fewer bytes to save and recomputes the rest in the backward (Note [Min-cut
// partition] in partition.h; CompileOptions::min_cut_partition). Outputs that share storage are views to autograd (an in-place write to one
// is refused). Where the backward cannot be captured (an op without a replay, an output that is an
// input or a view of one, a write to an input that requires grad, a host read in a derivative),
// backward_stop_reason says why, and autograd differentiates the forward as it replays, as in eager.
// The engine's pass is traced over fake data (Note [Fake data] in runtime/fake_data.h): no backward
// kernel runs at capture; where that pass cannot finish, it is traced again for real.
struct CaptureResult {
  Graph graph;               // the forward; with a backward, its outputs are the program's, then saved
  std::vector<Tensor> outputs;       // the program's outputs from this run
  bool complete = true;              // false: the capture stopped (stop_reason says why)
  bool graph_break = false;          // the stop was a host read (a graph break), not an unsupported op
  std::string stop_reason;
  int nodes_before_stop = 0;         // nodes recorded before the stop
  int num_program_outputs = 0;       // graph.outputs' first entries are the program's
  bool has_backward = false;
  Graph backward;
  std::vector<int> saved;            // (before DCE) forward values the backward reads, in Saved order
  std::vector<int> diff_outputs;     // program outputs that take a gradient, in backward-argument order
  std::vector<int> diff_inputs;      // positions in graph.inputs of the inputs that require grad
  std::vector<bool> grad_defined;    // per diff input: whether the backward gives it a gradient
  std::string backward_stop_reason;
  bool backward_over_fake_data = false;  // Note [Fake data]: the backward was traced without computing it
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Runs `program` once on `args` (the flattened tensor arguments it reads) and `params` (a module's
// parameters and buffers by name), capturing it. The program's own errors propagate (after the
// tracer is removed).
CaptureResult capture_program(const std::vector<Tensor>& args, const NamedTensors& params,
                              const std::function<std::vector<Tensor>()>& program, bool derive_backward = false);

}  // namespace tessera::compiler
