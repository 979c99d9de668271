// What the backward engine (engine.cpp) lets layers above know about the pass running on this
// thread.
#pragma once

namespace tessera::autograd {

// Whether the innermost backward pass running on this thread was started by autograd::grad (its
// gradients are returned, never accumulated into .grad). Activation checkpointing refuses to
// recompute inside one, as PyTorch's reentrant checkpoint does (utils/checkpoint.h).
bool in_grad_call();

}  // namespace tessera::autograd
