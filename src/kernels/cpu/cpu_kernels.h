// Registration entry points of the CPU kernel families. Each family file defines its register_*()
// and fills the slots of ops/<family>_kernel.h for DeviceType::CPU.
#pragma once

namespace tessera::cpu {

void register_copy();
void register_threads();

// family elementwise: declare register_elementwise() on the next line
void register_elementwise();

// family reduce: declare register_reduce() on the next line
void register_reduce();

// family linalg: declare register_linalg() on the next line
void register_linalg();

// family index: declare register_index() on the next line
void register_index();

// family shape_ops: declare register_shape_ops() on the next line
void register_shape_ops();
void register_range();  // range.cpp: arange

// family random: declare register_random() on the next line
void register_random();

// family optim: declare register_optim() on the next line
void register_optim();

// family conv: declare register_conv() (and register_pool()) on the next line
void register_conv();
void register_pool();
void register_loss();  // loss.cpp: cross-entropy fused with log_softmax

// family norm: layer norm and RMS norm (norm.cpp)
void register_norm();
// batch_norm.cpp: native_batch_norm
void register_batch_norm();
void register_attention();  // attention.cpp: flash attention (reference for the GPU kernels)
void register_amp();  // amp.cpp: the gradient scaler's unscale and scale update
void register_foreach();  // foreach.cpp: per-tensor norms of a list, in-place multiply of a list

void register_cpu_kernels();  // all of the above; called once at library start-up

}  // namespace tessera::cpu
