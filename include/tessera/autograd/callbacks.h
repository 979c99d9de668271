// Callbacks at the end of a backward pass, as PyTorch's Variable._execution_engine.queue_callback:
// what a gradient hook queues runs once the pass it belongs to has run its last node (Note [Final
// callbacks] in src/autograd/engine.cpp). DistributedDataParallel queues its wait for the gradient
// reductions this way from the first gradient hook of an iteration.
#pragma once
#include <functional>

namespace tessera::autograd {

// Queues `callback` on the innermost backward pass running on this thread. ValueError outside a
// backward pass.
void queue_callback(std::function<void()> callback);
// Whether a backward pass is running on this thread (a hook or a node is being called by it).
bool in_backward_pass();

}  // namespace tessera::autograd
