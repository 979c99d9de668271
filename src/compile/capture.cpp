// The capture stage (capture.h): turns trace records into nodes, resolving every tensor by Note
// [Capture provenance], and watches for what it cannot see.
#include "compile/capture.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <thread>
#include <unordered_map>

#include "autograd/apply_context.h"
#include "compile/node_runner.h"
#include "ops/op_scope.h"
#include "ops/trace_hook.h"
#include "runtime/fake_data.h"
#include "runtime/grad_mode.h"
#include "runtime/storage.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tensor/tensor_impl.h"

namespace tessera::compiler {
namespace {

// The ops that write every element of their self without reading it (rule 4).
bool overwrites_whole(OpId op) {
  switch (op) {
    case OpId::copy_:
    case OpId::fill_:
    case OpId::uniform_:
    case OpId::normal_:
    case OpId::bernoulli_:
    case OpId::random_:
      return true;
    default:
      return false;
  }
}

// Thrown out of the engine when a backward capture stops (not an error of the program).
struct BackwardStopped {};

bool same_layout(const TensorMeta& a, const TensorMeta& b) {
  return a.sizes == b.sizes && a.strides == b.strides && a.offset == b.offset && a.dtype == b.dtype;
}

class CaptureStage final : public TracerStage {
 public:
  // `forward`: the finished capture of the forward pass, when this one captures its backward (Note
  // [Joint graph]): the forward's values resolve as Saved inputs, and only what existed before the
  // forward's capture counts as a constant.
  CaptureStage(const std::vector<Tensor>& args, const NamedTensors& params, const CaptureStage* forward = nullptr)
      : thread_(std::this_thread::get_id()),
        first_serial_(forward ? forward->first_serial_ : Storage::next_serial()),
        forward_(forward) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].defined() || lookup(args[i]) >= 0) continue;
      add_input(args[i], InputKind::Argument, static_cast<int64_t>(i), "");
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& [name, t] = params[i];
      if (!t.defined() || lookup(t) >= 0) continue;
      add_input(t, InputKind::Parameter, static_cast<int64_t>(i), name);  // bound by position
    }
  }

  CaptureResult& result() { return result_; }
  // The forward values the backward read, in the order of its Saved inputs.
  const std::vector<int>& saved() const { return saved_; }
  // The tensor of a graph input, or undefined.
  Tensor tensor_of(int v) const {
    auto it = input_tensor_.find(v);
    return it == input_tensor_.end() ? Tensor() : it->second;
  }
  // The forward graph's value of a tensor it knows, or of an alias of one with the same layout (a
  // saved tensor unpacked by autograd is a new TensorImpl over the same storage), or -1.
  int value_of(const Tensor& t) const {
    const int v = lookup(t);
    return v >= 0 ? v : alias_of(t);
  }
  bool stopped() const { return !result_.complete; }

  // Resolves the program's outputs (after it returned).
  void finish(const std::vector<Tensor>& outputs) {
    result_.outputs = outputs;
    for (const Tensor& t : outputs) {
      if (stopped()) return;
      TS_CHECK(t.defined(), ValueError, "compile: the program returned an undefined tensor (output ",
               graph().outputs.size(), ")");
      const int v = resolve(t, /*fresh_ok=*/false, "the program's output");
      if (v < 0) return stop(failure_, false);
      graph().outputs.push_back(v);
    }
  }

  void on_enter(const OpEvent&) override {
    if (!mine()) return;
    Frame f;
    f.start = static_cast<int>(graph().nodes.size());
    frames_.push_back(f);
  }
  // An op that recorded itself covers whatever ran inside it. Otherwise what it could not show (a
  // kernel it ran without a record, a record of an op inside it that failed) is deferred to the op
  // around it, which may still cover it by its own record; at the program's level it stops the capture.
  void on_exit(const OpEvent& e) override {
    if (!mine() || frames_.empty()) return;
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    if (f.own_record) return;
    std::string why = f.deferred;
    if (why.empty() && f.kernel)
      why = "the op " + std::string(op_name(e.op)) + " ran the kernel '" + f.kernel +
            "' but gives the capture no record of itself (the compiler cannot capture it yet)";
    if (why.empty()) return;
    defer(std::move(why));
  }
  void on_unscoped_kernel(const char* kernel) override {
    if (!mine()) return;
    stop(std::string("the kernel '") + kernel + "' ran outside every op", false);
  }
  void on_kernel(const char* kernel) override {
    if (!mine() || frames_.empty()) return;
    abandon_if_stopped();
    if (!frames_.back().kernel) frames_.back().kernel = kernel;
  }
  void on_host_read(const char* what) override {
    if (!mine()) return;
    if (forward_ && !grad_call_seen_ && std::string(what).rfind("autograd::grad()", 0) == 0) {
      grad_call_seen_ = true;  // the backward capture's own call of the engine
      return;
    }
    stop(std::string("graph break: ") + what, true);
  }
  void on_record(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                 const OpAttrs& attrs) override {
    if (!mine()) return;
    abandon_if_stopped();
    if (stopped()) return;
    std::string why = record(op, inputs, outputs, attrs);
    if (why.empty()) {
      if (!frames_.empty()) {
        frames_.back().own_record = true;
        frames_.back().deferred.clear();
      }
      return;
    }
    defer(std::move(why));
  }

 private:
  static constexpr int kStop = -2;

  // A backward capture that cannot finish ends the engine's run at the next record or kernel (never
  // from on_enter or on_exit, which run in OpScope's constructor and destructor); capture_backward
  // catches it.
  void abandon_if_stopped() const {
    if (forward_ && stopped()) throw BackwardStopped{};
  }

  // Turns a trace record into a node; returns why it cannot, or "".
  std::string record(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                     const OpAttrs& attrs) {
    const OpReplay* replay = op_replay(op);
    if (!replay) return "the op " + std::string(op_name(op)) + " has no replay in the compiler yet";
    Node n;
    n.op = op;
    const bool in_place = op_info(op).kind == OpKind::InPlace;
    if (in_place) {
      if (outputs.size() != 1 || !outputs[0].defined()) return "an in-place record without its tensor";
      const int self = resolve(outputs[0], overwrites_whole(op), std::string(op_name(op)) + "'s self");
      if (self == kStop) return failure_;
      n.inputs.push_back(self);  // -1: a fresh buffer, which the node allocates
    }
    // An input of the node: -1 for an absent one; false when it cannot be resolved.
    auto add_input_of = [&](const Tensor& t, const char* what) {
      const int v = t.defined() ? resolve(t, false, std::string(op_name(op)) + what) : -1;
      if (v == kStop) return false;
      n.inputs.push_back(v);
      return true;
    };
    for (const Tensor& t : inputs)
      if (!add_input_of(t, "'s input")) return failure_;
    std::vector<Tensor> outs = outputs;
    for (size_t i = 0; i < attrs.tensors.size(); ++i) {
      const Tensor& t = attrs.tensors[i];
      const AttrTensor role = replay->all_inputs ? AttrTensor::Input
                              : i < replay->attr_tensors.size() ? replay->attr_tensors[i]
                                                                : AttrTensor::Ignored;
      if (role == AttrTensor::Output) {
        outs.push_back(t);
      } else if (role == AttrTensor::Input && !add_input_of(t, "'s index or mask")) {
        return failure_;
      }
    }
    for (const Tensor& t : outs)
      if (!t.defined()) return std::string(op_name(op)) + " recorded an undefined output";
    n.attrs = attrs;
    n.attrs.tensors.clear();
    if (!frames_.empty()) {
      prune_nested(frames_.back().start, n.inputs);
      frames_.back().start = static_cast<int>(graph().nodes.size()) + 1;
    }
    const int node = static_cast<int>(graph().nodes.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      TensorMeta m = TensorMeta::of(outs[k]);
      m.requires_grad = false;  // autograd records after the trace: intermediates carry no flag
      const int v = graph().add_value(m, node, static_cast<int>(k));
      bind(outs[k], v);
      n.outputs.push_back(v);
    }
    graph().nodes.push_back(std::move(n));
    return "";
  }


  void defer(std::string why) {
    if (frames_.empty()) return stop(why, false);
    if (frames_.back().deferred.empty()) frames_.back().deferred = std::move(why);
  }

  struct Frame {
    int start = 0;                  // the first node recorded inside it (since its last own record)
    bool own_record = false;        // it recorded itself
    const char* kernel = nullptr;   // the first kernel that ran directly in it
    std::string deferred;           // what an op inside it could not show the capture
  };

  Graph& graph() { return result_.graph; }
  bool mine() const { return std::this_thread::get_id() == thread_; }

  void stop(const std::string& why, bool is_break) {
    if (stopped()) return;
    result_.complete = false;
    result_.graph_break = is_break;
    result_.nodes_before_stop = static_cast<int>(graph().nodes.size());
    result_.stop_reason = why + " after " + std::to_string(graph().nodes.size()) + " recorded ops";
  }

  // An op's own record replays the whole op: the nodes recorded inside it (from `start`) stay only
  // where the record reads their outputs (matmul's record is a bmm of views it made); the rest were
  // its implementation (casts, copies, writes the replay makes again) and go, with their values.
  void prune_nested(int start, const std::vector<int>& record_inputs) {
    std::vector<Node>& nodes = graph().nodes;
    const int end = static_cast<int>(nodes.size());
    if (start >= end) return;
    // Only the nested nodes' outputs are candidates, and their values are numbered from `base` on:
    // the work is the nested range's, not the whole graph's (this runs at every record of an op).
    const int base = nodes[start].outputs.front();
    const int nv = static_cast<int>(graph().values.size());
    std::vector<char> needed(nv - base, 0);
    auto need = [&](int v) {
      if (v >= base) needed[v - base] = 1;
    };
    for (int v : record_inputs) need(v);
    std::vector<char> keep(end - start, 0);
    bool any_dropped = false;
    for (int i = end - 1; i >= start; --i) {
      bool used = false;
      for (int v : nodes[i].outputs) used = used || needed[v - base];
      if (!used) {
        any_dropped = true;
        continue;
      }
      keep[i - start] = 1;
      for (int v : nodes[i].inputs) need(v);
    }
    if (!any_dropped) return;
    std::vector<char> dropped(nv - base, 0);
    int w = start;
    for (int i = start; i < end; ++i) {
      if (!keep[i - start]) {
        for (int v : nodes[i].outputs) dropped[v - base] = 1;
        continue;
      }
      for (int v : nodes[i].outputs) graph().values[v].node = w;
      if (w != i) nodes[w] = std::move(nodes[i]);
      ++w;
    }
    nodes.resize(w);
    auto gone = [&](int v) { return v >= base && dropped[v - base] != 0; };
    for (auto it = impl_value_.begin(); it != impl_value_.end();)
      it = gone(it->second.value) ? impl_value_.erase(it) : std::next(it);
    for (auto& [storage, vs] : storage_values_) vs.erase(std::remove_if(vs.begin(), vs.end(), gone), vs.end());
  }

  // Note [Capture bindings]: the capture holds no tensor but the graph's inputs, so that what the
  // program frees is freed (a capture's memory peak stays the program's). A binding remembers its
  // tensor's storage serial and layout; a TensorImpl address that a freed tensor left and a new one
  // took is told apart by them (same storage and layout: the same data, so the same value).
  void bind(const Tensor& t, int v) {
    impl_value_[t.impl()] = Binding{v, t.impl()->storage()->serial(), TensorMeta::of(t)};
    if (static_cast<size_t>(v) >= value_meta_.size()) value_meta_.resize(v + 1);
    value_meta_[v] = TensorMeta::of(t);
    storage_values_[t.impl()->storage()->serial()].push_back(v);
  }

  // The value bound to this very tensor (rule 1), or -1.
  int lookup(const Tensor& t) const {
    auto it = impl_value_.find(t.impl());
    if (it == impl_value_.end()) return -1;
    const Binding& b = it->second;
    if (b.serial != t.impl()->storage()->serial() || b.meta.sizes != t.sizes() || b.meta.strides != t.strides() ||
        b.meta.offset != t.storage_offset() || b.meta.dtype != t.dtype())
      return -1;
    return b.value;
  }

  // A value over the same storage with the same layout (rule 2), or -1; kStop (with failure_) when
  // the storage is known but no value has this layout.
  int alias_of(const Tensor& t) const {
    auto st = storage_values_.find(t.impl()->storage()->serial());
    if (st == storage_values_.end()) return -1;
    const TensorMeta m = TensorMeta::of(t);
    for (auto v = st->second.rbegin(); v != st->second.rend(); ++v)  // the latest version first
      if (same_layout(value_meta_[*v], m)) return *v;
    return kStop;
  }

  void add_input(const Tensor& t, InputKind kind, int64_t index, const std::string& name) {
    const int v = graph().add_value(TensorMeta::of(t));
    GraphInput in;
    in.value = v;
    in.kind = kind;
    in.index = index;
    in.name = name;
    if (kind == InputKind::Constant) in.constant = t;
    graph().inputs.push_back(in);
    input_tensor_[v] = t;
    bind(t, v);
  }

  // Note [Capture provenance]. Returns the value, -1 for a fresh buffer (fresh_ok), or kStop.
  int resolve(const Tensor& t, bool fresh_ok, const std::string& what) {
    const int known = lookup(t);
    if (known >= 0) return known;  // rule 1
    if (forward_) {  // a value of the forward graph (Note [Joint graph])
      const int fv = forward_->value_of(t);
      if (fv >= 0) {
        add_input(t, InputKind::Saved, static_cast<int64_t>(saved_.size()), "");
        saved_.push_back(fv);
        return lookup(t);
      }
    }
    const TensorMeta m = TensorMeta::of(t);
    const int alias = alias_of(t);  // rule 2
    if (alias >= 0) {
      bind(t, alias);
      return alias;
    }
    if (alias == kStop) {
      failure_ = what + " (" + to_string(m) + ") is a view of a tensor in the graph made without an op";
      return kStop;
    }
    if (t.impl()->storage()->serial() < first_serial_) {  // rule 3
      add_input(t, InputKind::Constant, 0, "");
      return lookup(t);
    }
    if (fresh_ok && m.offset == 0) return -1;  // rule 4: the node allocates it; later aliases resolve by rule 2
    failure_ = what + " (" + to_string(m) + ") was made inside the program by something the compiler cannot see";
    return kStop;
  }

  std::thread::id thread_;
  uint64_t first_serial_;
  CaptureResult result_;
  std::vector<Frame> frames_;
  struct Binding {
    int value;
    uint64_t serial;  // of the tensor's storage when bound
    TensorMeta meta;
  };
  std::unordered_map<const TensorImpl*, Binding> impl_value_;          // Note [Capture bindings]
  std::unordered_map<uint64_t, std::vector<int>> storage_values_;      // by storage serial
  std::vector<TensorMeta> value_meta_;                                 // per value, as bound
  std::unordered_map<int, Tensor> input_tensor_;                       // the graph inputs' tensors
  std::string failure_;  // why the last resolve() failed
  const CaptureStage* forward_ = nullptr;
  bool grad_call_seen_ = false;
  std::vector<int> saved_;
};

// Installs the stage and marks the thread for the scope's lifetime.
class CaptureGuard {
 public:
  explicit CaptureGuard(CaptureStage* stage) {
    TracerStage* prev = set_tracer_stage(stage);
    if (prev) {
      set_tracer_stage(prev);
      TS_THROW(ValueError, "compile: another tracer stage is installed; a program cannot be captured under it");
    }
    detail::t_capturing = true;
  }
  ~CaptureGuard() {
    detail::t_capturing = false;
    set_tracer_stage(nullptr);
  }
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;
};

}  // namespace

namespace {

// Whether the outputs can be the outputs of one autograd node: none is a graph input, or a view of
// one (through views and in-place writes back to an input), and none is listed twice. Views of
// intermediates are allowed; their node marks the aliasing ones as views autograd cannot track, so
// that an in-place write to one is refused (Note [View tracking] in autograd/view_tracking.h).
bool outputs_are_fresh(const Graph& g) {
  std::vector<char> seen(g.values.size(), 0);
  for (int v : g.outputs) {
    if (seen[v]) return false;
    seen[v] = 1;
    int u = v;
    while (g.values[u].node >= 0) {
      const Node& n = g.nodes[g.values[u].node];
      const OpKind kind = op_info(n.op).kind;
      if ((kind != OpKind::View && kind != OpKind::InPlace) || n.inputs.empty() || n.inputs[0] < 0) break;
      u = n.inputs[0];
    }
    if (g.values[u].node < 0) return false;  // reaches a graph input
  }
  return true;
}

// Note [Joint graph]: the backward of a captured forward, captured by running the engine once over
// the forward's autograd graph (autograd::grad from the differentiable outputs to the inputs that
// require grad, with placeholder output gradients).
void capture_backward(CaptureStage& fwd, CaptureResult& r, bool fake_ok) {
  const Graph& g = r.graph;
  if (!is_grad_enabled()) return;
  if (!outputs_are_fresh(g)) {
    bool any_grad = false;
    for (const Tensor& o : r.outputs) any_grad = any_grad || o.requires_grad();
    if (any_grad) r.backward_stop_reason = "an output is an input, a view of one, or listed twice";
    return;
  }
  for (const Node& n : g.nodes)
    if (op_info(n.op).kind == OpKind::InPlace && !n.inputs.empty() && n.inputs[0] >= 0 &&
        g.values[n.inputs[0]].node < 0 && g.values[n.inputs[0]].meta.requires_grad)
      return r.backward_stop_reason = "the program writes in place one of its inputs that requires grad", void();
  std::vector<Tensor> outs, diff_in;
  for (size_t j = 0; j < r.outputs.size(); ++j)
    if (r.outputs[j].requires_grad() && r.outputs[j].is_floating_point()) {
      r.diff_outputs.push_back(static_cast<int>(j));
      outs.push_back(r.outputs[j]);
    }
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const GraphInput& in = g.inputs[i];
    Tensor t = in.kind == InputKind::Constant ? in.constant : Tensor();
    if (!t.defined()) t = fwd.tensor_of(in.value);
    if (t.defined() && t.requires_grad()) {
      r.diff_inputs.push_back(static_cast<int>(i));
      diff_in.push_back(t);
    }
  }
  if (outs.empty() || diff_in.empty()) return;
  std::vector<Tensor> seeds;
  // Contiguous placeholders: the backward graph is captured for contiguous output gradients, and
  // its node makes the gradients it receives contiguous (compiled_backward.cpp).
  for (const Tensor& o : outs) seeds.push_back(ones(o.sizes(), TensorOptions(o.dtype(), o.device())));
  // Note [Fake data]: first over fake data (no kernel runs, no gradient is allocated); where that
  // pass cannot finish (a derivative that reads data on the host, or any other stop), once more for
  // real, which decides.
  // Not where the forward attached user code to the graph (autograd/apply_context.h): hooks and
  // custom functions would see fake gradients, and could keep them.
  for (const bool fake : {true, false}) {
    if (fake && !fake_ok) continue;
    CaptureStage bwd(seeds, {}, &fwd);
    std::vector<Tensor> grads;
    r.grad_defined.clear();
    try {
      std::optional<detail::FakeDataScope> fake_data;
      if (fake) fake_data.emplace();
      CaptureGuard guard(&bwd);
      grads = autograd::grad(outs, diff_in, seeds, /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
    } catch (const BackwardStopped&) {
      if (fake) continue;
      r.backward_stop_reason = bwd.result().stop_reason;
      return;
    } catch (const Error& e) {
      if (fake) continue;
      r.backward_stop_reason = std::string("the backward raised while captured: ") + e.what();
      return;
    }
    std::vector<Tensor> defined;
    for (const Tensor& t : grads) {
      r.grad_defined.push_back(t.defined());
      if (t.defined()) defined.push_back(t);
    }
    bwd.finish(defined);
    CaptureResult b = std::move(bwd.result());
    if (!b.complete) {
      if (fake) continue;
      r.backward_stop_reason = b.stop_reason;
      r.grad_defined.clear();
      return;
    }
    eliminate_dead_code(b.graph);
    r.backward = std::move(b.graph);
    r.saved = bwd.saved();
    r.has_backward = true;
    r.backward_over_fake_data = fake;
    return;
  }
}

}  // namespace

CaptureResult capture_program(const std::vector<Tensor>& args, const NamedTensors& params,
                              const std::function<std::vector<Tensor>()>& program, bool derive_backward) {
  TS_CHECK(!detail::t_capturing, ValueError, "compile: a capture is already running on this thread");
  CaptureStage stage(args, params);
  std::vector<Tensor> outputs;
  const uint64_t user_code = autograd::user_code_epoch();
  {
    CaptureGuard guard(&stage);
    outputs = program();
  }
  stage.finish(outputs);
  CaptureResult r = std::move(stage.result());
  if (!r.complete) return r;
  if (derive_backward) capture_backward(stage, r, autograd::user_code_epoch() == user_code);
  // The saved values become outputs of the forward graph after the program's own; DCE renumbers them.
  r.num_program_outputs = static_cast<int>(r.graph.outputs.size());
  if (r.has_backward)
    for (int v : r.saved) r.graph.outputs.push_back(v);
  eliminate_dead_code(r.graph);
  return r;
}

}  // namespace tessera::compiler
