// Recording op calls into the graph (the autograd stage) and running their derivatives.
#include "autograd/op_node.h"

#include "autograd/view_tracking.h"

#include <array>
#include <cctype>

namespace tessera::autograd {
namespace {

// One slot per row of the op table; fn == nullptr where no derivative is registered.
std::array<Derivative, kNumOps>& registry() {
  static std::array<Derivative, kNumOps> r{};
  return r;
}

class Stage final : public AutogradStage {
 public:
  void record(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
              OpAttrs&& attrs) override {
    const Derivative* d = find_derivative(op);
    TS_CHECK(d != nullptr, NotImplementedError, op_name(op), ": the derivative of this op is not implemented");
    // Note [Typed attributes]: the call carries the struct its row names (a programming error if not).
    TS_CHECK(attrs.kind() == op_info(op).attrs, ValueError, op_name(op), ": recorded with ",
             OpAttrs::attrs_kind_name(attrs.kind()), " attributes, but the op table says ",
             OpAttrs::attrs_kind_name(op_info(op).attrs));
    if (op_info(op).kind == OpKind::InPlace && outputs.size() == 1 && is_tracked_view(outputs[0])) {
      record_through_view(op, d, inputs, outputs[0], std::move(attrs));
      return;
    }
    auto node = std::make_shared<OpNode>(op, d, inputs, outputs, std::move(attrs));
    // Outputs of a view op learn their base from track_views (Note [View tracking]).
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& out = outputs[i];
      if (!out.defined() || !is_floating_point(out.dtype())) continue;
      set_history(ensure_meta(out), node, static_cast<uint32_t>(i));
    }
    node->save_outputs(outputs);
  }

  void track_views(const Tensor& self, const std::vector<Tensor>& views, bool multi_output) override {
    autograd::track_views(self, views, multi_output);
  }
  void check_inplace(const char* op, const Tensor& self) override { check_inplace_view(op, self); }

 private:
  // In-place op `op` wrote tracked view `self` (Note [View tracking]): its node goes into the base's
  // CopySlices. Its derivative must not read its output (the view's new value has the base's
  // history, not the node's): the in-place forms whose derivative does (relu_) write views through
  // copy_ (tensor_methods.cpp).
  static void record_through_view(OpId op, const Derivative* d, const std::vector<Tensor>& inputs, const Tensor& self,
                                  OpAttrs&& attrs) {
    TS_CHECK(!d->save_outputs, ValueError, op_name(op), ": its derivative reads its output, which an in-place "
             "write through a view cannot provide; this in-place form must write views through copy_");
    auto fn = std::make_shared<OpNode>(op, d, inputs, std::vector<Tensor>{self}, std::move(attrs));
    std::vector<size_t> self_inputs;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].is_same(self)) self_inputs.push_back(i);
    rebase_view(self, std::move(fn), self_inputs);
  }
};

Stage g_stage;

}  // namespace

void register_derivative(OpId op, Derivative d) {
  Derivative& slot = registry()[static_cast<size_t>(op)];
  TS_CHECK(op_info(op).grad == OpGrad::Formula, ValueError, "register_derivative: ", op_name(op),
           " is not marked differentiable by a formula in the op table (ops/table/op_table.def)");
  TS_CHECK(slot.fn == nullptr, ValueError, "register_derivative: ", op_name(op), " is registered twice");
  TS_CHECK(d.fn != nullptr, ValueError, "register_derivative: ", op_name(op), ": null derivative");
  slot = d;
}

const Derivative* find_derivative(OpId op) {
  const Derivative& d = registry()[static_cast<size_t>(op)];
  return d.fn ? &d : nullptr;
}

void install_autograd_stage() { set_autograd_stage(&g_stage); }

OpNode::OpNode(OpId op, const Derivative* d, const std::vector<Tensor>& inputs,
               const std::vector<Tensor>& outputs, OpAttrs&& attrs)
    : op_(op), derivative_(d), attrs_(std::move(attrs)) {
  for (const Tensor& in : inputs) {
    next_edges.push_back(gradient_edge(in));
    needs_grad_.push_back(next_edges.back().valid());
    input_meta_.push_back(in.defined() ? SlotMeta{in.sizes(), in.dtype(), in.device()} : SlotMeta{});
    if (d->save_inputs) saved_inputs_.emplace_back(in, false);
  }
  for (const Tensor& out : outputs)
    slots.push_back(out.defined() ? SlotMeta{out.sizes(), out.dtype(), out.device()} : SlotMeta{});
  if (!attrs_.tensors.empty() && current_saved_tensor_hooks()) {
    for (const Tensor& t : attrs_.tensors) saved_attr_tensors_.emplace_back(t, false);
    attrs_.tensors.clear();
    attr_tensors_saved_ = true;
  }
}

void OpNode::save_outputs(const std::vector<Tensor>& outputs) {
  if (!derivative_->save_outputs) return;
  for (const Tensor& out : outputs) saved_outputs_.emplace_back(out, true);
}

std::string OpNode::name() const {
  // "index_select" -> "IndexSelectBackward0", as PyTorch names its nodes.
  std::string n;
  bool up = true;
  for (const char* p = op_name(op_); *p; ++p) {
    if (*p == '_') { up = true; continue; }
    n += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(*p))) : *p;
    up = false;
  }
  return n + "Backward0";
}

BackwardContext OpNode::context(OpAttrs& scratch) const {
  if (attr_tensors_saved_) {
    scratch = attrs_;
    for (const SavedTensor& s : saved_attr_tensors_) scratch.tensors.push_back(s.unpack(name()));
  }
  BackwardContext ctx{op_, {}, {}, attr_tensors_saved_ ? scratch : attrs_, needs_grad_, input_meta_};
  if (saved_inputs_.empty() && saved_outputs_.empty()) return ctx;
  const std::string nm = name();
  for (const SavedTensor& s : saved_inputs_) ctx.inputs.push_back(s.unpack(nm));
  for (const SavedTensor& s : saved_outputs_) ctx.outputs.push_back(s.unpack(nm));
  return ctx;
}

std::vector<Tensor> OpNode::apply(std::vector<Tensor>&& grads) {
  OpAttrs scratch;
  std::vector<Tensor> out = derivative_->fn(context(scratch), grads);
  out.resize(next_edges.size());
  return out;
}

// Note [Batched gradients]: the saved tensors are unpacked once for all samples.
std::vector<Tensor> OpNode::apply_batched(std::vector<Tensor>&& grads, int64_t batch) {
  OpAttrs scratch;
  BackwardContext ctx = context(scratch);
  std::vector<Tensor> out;
  if (derivative_->batched) {
    ctx.batch = batch;
    out = derivative_->fn(ctx, grads);
  } else {
    std::vector<std::vector<Tensor>> samples;
    samples.reserve(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> g(grads.size());
      for (size_t s = 0; s < grads.size(); ++s)
        if (grads[s].defined()) g[s] = grads[s].select(0, b);
      samples.push_back(derivative_->fn(ctx, g));
    }
    out = stack_samples(samples);
  }
  out.resize(next_edges.size());
  return out;
}

void OpNode::release_saved() {
  for (SavedTensor& s : saved_inputs_) s.reset();
  for (SavedTensor& s : saved_outputs_) s.reset();
  for (SavedTensor& s : saved_attr_tensors_) s.reset();
}

}  // namespace tessera::autograd
