// OpNode: the graph node of one recorded op call (Note [Autograd stage]). It holds the op's OpId,
// its registered derivative, the saved inputs/outputs the derivative asked for, and the op's attrs.
#pragma once
#include <string>
#include <vector>

#include "autograd/graph.h"
#include "autograd/saved_tensor.h"
#include "ops/autograd_hook.h"

namespace tessera::autograd {

// What a derivative sees.
struct BackwardContext {
  OpId op;
  std::vector<Tensor> inputs;         // saved inputs (undefined when the derivative saves none)
  std::vector<Tensor> outputs;        // saved outputs (likewise)
  const OpAttrs& attrs;
  std::vector<bool> needs_grad;       // per input
  std::vector<SlotMeta> input_meta;   // sizes, dtype, device of every input
  // Note [Batched gradients] (graph.h): the number of samples when grads carry a leading batch dim
  // (only for a derivative registered as batched), -1 otherwise.
  int64_t batch = -1;
};

// grads[i] is the gradient of output i (zeros where nothing flowed). Returns one gradient per input;
// undefined where !needs_grad[i] or the input gets no gradient. A gradient may have the broadcast
// shape and the compute dtype: the engine reduces and casts it to the input's (sum_to).
using DerivativeFn = std::vector<Tensor> (*)(const BackwardContext& ctx, const std::vector<Tensor>& grads);

struct Derivative {
  DerivativeFn fn = nullptr;
  bool save_inputs = false;
  bool save_outputs = false;
  // fn takes batched gradients as they come (Note [Batched gradients]): pointwise formulas, whose
  // operands broadcast against the leading batch dim, and formulas that read ctx.batch. Otherwise a
  // batched backward calls fn once per sample.
  bool batched = false;
};

// Registers the derivative of `op` (explicitly, at start-up: derivatives/register.cpp). The registry
// is an array indexed by OpId; registering an op twice, or one whose row says it has no formula, is a
// programming error and throws.
void register_derivative(OpId op, Derivative d);
const Derivative* find_derivative(OpId op);

class OpNode final : public GraphNode {
 public:
  OpNode(OpId op, const Derivative* d, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
         OpAttrs&& attrs);
  std::string name() const override;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::vector<Tensor> apply_batched(std::vector<Tensor>&& grads, int64_t batch) override;
  void release_saved() override;
  void save_outputs(const std::vector<Tensor>& outputs);  // after the outputs got their grad_fn

 private:
  OpId op_;
  const Derivative* derivative_;
  std::vector<SavedTensor> saved_inputs_, saved_outputs_;
  std::vector<SlotMeta> input_meta_;
  std::vector<bool> needs_grad_;
  OpAttrs attrs_;
  // Note [Saved tensor hooks]: under hooks, attrs_.tensors (indices, masks, saved statistics and
  // activations of fused ops) are saved like the inputs and outputs, and put back for the derivative.
  std::vector<SavedTensor> saved_attr_tensors_;
  bool attr_tensors_saved_ = false;

  // Unpacks the saved tensors (once per call); `scratch` holds the attributes with their tensors
  // unpacked, when they were saved.
  BackwardContext context(OpAttrs& scratch) const;
};

// Installs the autograd stage into the op layer (called at library start-up).
void install_autograd_stage();

}  // namespace tessera::autograd
