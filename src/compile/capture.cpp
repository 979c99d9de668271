// The capture stage (capture.h): turns trace records into nodes, resolving every tensor by Note
// [Capture provenance], and watches for what it cannot see.
#include "compile/capture.h"

#include <algorithm>
#include <iterator>
#include <thread>
#include <unordered_map>

#include "compile/node_runner.h"
#include "ops/op_scope.h"
#include "ops/trace_hook.h"
#include "runtime/storage.h"
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

bool same_layout(const TensorMeta& a, const TensorMeta& b) {
  return a.sizes == b.sizes && a.strides == b.strides && a.offset == b.offset && a.dtype == b.dtype;
}

class CaptureStage final : public TracerStage {
 public:
  CaptureStage(const std::vector<Tensor>& args, const NamedTensors& params)
      : thread_(std::this_thread::get_id()), first_serial_(Storage::next_serial()) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].defined() || impl_value_.count(args[i].impl())) continue;
      add_input(args[i], InputKind::Argument, static_cast<int64_t>(i), "");
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& [name, t] = params[i];
      if (!t.defined() || impl_value_.count(t.impl())) continue;
      add_input(t, InputKind::Parameter, static_cast<int64_t>(i), name);  // bound by position
    }
  }

  CaptureResult& result() { return result_; }
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
    if (!frames_.back().kernel) frames_.back().kernel = kernel;
  }
  void on_host_read(const char* what) override {
    if (!mine()) return;
    stop(std::string("graph break: ") + what, true);
  }
  void on_record(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                 const OpAttrs& attrs) override {
    if (!mine() || stopped()) return;
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
      n.inputs.push_back(self);  // kFresh (-1): the node allocates it
    }
    for (const Tensor& t : inputs) {
      if (!t.defined()) {
        n.inputs.push_back(-1);
        continue;
      }
      // The self of an in-place op that overwrites it whole is read by nothing else.
      const int v = resolve(t, false, std::string(op_name(op)) + "'s input");
      if (v == kStop) return failure_;
      n.inputs.push_back(v);
    }
    std::vector<Tensor> outs = outputs;
    for (size_t i = 0; i < attrs.tensors.size(); ++i) {
      const Tensor& t = attrs.tensors[i];
      const AttrTensor role = replay->all_inputs ? AttrTensor::Input
                              : i < replay->attr_tensors.size() ? replay->attr_tensors[i]
                                                                : AttrTensor::Ignored;
      if (role == AttrTensor::Output) {
        outs.push_back(t);
      } else if (role == AttrTensor::Input) {
        if (!t.defined()) {
          n.inputs.push_back(-1);
          continue;
        }
        const int v = resolve(t, false, std::string(op_name(op)) + "'s index or mask");
        if (v == kStop) return failure_;
        n.inputs.push_back(v);
      }
    }
    n.attrs = attrs;
    n.attrs.tensors.clear();
    if (!frames_.empty()) {
      prune_nested(frames_.back().start, n.inputs);
      frames_.back().start = static_cast<int>(graph().nodes.size()) + 1;
    }
    const int node = static_cast<int>(graph().nodes.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!outs[k].defined()) return std::string(op_name(op)) + " recorded an undefined output";
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
    if (start >= static_cast<int>(nodes.size())) return;
    std::vector<char> needed(graph().values.size(), 0);
    for (int v : record_inputs)
      if (v >= 0) needed[v] = 1;
    std::vector<char> keep(nodes.size(), 0);
    for (int i = static_cast<int>(nodes.size()) - 1; i >= start; --i) {
      bool used = false;
      for (int v : nodes[i].outputs) used = used || needed[v];
      if (!used) continue;
      keep[i] = 1;
      for (int v : nodes[i].inputs)
        if (v >= 0) needed[v] = 1;
    }
    std::vector<char> dropped_value(graph().values.size(), 0);
    std::vector<Node> kept(nodes.begin(), nodes.begin() + start);
    for (int i = start; i < static_cast<int>(nodes.size()); ++i) {
      if (keep[i]) {
        for (size_t k = 0; k < nodes[i].outputs.size(); ++k) graph().values[nodes[i].outputs[k]].node = static_cast<int>(kept.size());
        kept.push_back(std::move(nodes[i]));
      } else {
        for (int v : nodes[i].outputs) dropped_value[v] = 1;
      }
    }
    nodes = std::move(kept);
    for (auto it = impl_value_.begin(); it != impl_value_.end();)
      it = dropped_value[it->second] ? impl_value_.erase(it) : std::next(it);
    for (auto& [storage, vs] : storage_values_)
      vs.erase(std::remove_if(vs.begin(), vs.end(), [&](int v) { return dropped_value[v] != 0; }), vs.end());
  }

  void bind(const Tensor& t, int v) {
    keep_.push_back(t);  // the impl stays alive, so its address is never reused during the capture
    impl_value_[t.impl()] = v;
    storage_values_[t.impl()->storage().get()].push_back(v);
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
    bind(t, v);
  }

  // Note [Capture provenance]. Returns the value, -1 for a fresh buffer (fresh_ok), or kStop.
  int resolve(const Tensor& t, bool fresh_ok, const std::string& what) {
    auto it = impl_value_.find(t.impl());
    if (it != impl_value_.end()) return it->second;  // rule 1
    const TensorMeta m = TensorMeta::of(t);
    Storage* storage = t.impl()->storage().get();
    auto st = storage_values_.find(storage);
    if (st != storage_values_.end()) {  // rule 2
      for (int v : st->second)
        if (same_layout(graph().values[v].meta, m)) {
          keep_.push_back(t);
          impl_value_[t.impl()] = v;
          return v;
        }
      failure_ = what + " (" + to_string(m) + ") is a view of a tensor in the graph made without an op";
      return kStop;
    }
    if (storage->serial() < first_serial_) {  // rule 3
      add_input(t, InputKind::Constant, 0, "");
      return impl_value_[t.impl()];
    }
    if (fresh_ok && m.offset == 0) {  // rule 4: the node allocates it; later aliases resolve by rule 2
      fresh_pending_.push_back(t);
      return -1;
    }
    failure_ = what + " (" + to_string(m) + ") was made inside the program by something the compiler cannot see";
    return kStop;
  }

  std::thread::id thread_;
  uint64_t first_serial_;
  CaptureResult result_;
  std::vector<Frame> frames_;
  std::unordered_map<const TensorImpl*, int> impl_value_;
  std::unordered_map<const Storage*, std::vector<int>> storage_values_;
  std::vector<Tensor> keep_, fresh_pending_;
  std::string failure_;  // why the last resolve() failed
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

CaptureResult capture_program(const std::vector<Tensor>& args, const NamedTensors& params,
                              const std::function<std::vector<Tensor>()>& program) {
  TS_CHECK(!detail::t_capturing, ValueError, "compile: a capture is already running on this thread");
  CaptureStage stage(args, params);
  std::vector<Tensor> outputs;
  {
    CaptureGuard guard(&stage);
    outputs = program();
  }
  stage.finish(outputs);
  CaptureResult r = std::move(stage.result());
  if (r.complete) eliminate_dead_code(r.graph);
  return r;
}

}  // namespace tessera::compiler
