// ReduceOverhead's CUDA graphs (graphed_steps.h, Note [ReduceOverhead]).
#include "compile/graphed_steps.h"

#include <optional>

#include "tessera/autograd.h"
#include "tessera/cuda.h"
#include "tessera/cuda_graph.h"
#include "tessera/functions.h"

namespace tessera::compiler {

struct GraphedSteps::Entry {
  Guards guards;
  int calls = 0;
  std::string refused;               // why this variant is not graphed (empty: it is, or will be)
  int device = -1;
  std::optional<cuda::Stream> side;  // the warm-up's and the capture's stream
  cuda::Graph graph;
  std::vector<Tensor> static_inputs, static_outputs;
};

namespace {

// Why the call's arguments cannot feed a graph (empty when they can); sets `device` from them.
std::string arguments_refused(const std::vector<Tensor>& args, int& device) {
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& a = args[i];
    if (!a.defined()) continue;
    if (!a.is_cuda())
      return "argument " + std::to_string(i) + " is on " + a.device().str() + " (a CUDA graph replays GPU work)";
    if (device < 0) device = a.device().index();
    if (a.device().index() != device)
      return "arguments on cuda:" + std::to_string(device) + " and " + a.device().str() + " (a graph runs on one device)";
    if (a.requires_grad())
      return "argument " + std::to_string(i) + " requires grad (a graph cannot hand gradients to the caller's tensors)";
    for (size_t j = 0; j < i; ++j)
      if (args[j].defined() && args[j].is_alias_of(a))
        return "arguments " + std::to_string(j) + " and " + std::to_string(i) +
               " share storage (each would be copied into a buffer of its own)";
  }
  return {};
}

std::string outputs_refused(const std::vector<Tensor>& outs, int& device) {
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& o = outs[i];
    if (!o.defined()) continue;
    if (o.requires_grad())
      return "output " + std::to_string(i) +
             " takes a gradient (compile the whole step, its backward and optimizer step included, for a graph)";
    if (o.is_cuda() && device < 0) device = o.device().index();
  }
  if (device < 0) return "no argument and no output is on the GPU";
  return {};
}

}  // namespace

GraphedSteps::GraphedSteps() = default;
GraphedSteps::~GraphedSteps() = default;

void GraphedSteps::reset() {
  std::lock_guard<std::mutex> g(mu_);
  entries_.clear();
  over_limit_warned_ = false;
  graphs_ = 0;
  replays_ = 0;
}

std::vector<Tensor> GraphedSteps::call(const CallState& call, const RunOn& run, const Warn& warn, int variant_limit) {
  std::unique_lock<std::mutex> lock(mu_);
  Entry* e = nullptr;
  for (auto& p : entries_)
    if (!p->guards.check(call)) {
      e = p.get();
      break;
    }
  if (!e) {
    if (static_cast<int>(entries_.size()) >= variant_limit) {
      if (!over_limit_warned_) warn("ReduceOverhead: the recompile limit (" + std::to_string(variant_limit) +
                                    " CUDA graphs) is reached; new variants run without a graph");
      over_limit_warned_ = true;
      lock.unlock();
      return run(call.args);
    }
    entries_.push_back(std::make_unique<Entry>());
    e = entries_.back().get();
    e->guards = Guards::of(call);
  }
  ++e->calls;
  if (!e->refused.empty() || e->calls == 1) {
    std::vector<Tensor> outs = run(call.args);
    if (e->calls == 1 && e->refused.empty()) {
      int device = -1;
      e->refused = arguments_refused(call.args, device);
      if (e->refused.empty()) e->refused = outputs_refused(outs, device);
      if (!e->refused.empty()) warn("ReduceOverhead: this variant runs without a CUDA graph: " + e->refused);
      e->device = device;
    }
    return outs;
  }
  if (e->graph.captured()) {  // a replay
    for (size_t i = 0; i < call.args.size(); ++i)
      if (call.args[i].defined() && !call.args[i].is_same(e->static_inputs[i])) {
        NoGradGuard no_grad;
        Tensor dst = e->static_inputs[i];
        dst.copy_(call.args[i], /*non_blocking=*/true);
      }
    cuda::DeviceGuard dg(e->device);
    e->graph.replay();
    ++replays_;
    return e->static_outputs;
  }
  // The second call: a warm-up step under the probe, then the capture of the same work.
  cuda::DeviceGuard dg(e->device);
  {
    NoGradGuard no_grad;
    for (const Tensor& a : call.args) {
      if (!a.defined()) {
        e->static_inputs.push_back(a);
        continue;
      }
      Tensor s = empty_like(a);
      s.copy_(a);
      e->static_inputs.push_back(s);
    }
  }
  if (!e->side) e->side = cuda::Stream::create(e->device);
  const cuda::Stream caller = cuda::current_stream(e->device);
  cuda::Event ready;
  ready.record(caller);
  ready.wait(*e->side);
  std::vector<Tensor> outs;
  {
    cuda::StreamGuard sg(*e->side);
    {
      cuda::CaptureProbe probe;
      outs = run(e->static_inputs);
      e->refused = probe.reason();
    }
    if (e->refused.empty()) {
      std::vector<Tensor> captured;
      try {
        e->graph.capture_begin();
        captured = run(e->static_inputs);
        e->graph.capture_end();
      } catch (const Error& err) {
        e->graph.reset();
        e->refused = std::string("the capture failed: ") + err.what();
      }
      for (Tensor& t : captured) e->static_outputs.push_back(t.defined() ? t.detach() : t);
    }
  }
  cuda::Event done;
  done.record(*e->side);
  done.wait(caller);
  // The warm-up's outputs were made on the side stream; the caller's stream uses them from now on.
  for (const Tensor& t : outs)
    if (t.defined() && t.is_cuda()) t.record_stream(caller);
  if (e->refused.empty()) ++graphs_;
  else {
    e->static_inputs.clear();
    e->static_outputs.clear();
    warn("ReduceOverhead: this variant runs without a CUDA graph: " + e->refused);
  }
  return outs;
}

}  // namespace tessera::compiler
