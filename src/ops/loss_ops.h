// Cross-entropy fused with log_softmax, as ops of their own (meta function, kernel, autograd record):
// nn::functional::cross_entropy builds on them for class-index targets, and the derivative in
// autograd/derivatives/loss.cpp calls the backward op. Not part of the public API.
//
// Shapes follow PyTorch's cross_entropy: logits (C) with a 0-dim target, (N, C) with target (N), or
// (N, C, d1, ...) with target (N, d1, ...). The class dim is moved last and the rest flattened into
// rows (M = target.numel()), so every kernel sees contiguous (M, C) logits (ops/loss_kernel.h).
#pragma once
#include <cstdint>
#include <utility>

#include "tessera/tensor.h"

namespace tessera {

// {loss, lse}, both of target's shape and of the accumulation dtype (float64 for float64 logits,
// float32 otherwise): loss is the per-element loss before any reduction (0 where the target is
// ignore_index), lse the logsumexp of the element's logits over the classes (saved for backward).
// target: class indices of an integer dtype; weight: (C) floating class weights, or undefined.
// Raises IndexError for a target outside [0, C) that is not ignore_index; with classes >= 0, outside
// [0, classes) (classes <= C: rows padded past their classes, Note [Padded logits rows]). Records
// "cross_entropy_loss_rows" with input {logits} and output {loss} (Note [Autograd stage]).
std::pair<Tensor, Tensor> cross_entropy_loss_rows(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                                  int64_t ignore_index, double label_smoothing, int64_t classes = -1);

// The gradient of the logits: grad (target's shape) times d(loss)/d(logits), from the logits, the
// lse saved by the forward and the same target, weight and options. Of logits' shape and dtype.
// Records nothing: its derivative calls it with grad mode off only.
Tensor cross_entropy_loss_rows_backward(const Tensor& grad, const Tensor& logits, const Tensor& target,
                                        const Tensor& weight, const Tensor& lse, int64_t ignore_index,
                                        double label_smoothing, int64_t classes = -1);

}  // namespace tessera
