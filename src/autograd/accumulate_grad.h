// AccumulateGrad: the node at a leaf. Runs the leaf's hooks, adds the incoming gradient into
// leaf.grad() (in place when it can, a new tensor under create_graph so the sum stays
// differentiable), then runs the post-accumulate hooks.
#pragma once
#include "autograd/graph.h"

namespace tessera::autograd {

class AccumulateGrad final : public GraphNode {
 public:
  explicit AccumulateGrad(const Tensor& leaf);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const Tensor& variable() const { return leaf_; }

 private:
  Tensor leaf_;  // shares the leaf's TensorImpl
};

}  // namespace tessera::autograd
