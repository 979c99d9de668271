// CUDA graphs as a user sees them (PyTorch's torch.cuda.CUDAGraph, graph_pool_handle and
// make_graphed_callables): capture the kernels a piece of work launches once, then replay them with a
// single launch. No CUDA types here; built without the CUDA backend every call raises DeviceError.
//
//   cuda::Stream side = cuda::Stream::create();
//   { cuda::StreamGuard g(side); for (int i = 0; i < 3; ++i) step(); }   // warm-up, on a side stream
//   cuda::Graph graph;
//   { cuda::StreamGuard g(side); graph.capture_begin(); out = step(); graph.capture_end(); }
//   static_in.copy_(next_batch); graph.replay();                        // out holds the new result
//
// Rules of capture (as in PyTorch):
//  * Capture runs on a stream other than the device's default stream (capture_begin raises there); a
//    replay may run on any stream of the device.
//  * Nothing may synchronize with the host while capturing: item(), cpu(), synchronize(),
//    Stream/Event::synchronize, ops whose output size depends on the data (nonzero, masked_select,
//    unique, count_nonzero) and the like raise "<op>: cannot synchronize the device while a CUDA graph
//    is being captured". Data checks that would bring a flag back to the host (index bounds, integer
//    division by zero, bernoulli/multinomial probabilities) do not run inside a graph.
//  * Warm up first (a few iterations, on a side stream): one-time work (cuBLAS/cuDNN handles, optimizer
//    state, cached plans) must not happen during capture. make_graphed does this.
//  * Memory allocated during capture comes from the graph's private pool and stays reserved for it
//    until the graph is reset or destroyed; a replay rewrites the same addresses, so the tensors made
//    during capture (the "static outputs") hold each replay's results, and inputs are fed by copying
//    into the tensors the capture read (the "static inputs"). Shapes, dtypes and devices are fixed.
//  * Random ops (dropout) draw new numbers at each replay, from the CUDA generator's state at the
//    replay (the numbers that running the captured work eagerly would draw): manual_seed reproduces them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/cuda.h"
#include "tessera/tensor.h"

namespace tessera::cuda {

// A memory pool's id, as PyTorch's (uint64, uint64) pair; {0, 0} is "none".
using MempoolId = std::pair<uint64_t, uint64_t>;

// A new pool id that graphs captured one after another may share (capture_begin(pool)): memory freed
// by the first capture can then be reused by the next. Replay such graphs in the order captured.
MempoolId graph_pool_handle();

// cudaStreamCaptureMode. Global (PyTorch's default): while this capture is underway, unsafe CUDA
// calls from any thread that is not itself in relaxed mode fail. ThreadLocal: only this thread's;
// Relaxed: none are prevented (a synchronization still breaks the capture).
enum class CaptureMode { Global, ThreadLocal, Relaxed };

class Graph {
 public:
  Graph();
  ~Graph();  // reset()
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Starts capturing the work queued on the current stream (and streams forked from it by events)
  // of the current device. `pool`: a pool shared with other graphs (graph_pool_handle() or another
  // graph's pool()); default a private pool of its own. Raises on the default stream, or when this
  // graph holds a capture already.
  void capture_begin(MempoolId pool = {0, 0}, CaptureMode mode = CaptureMode::Global);
  // Ends the capture (on the stream it began on) and instantiates the graph. Raises, with CUDA's
  // reason, when the capture was invalidated (by a synchronization or an unsupported call inside it).
  void capture_end();
  // Launches the graph on the current stream (asynchronously, as any kernel).
  void replay();
  // Destroys the captured graph and gives up this graph's use of its pool (whose memory is released
  // when no graph uses it: Note [Graph private pools]). The graph may then be captured again.
  void reset();
  MempoolId pool() const;
  bool captured() const;   // capture_end has succeeded (and reset not yet called)
  bool capturing() const;  // between capture_begin and capture_end

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether the current stream of the current device is being captured (torch.cuda.is_current_stream_capturing).
bool is_current_stream_capturing();
// Raises Error "<op>: cannot synchronize the device while a CUDA graph is being captured (...)" when the
// current stream is being captured. What every synchronizing call of tessera calls first.
void check_not_capturing(const char* op);

// Raises Error "<op>: cannot be captured in a CUDA graph: <why>" when the current stream is being
// captured: work whose replay would silently differ from running it (an optimizer whose step count
// lives on the host would replay the first step's bias correction forever). Under a CaptureProbe it
// records the reason instead, as check_not_capturing does.
void check_capturable(const char* op, const char* why);

// Note [Capture probe]: while a CaptureProbe lives on a thread, the work run there that could not be
// captured (a synchronization with the host, check_capturable's cases) is recorded rather than
// refused: reason() names the first such op, empty when there was none. ts::compile's ReduceOverhead
// mode runs its warm-up call under one, and captures only a step whose warm-up left no reason, so that
// a capture that would fail halfway (leaving gradients in buffers that were never computed) is not
// attempted. Probes nest; the innermost records.
class CaptureProbe {
 public:
  CaptureProbe();
  ~CaptureProbe();
  CaptureProbe(const CaptureProbe&) = delete;
  CaptureProbe& operator=(const CaptureProbe&) = delete;
  const std::string& reason() const { return reason_; }
  void note(std::string reason);  // keeps the first

 private:
  std::string reason_;
  CaptureProbe* prev_;
};

// ---- make_graphed: a whole step as one graph ----------------------------------------------------
using TensorsFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct MakeGraphedOptions {
  int warmup_iters = 3;        // eager runs of fn on a side stream before the capture (PyTorch: 3)
  MempoolId pool{0, 0};        // share a pool with other graphs; default a private one
  CaptureMode mode = CaptureMode::Global;
};

// What make_graphed returns: call it with tensors of the sample inputs' shapes, dtypes and device.
class GraphedCallable {
 public:
  // Copies `inputs` into the static inputs (on the current stream), replays, and returns the static
  // outputs: the same tensors at every call, overwritten by the next call (clone what must be kept).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  const std::vector<Tensor>& static_inputs() const;
  const std::vector<Tensor>& static_outputs() const;
  Graph& graph() const;

  struct State;
  explicit GraphedCallable(std::shared_ptr<State> s) : s_(std::move(s)) {}

 private:
  std::shared_ptr<State> s_;
};

// Captures `fn` (for example a whole training step: forward, backward and optimizer step, returning
// the loss) as PyTorch's make_graphed_callables / torch.cuda.graph do:
//  1. static inputs: copies of `sample_inputs` (CUDA tensors of one device; requires_grad kept);
//  2. warm-up: `warmup_iters` eager calls of fn on the static inputs, on a side stream (they run for
//     real: an optimizer takes those steps, and creates its state there, outside the capture);
//  3. capture: one call of fn on the side stream into a Graph; its outputs are the static outputs.
// Constraints: fn must launch the same work for every input (same shapes; no data-dependent control
// flow on the host), must not synchronize (no item(), cpu(), printing of CUDA tensors), must keep
// reading the tensors it read during the capture (parameters, optimizer state allocated during
// warm-up; not reassigned), and must draw random numbers only from the default CUDA generator.
GraphedCallable make_graphed(TensorsFn fn, const std::vector<Tensor>& sample_inputs, MakeGraphedOptions opts = {});

}  // namespace tessera::cuda
