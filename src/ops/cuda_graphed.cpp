// cuda::make_graphed (tessera/cuda_graph.h): a callable of tensors captured once into a CUDA graph,
// then run by copying new inputs into the static inputs and replaying (PyTorch's
// make_graphed_callables and the torch.cuda.graph recipe for a whole training step).
//
// Invariants: the static inputs and outputs live as long as the callable (the graph reads and writes
// their addresses); the warm-up and the capture run on a side stream of the inputs' device that waits
// for the caller's stream first, and the caller's stream waits for them after; replays run on the
// caller's current stream, after the input copies queued there. Built without CUDA, the Graph raises
// DeviceError at the capture.
#include <mutex>
#include <sstream>

#include "runtime/grad_mode.h"
#include "tessera/cuda_graph.h"
#include "tessera/error.h"
#include "tessera/functions.h"

namespace tessera::cuda {

struct GraphedCallable::State {
  Graph graph;
  std::vector<Tensor> static_inputs;
  std::vector<Tensor> static_outputs;
};

namespace {

class GradModeScope {
 public:
  explicit GradModeScope(bool enabled) : prev_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeScope() { set_grad_enabled(prev_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool prev_;
};

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

// One side stream per device for warm-ups and captures (streams are never destroyed).
Stream side_stream(int device) {
  static std::mutex mu;
  static std::vector<std::pair<int, Stream>> streams;
  std::lock_guard<std::mutex> g(mu);
  for (const auto& [d, s] : streams)
    if (d == device) return s;
  Stream s = Stream::create(device);
  streams.emplace_back(device, s);
  return s;
}

}  // namespace

GraphedCallable make_graphed(TensorsFn fn, const std::vector<Tensor>& sample_inputs, MakeGraphedOptions opts) {
  TS_CHECK(static_cast<bool>(fn), ValueError, "make_graphed: the callable is empty");
  TS_CHECK(!sample_inputs.empty(), ValueError, "make_graphed: expected at least one sample input");
  TS_CHECK(opts.warmup_iters >= 0, ValueError, "make_graphed: warmup_iters must be >= 0, got ", opts.warmup_iters);
  int device = -1;
  for (size_t i = 0; i < sample_inputs.size(); ++i) {
    const Tensor& x = sample_inputs[i];
    TS_CHECK(x.defined(), ValueError, "make_graphed: sample input ", i, " is undefined");
    TS_CHECK(x.is_cuda(), DeviceError, "make_graphed: sample input ", i, " is on ", x.device().str(),
             "; the inputs of a CUDA graph must be CUDA tensors");
    if (device < 0) device = x.device().index();
    TS_CHECK(x.device().index() == device, DeviceError, "make_graphed: sample inputs on cuda:", device, " and ",
             x.device().str(), "; a graph runs on one device");
  }
  auto state = std::make_shared<GraphedCallable::State>();
  DeviceGuard dg(device);
  const Stream caller = current_stream(device);
  {
    GradModeScope no_grad(false);
    for (const Tensor& x : sample_inputs) {
      Tensor s = empty_like(x);
      s.copy_(x);
      state->static_inputs.push_back(s);
    }
  }
  for (size_t i = 0; i < sample_inputs.size(); ++i)
    if (sample_inputs[i].requires_grad()) state->static_inputs[i].requires_grad_(true);

  const Stream side = side_stream(device);
  Event ready;
  ready.record(caller);
  ready.wait(side);
  {
    StreamGuard sg(side);
    for (int i = 0; i < opts.warmup_iters; ++i) (void)fn(state->static_inputs);
    state->graph.capture_begin(opts.pool, opts.mode);
    std::vector<Tensor> outs;
    try {
      outs = fn(state->static_inputs);
    } catch (...) {
      state->graph.reset();  // ends and discards the capture
      throw;
    }
    state->graph.capture_end();
    // Detached: the outputs' autograd history (and what it saved) need not outlive the capture.
    for (Tensor& t : outs) state->static_outputs.push_back(t.defined() ? t.detach() : t);
  }
  Event done;
  done.record(side);
  done.wait(caller);
  return GraphedCallable(std::move(state));
}

std::vector<Tensor> GraphedCallable::operator()(const std::vector<Tensor>& inputs) const {
  TS_CHECK(s_ != nullptr, ValueError, "make_graphed: the callable holds no graph");
  const std::vector<Tensor>& st = s_->static_inputs;
  TS_CHECK(inputs.size() == st.size(), ValueError, "make_graphed: expected ", st.size(), " inputs (as captured), got ",
           inputs.size());
  {
    GradModeScope no_grad(false);
    for (size_t i = 0; i < st.size(); ++i) {
      const Tensor& x = inputs[i];
      TS_CHECK(x.defined(), ValueError, "make_graphed: input ", i, " is undefined");
      TS_CHECK(x.sizes() == st[i].sizes() && x.dtype() == st[i].dtype(), ValueError, "make_graphed: input ", i,
               " has shape ", shape_str(x.sizes()), " and dtype ", dtype_name(x.dtype()),
               " but the graph was captured with shape ", shape_str(st[i].sizes()), " and dtype ",
               dtype_name(st[i].dtype()));
      if (x.is_same(st[i])) continue;
      Tensor dst = st[i];
      dst.copy_(x, /*non_blocking=*/true);
    }
  }
  DeviceGuard dg(st.front().device().index());
  s_->graph.replay();
  return s_->static_outputs;
}

const std::vector<Tensor>& GraphedCallable::static_inputs() const { return s_->static_inputs; }
const std::vector<Tensor>& GraphedCallable::static_outputs() const { return s_->static_outputs; }
Graph& GraphedCallable::graph() const { return s_->graph; }

}  // namespace tessera::cuda
