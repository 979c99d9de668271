// The determinism switch (PyTorch: torch.use_deterministic_algorithms). With it on, every op that has a
// faster order-dependent kernel (floating-point atomics) takes its deterministic variant instead:
// sorted accumulation for index_put / index_add / scatter_add and so embedding's backward, a gather
// for max_pool2d's backward, only the cuDNN convolution algorithms marked deterministic, and the fused
// attention's backward through cuDNN's deterministic graph or tessera's own kernels. Two runs
// of the same program then give bitwise-equal results. Every other kernel is deterministic already (fixed
// reduction orders, no float atomics), so no op raises for want of a variant. Off by default;
// TESSERA_DETERMINISTIC=1 in the environment turns it on at start-up. CPU kernels are deterministic
// either way.
#pragma once

namespace tessera {

void set_deterministic(bool on);
bool is_deterministic();

}  // namespace tessera
