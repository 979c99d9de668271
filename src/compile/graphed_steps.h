// ts::compile's ReduceOverhead mode (Note [ReduceOverhead]): a compiled function's calls replayed as
// CUDA graphs, one per guard variant, beside the variants of compiled_program.cpp, which they run.
//
// Note [ReduceOverhead]: the whole call is captured, not only the program's captured graph: a training
// step compiled with its backward and optimizer step (a graph break for the IR capture, since the
// backward runs inside) becomes one CUDA graph, as torch.cuda.graph does for a step and as Inductor's
// cudagraph trees do for its graphs. Per variant (guards of compile/guards.h on the call's arguments):
//  - call 1 runs as the Default mode does (it captures the program's graph);
//  - call 2 copies its tensor arguments into static inputs and runs on a side stream, under a
//    CaptureProbe (Note [Capture probe]): a real step, whose outputs are the call's. If the probe saw
//    nothing that a capture would refuse, the same work on the same static inputs is captured into a
//    CUDA graph; its outputs are the static outputs;
//  - calls 3 and later copy their arguments into the static inputs and replay the graph on the
//    caller's stream: one launch. They return the static outputs, which the next call overwrites, as
//    PyTorch's CUDA graphs do: clone what must be kept.
// A variant is never graphed (its calls run as the Default mode's, and the compiler warns once with
// the reason) when: a tensor argument is not on the one CUDA device of the call (or there is none, and
// no output is on the GPU); an argument requires grad (a graph cannot hand gradients to the caller's
// leaves); two arguments share storage (each gets a buffer of its own); an output takes a gradient
// (compile the whole step, with its backward, rather than a forward); the probe saw a synchronization
// or a host-side counter (Adam's step count); or the capture failed.
// Host numbers the step reads (a learning rate, a flag) are baked into the graph: pass them as
// arguments, which are guarded by value, so that a change captures a new graph.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compile/guards.h"
#include "tessera/compile/compiled_program.h"

namespace tessera::compiler {

class GraphedSteps {
 public:
  // One call of the compiled function as the Default mode runs it, on these tensor arguments (the
  // call's own or the static inputs).
  using RunOn = std::function<std::vector<Tensor>(const std::vector<Tensor>& args)>;
  using Warn = std::function<void(const std::string&)>;

  GraphedSteps();
  ~GraphedSteps();
  // `call` holds the call's arguments, parameters and training flags (for the guards).
  std::vector<Tensor> call(const CallState& call, const RunOn& run, const Warn& warn, int variant_limit);
  void reset();
  int graphs() const { return graphs_.load(); }    // CUDA graphs captured
  int replays() const { return replays_.load(); }  // calls answered by a replay

 private:
  struct Entry;
  std::atomic<int> graphs_{0}, replays_{0};
  std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
  bool over_limit_warned_ = false;
};

}  // namespace tessera::compiler
