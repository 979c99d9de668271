// The autograd node of a joint graph (Note [Joint graph] in capture.h): the forward graph ran without
// autograd; this one node stands for all of it, and its backward runs the captured backward graph on
// the output gradients and the values the forward saved.
#pragma once
#include <memory>
#include <vector>

#include "compile/executor.h"
#include "compile/graph.h"

namespace tessera::compiler {

struct BackwardProgram {
  Graph graph;
  ExecutionPlan plan;
  std::vector<bool> grad_defined;  // per differentiable input: whether the graph returns its gradient
};

// Makes `outputs` (the differentiable outputs of one call) the outputs of one autograd node whose
// backward runs `program` with `saved`; `inputs` are the inputs that require grad, in the order of
// the backward's gradients.
void attach_backward(std::shared_ptr<const BackwardProgram> program, const std::vector<Tensor>& outputs,
                     const std::vector<Tensor>& inputs, std::vector<Tensor> saved);

}  // namespace tessera::compiler
