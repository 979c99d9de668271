// The core of ts::compile that knows no callable types (include/tessera/compile.h holds the
// templates that wrap a callable or a module around it): options, statistics, warnings, and
// CompiledProgram, which keeps a compiled function's variants (src/compile/compiled_program.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

enum class CompileMode { Default, ReduceOverhead, MaxAutotune };

struct CompileOptions {
  CompileMode mode = CompileMode::Default;
  // The batch size symbolic (Note [Symbolic batch] in src/compile/symbolic_batch.h): once two batch
  // sizes are captured, every other batch size of at least 2 runs the graph without a capture.
  bool dynamic = false;
  bool fullgraph = false;
  // "eager": graphs run through the eager kernels. "codegen": fusion groups of pointwise ops run as
  // generated kernels (C++ on the CPU, CUDA through NVRTC), the other nodes through the eager kernels.
  std::string backend = "eager";
  int recompile_limit = 8;
  // Training (Note [Min-cut partition] in src/compile/partition.h): a joint graph's backward reads the
  // forward values a minimum cut over bytes chooses and recomputes the cheap ops from them (pointwise,
  // views, normalizations), instead of reading every value eager autograd would save. Off: the
  // backward reads what eager autograd saves.
  bool min_cut_partition = true;
};

struct CompileStats {
  int captures = 0;     // calls that captured the program (each ran it once)
  int graph_calls = 0;  // calls answered by running a graph
  int eager_calls = 0;  // calls that ran the program eagerly (a break, an unsupported op, the limit)
  int variants = 0;
  int joint_variants = 0;  // variants whose backward is a captured graph run by one autograd node
  // Of those, the ones whose backward was traced over fake data, computing nothing (Note [Fake data]
  // in src/runtime/fake_data.h); the others were traced again for real.
  int fake_backward_traces = 0;
  // dynamic = true (Note [Symbolic batch] in src/compile/symbolic_batch.h): pairs of variants made one
  // graph of the batch size, and the instances made from them (one per batch size answered; not
  // variants, no capture, not counted towards the recompile limit).
  int symbolic_variants = 0, batch_instances = 0;
  int kernels = 0;      // generated kernels (backend codegen), forward and backward graphs together
  int fused_nodes = 0;  // graph nodes that run inside them
  // Backend codegen, over every capture: the builds a compiler ran (NVRTC on the GPU, one per kernel;
  // the system C++ compiler on the CPU, one per graph's kernels), the builds answered by the disk cache
  // or by a module this process had loaded already, and the wall time of the code generation (passes,
  // fusion, sources, builds, loading) in milliseconds. The cache counts are the process's own during
  // the captures: another thread compiling at the same time is counted too.
  int builds = 0, cache_hits = 0;
  double codegen_ms = 0;
  // Mode ReduceOverhead (Note [ReduceOverhead] in src/compile/graphed_steps.h): the CUDA graphs
  // captured (one per variant that could be graphed) and the calls answered by replaying one.
  int cuda_graphs = 0, cuda_graph_replays = 0;
  // The last captured variant's steps that launch device work (ops and generated kernels; views and
  // scalar fills do not), forward and backward graphs together: as the graph runs, and as eager would
  // run its nodes one by one (the launch counts of a compiled and an eager run).
  int launches = 0, eager_launches = 0;
  // Calls that reused what the steps reading only parameters computed (Note [Parameter-derived steps]
  // in src/compile/executor.h: autocast's weight casts in inference, say), and how many steps the last
  // such call skipped.
  int parameter_cache_hits = 0, parameter_steps = 0;
  // The last joint variant's saved values (Note [Min-cut partition]): the bytes of storage its forward
  // keeps alive for its backward beyond the graph's inputs, as compiled and as eager autograd would
  // keep them; how many values the backward reads and how many forward nodes it runs again (a remade
  // output of a fused node counts as one); and why the partition left the captured graphs as they
  // were, where it did.
  int64_t saved_bytes = 0, eager_saved_bytes = 0;
  int saved_values = 0, recomputed_nodes = 0;
  std::string partition_declined;
  // For each variant without a backward graph although its outputs take a gradient: why.
  std::vector<std::string> no_backward_reasons;
  // For each recompile, the first guard that failed for each variant ("variant 0: argument 0: sizes ...").
  std::vector<std::string> recompile_reasons;
};

// Where the compiler's warnings go (default: standard error, "tessera: warning: ...").
void set_compile_warning_handler(std::function<void(const std::string&)> handler);

// The type-erased core of a compiled function.
class CompiledProgram {
 public:
  using Program = std::function<std::vector<Tensor>()>;
  // Fills a module's parameters and buffers (by name, in order) and every submodule's training flag.
  using StateFn = std::function<void(std::vector<std::pair<std::string, Tensor>>&, std::vector<bool>&)>;

  // The callable run on other tensors in place of the call's tensor arguments (flattened, in order),
  // its other arguments as given: what ReduceOverhead runs on its static inputs.
  using ProgramOn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

  CompiledProgram(CompileOptions options, std::string name, StateFn state = {});
  // `program` runs the callable on the call's own arguments; `args` are its tensors, flattened, and
  // `scalars` its other arguments, printed. `program_on` (mode ReduceOverhead) runs it on others.
  std::vector<Tensor> run(const std::vector<Tensor>& args, const std::vector<std::string>& scalars,
                          const Program& program, const ProgramOn& program_on = {});
  // Runs the call like run() and describes every variant: its graph, guards, and breaks with reasons.
  std::string explain(const std::vector<Tensor>& args, const std::vector<std::string>& scalars,
                      const Program& program);
  CompileStats stats() const;
  // The graph text of the variant that answered the last call (empty when it ran eagerly), and of
  // its backward graph (empty when it has none).
  std::string last_graph() const;
  std::string last_backward_graph() const;
  void reset();  // forgets every variant (and every CUDA graph)
  const CompileOptions& options() const;

 private:
  std::vector<Tensor> run_default(const std::vector<Tensor>& args, const std::vector<std::string>& scalars,
                                  const Program& program);
  std::shared_ptr<struct CompiledProgramState> s_;
};

}  // namespace tessera
