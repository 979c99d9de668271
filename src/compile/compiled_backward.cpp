// The joint graph's autograd node (compiled_backward.h).
#include "compile/compiled_backward.h"

#include "autograd/apply_context.h"
#include "autograd/graph.h"
#include "runtime/grad_mode.h"
#include "tessera/functions.h"

namespace tessera::compiler {
namespace {

// Whether output k shares its storage with another output (a view of an intermediate).
bool shares_storage(const Tensor& o, const std::vector<Tensor>& outputs, size_t k) {
  for (size_t j = 0; j < outputs.size(); ++j)
    if (j != k && outputs[j].impl()->storage() == o.impl()->storage()) return true;
  return false;
}

class CompiledBackwardNode final : public autograd::GraphNode {
 public:
  CompiledBackwardNode(std::shared_ptr<const BackwardProgram> program, std::vector<Tensor> saved)
      : program_(std::move(program)), saved_(std::move(saved)) {}

  std::string name() const override { return "CompiledFunctionBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    TS_CHECK(!released_, ValueError, "CompiledFunctionBackward: trying to backward through the graph a second time "
             "(or directly access saved tensors after they have already been freed); specify retain_graph=true",
             failed_ ? " (an earlier backward through this node raised after it had freed them)" : "");
    TS_CHECK(!is_grad_enabled(), NotImplementedError,
             "CompiledFunctionBackward: a graph of the backward (create_graph=true) through a compiled function is "
             "not supported yet; call the function eagerly, or compile it with grad mode off");
    // The graph was captured for contiguous output gradients (Note [Joint graph]); one nobody fed is zero.
    for (size_t k = 0; k < grads.size(); ++k)
      grads[k] = grads[k].defined() ? grads[k].contiguous()
                                    : zeros(slots[k].sizes, TensorOptions(slots[k].dtype, slots[k].device));
    // Note [Saved inputs released at their last use]: when the engine drops the saved tensors after
    // this call anyway, they go in by move and each is freed once the graph has read it.
    std::vector<Tensor> defined;
    if (autograd::releases_saved_after_apply()) {
      std::vector<Tensor> saved = std::move(saved_);
      saved_.clear();
      released_ = true;  // the tensors are gone even if the graph raises: a retry says so
      failed_ = true;
      defined = execute(program_->graph, program_->plan, std::move(grads), {}, std::move(saved));
      failed_ = false;
    } else {
      defined = execute(program_->graph, program_->plan, std::move(grads), {}, saved_);
    }
    std::vector<Tensor> out(next_edges.size());
    size_t j = 0;
    for (size_t i = 0; i < out.size(); ++i)
      if (program_->grad_defined[i]) out[i] = defined.at(j++);
    return out;
  }

  void release_saved() override {
    saved_.clear();
    released_ = true;
  }

 private:
  std::shared_ptr<const BackwardProgram> program_;
  std::vector<Tensor> saved_;
  bool released_ = false;
  bool failed_ = false;  // a backward that had moved the saved tensors in raised
};

}  // namespace

void attach_backward(std::shared_ptr<const BackwardProgram> program, const std::vector<Tensor>& outputs,
                     const std::vector<Tensor>& inputs, std::vector<Tensor> saved) {
  auto node = std::make_shared<CompiledBackwardNode>(std::move(program), std::move(saved));
  for (const Tensor& in : inputs) node->next_edges.push_back(autograd::gradient_edge(in));
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& o = outputs[k];
    node->slots.push_back(autograd::SlotMeta{o.sizes(), o.dtype(), o.device()});
    autograd::AutogradMeta& m = autograd::ensure_meta(o);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = static_cast<uint32_t>(k);
    // Its history is the compiled node's: a view it may be of an executor buffer is not tracked, so
    // an in-place write to it is refused rather than given a regenerated history (Note [View tracking]).
    m.is_view = m.is_view || m.view_base != nullptr || shares_storage(o, outputs, k);
    m.view_base.reset();
  }
}

}  // namespace tessera::compiler
