// The graph executor: runs a Graph's nodes in order through the ops of the table (backend "eager"),
// or, with a fusion plan (backend "codegen"), its fusion groups as generated kernels and the other
// nodes through the ops; inputs are bound once per call and every intermediate is released after its
// last use.
//
// Nodes of the plain elementwise families run by their kernel slot where nothing records or watches
// (Note [Direct kernel calls] in direct_call.h; TESSERA_DIRECT_CALLS=0 turns that off, for
// comparisons). The plan is made once per graph (ExecutionPlan): the steps in the order they run, where each input
// comes from, the last step that reads each value, and the memory the intermediates need (MemoryPlan:
// the peak of the bytes live at once, by liveness, against the sum over all of them; the arena of the
// intermediates the executor makes and reads itself, Note [Planned buffers]; TESSERA_PLANNED_BUFFERS=0
// turns it off, for comparisons). With fusion the
// steps are a topological order of the graph with each group contracted to one step, the order of the
// program wherever the dependences allow (Note [Fusion by bytes saved] says why no side effect moves).
// Autograd records eager steps as it records eager ops, so a compiled forward on the eager backend is
// differentiated as its eager run is; a plan with kernels runs only where autograd records nothing
// (under no_grad, and inside a joint graph: Note [Joint graph]).
#pragma once
#include <memory>
#include <vector>

#include "compile/capture.h"
#include "compile/direct_call.h"
#include "compile/graph.h"

namespace tessera::compiler {

// Note [Planned buffers]: the intermediates that only the executor's own code touches (made by a
// generated kernel or a direct kernel call, read only by generated kernels and direct calls, not
// returned, not kept by the parameter cache) are placed in one arena by their lifetimes: each gets a
// byte offset (a multiple of 256) such that no two whose steps overlap share a byte, largest first at
// the lowest offset that fits (a greedy interval packing). At each call the executor takes the arena
// as one allocation and makes these tensors as views of it; every other intermediate comes from the
// caching allocator and is released after its last reader. No op ever sees an arena tensor, so none
// can keep one (autograd's saved tensors), return one as its own output or compare storages; the
// arena is used only where autograd records nothing (grad mode off, or no graph input requiring grad),
// since a direct call that falls back to its op would otherwise let autograd save an arena tensor.
// A fallback that returned an arena tensor would raise (it cannot: the ops allocate their outputs).
struct MemoryPlan {
  int64_t peak_bytes = 0;    // the most bytes of intermediates alive at once
  int64_t total_bytes = 0;   // the sum over every intermediate that owns its storage
  int buffers = 0;           // how many intermediates own their storage (views and in-place results do not)
  // Note [Planned buffers].
  int planned = 0;                     // intermediates placed in the arena
  int64_t planned_bytes = 0;           // their bytes summed (what separate buffers would take)
  int64_t arena_bytes = 0;             // the arena's size: at least the most of them alive at once
  Device arena_device = kCPU;
  std::vector<int64_t> arena_offset;   // per value: its byte offset in the arena; -1: not planned
};

struct OpReplay;
struct FusionPlan;
struct CompiledKernel;

struct Step {
  int node = -1;    // a node run through its op, or
  int kernel = -1;  // a fusion group's generated kernel
};

// Note [Parameter-derived steps]: a step that reads only the module's parameters and buffers, through
// values that come from such steps, computes the same tensors at every call while
// those tensors are unchanged: autocast's casts of the weights, a weight's transpose made contiguous,
// a folded scale. When autograd records nothing (inference), the executor keeps what these steps
// compute that later steps read, and skips them at the next call whose parameters have the same data
// pointers and version counters (an in-place update, a load_state_dict, a new .data: recomputed).
// Tensors the program closes over are data, as its arguments are: never cached.
// Off while training, under ReduceOverhead and while a CUDA graph is being captured (a replay would
// never recompute them). Steps with no tensor inputs count (a Scalar operand's fill, a factory); left
// out: steps with side effects or random draws, values the graph returns (the caller may write them),
// and every plan where an in-place or out= node writes such a value.
struct ParameterCache {
  bool valid = false;
  std::vector<std::pair<const void*, uint64_t>> key;  // per parameter input: data pointer, version
  std::vector<Tensor> values;                         // per cached value (ExecutionPlan::cached_values)
  int64_t hits = 0;
};

struct ExecutionPlan {
  std::vector<Step> steps;
  // Note [Parameter-derived steps]: per step, whether it reads parameters only; the values such
  // steps make that other steps read; the parameter inputs' values; the cache (shared by the copies
  // of the plan, used under the compiled function's lock).
  std::vector<char> parameter_step;
  std::vector<int> cached_values;
  std::vector<int> parameter_inputs;  // what the cache's key covers
  std::shared_ptr<ParameterCache> cache;
  std::vector<int> last_use;   // per value: the last step reading it; steps.size() for a graph output
  std::vector<const OpReplay*> replay;                 // per node
  std::vector<DirectCall> direct;                      // per node (Note [Direct kernel calls])
  std::vector<std::vector<TensorMeta>> output_meta;    // per node, what its outputs were at capture
  std::vector<std::vector<int>> release_after;         // per step, the values its run is the last use of
  std::shared_ptr<const std::vector<CompiledKernel>> kernels;  // per group, with fusion
  std::vector<std::vector<int>> kernel_operands;       // per group: its outputs, then its inputs
  int fused_nodes = 0;                                 // nodes that run inside kernels
  // Steps that launch work on the device: generated kernels and ops, not views (metadata only) nor
  // the fills of 0-dim CPU scalars (a Scalar operand's buffer). Per call of the graph.
  int launches = 0;
  MemoryPlan memory;
};

// Without `fusion`, every node is a step of its own. `label` names the graph in the kernels' errors
// and debug output.
// `captured`: the graph before the passes, for the debug output (Note [Compiler debug output]).
ExecutionPlan plan_execution(const Graph& g, const FusionPlan* fusion = nullptr, const std::string& label = "graph",
                             const Graph* captured = nullptr);

// Runs `g` with `args` (the flattened tensor arguments) and `params` (bound by position, as at
// capture); returns the graph's outputs.
// Note [Saved inputs released at their last use]: every value, graph inputs included, is released by
// the executor after the last step that reads it. `args` and `saved` are taken by value: a caller
// that moves them in (the compiled backward node, when the engine releases its saved tensors after
// it: autograd/apply_context.h) lets an activation saved for the backward be freed as soon as the
// backward graph has read it, as eager autograd frees each node's saved tensors after that node,
// instead of holding them all until the backward graph ends.
// use_cache: where autograd records nothing, the parameter-derived steps' values are kept and reused
// (Note [Parameter-derived steps]); *cache_hit tells whether this call reused them.
std::vector<Tensor> execute(const Graph& g, const ExecutionPlan& plan, std::vector<Tensor> args,
                            const NamedTensors& params, std::vector<Tensor> saved = {}, bool use_cache = false,
                            bool* cache_hit = nullptr);

}  // namespace tessera::compiler
