// What the backward engine (engine.cpp) lets layers above know about the pass running on this
// thread.
#pragma once
#include <cstdint>

namespace tessera::autograd {

// Whether the innermost backward pass running on this thread was started by autograd::grad (its
// gradients are returned, never accumulated into .grad). Activation checkpointing refuses to
// recompute inside one, as PyTorch's reentrant checkpoint does (utils/checkpoint.h).
bool in_grad_call();

// The id of the innermost backward pass running on this thread (each pass has its own, never
// reused), or -1 outside one, as PyTorch's _current_graph_task_id. Non-reentrant checkpointing keys
// its recomputations by it (utils/checkpoint.h).
int64_t current_graph_task_id();
// Whether that pass is batched (autograd::grad with is_grads_batched, Note [Batched gradients]).
bool in_batched_backward();

}  // namespace tessera::autograd
