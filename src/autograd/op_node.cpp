// Recording op calls into the graph (the autograd stage) and running their derivatives.
#include "autograd/op_node.h"

#include <cctype>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace tessera::autograd {
namespace {

std::unordered_map<std::string, Derivative>& registry() {
  static std::unordered_map<std::string, Derivative> r;
  return r;
}

// Ops whose output aliases their input: an in-place op on such an output would have to rewrite the
// base's history too, which is refused for now (see check_inplace in tensor_autograd.cpp).
bool is_view_op(const std::string& op) {
  static const std::unordered_set<std::string> views = {
      "view", "reshape_alias", "permute", "transpose", "expand", "squeeze", "unsqueeze", "slice",
      "select", "as_strided", "diagonal", "unfold", "split", "unbind"};
  return views.count(op) > 0;
}

class Stage final : public AutogradStage {
 public:
  void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
              OpAttrs&& attrs) override {
    const Derivative* d = find_derivative(op);
    TS_CHECK(d != nullptr, NotImplementedError, op, ": the derivative of this op is not implemented");
    auto node = std::make_shared<OpNode>(op, d, inputs, outputs, std::move(attrs));
    const bool view = is_view_op(op);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& out = outputs[i];
      if (!out.defined() || !is_floating_point(out.dtype())) continue;
      AutogradMeta& m = ensure_meta(out);
      m.requires_grad = true;
      m.grad_fn = node;
      m.output_nr = static_cast<uint32_t>(i);
      m.is_view = m.is_view || view;
    }
    node->save_outputs(outputs);
  }
};

Stage g_stage;

}  // namespace

void register_derivative(const std::string& op, Derivative d) { registry()[op] = d; }

const Derivative* find_derivative(const std::string& op) {
  auto it = registry().find(op);
  return it == registry().end() ? nullptr : &it->second;
}

void install_autograd_stage() { set_autograd_stage(&g_stage); }

OpNode::OpNode(const char* op, const Derivative* d, const std::vector<Tensor>& inputs,
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
}

void OpNode::save_outputs(const std::vector<Tensor>& outputs) {
  if (!derivative_->save_outputs) return;
  for (const Tensor& out : outputs) saved_outputs_.emplace_back(out, true);
}

std::string OpNode::name() const {
  // "index_select" -> "IndexSelectBackward0", as PyTorch names its nodes.
  std::string n;
  bool up = true;
  for (const char* p = op_; *p; ++p) {
    if (*p == '_') { up = true; continue; }
    n += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(*p))) : *p;
    up = false;
  }
  return n + "Backward0";
}

std::vector<Tensor> OpNode::apply(std::vector<Tensor>&& grads) {
  const std::string nm = name();
  BackwardContext ctx{op_, {}, {}, attrs_, needs_grad_, input_meta_};
  for (const SavedTensor& s : saved_inputs_) ctx.inputs.push_back(s.unpack(nm));
  for (const SavedTensor& s : saved_outputs_) ctx.outputs.push_back(s.unpack(nm));
  std::vector<Tensor> out = derivative_->fn(ctx, grads);
  out.resize(next_edges.size());
  return out;
}

void OpNode::release_saved() {
  for (SavedTensor& s : saved_inputs_) s.reset();
  for (SavedTensor& s : saved_outputs_) s.reset();
}

}  // namespace tessera::autograd
