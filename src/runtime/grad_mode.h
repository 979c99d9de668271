// Grad mode: whether ops record the autograd graph on this thread (PyTorch's torch.is_grad_enabled).
// Thread-local, so a no_grad scope on one thread does not affect another.
#pragma once

namespace tessera {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

}  // namespace tessera
