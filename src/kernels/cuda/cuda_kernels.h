// Registration entry points of the CUDA kernel families. Each family file (kernels/cuda/<family>.cu)
// defines its register_*() and fills the slots of ops/<family>_kernel.h for DeviceType::CUDA. Plain
// C++ (no CUDA types), so that tessera_init.cpp can include it.
#pragma once

namespace tessera::cuda {

void register_copy();         // copy.cu: copy_ within a GPU, between GPUs and to/from the host; fill_
void register_elementwise();  // unary.cu, binary.cu, ternary.cu, softmax.cu, allclose
void register_reduce();       // reduce.cu, arg/var/logsumexp, scan.cu
void register_linalg();       // matmul.cu (cuBLASLt)
void register_index();        // index.cu, gather/scatter, masked, nonzero, one_hot, sort.cu, unique
void register_shape_ops();    // shape_ops.cu (index_map, tril/triu)
void register_random();       // random.cu (Philox, the same bits as the CPU)
void register_optim();        // optim.cu (fused multi-tensor SGD/Adam)
void register_conv();         // conv.cu (cuDNN), pool.cu
void register_norm_forward();   // norm_fwd.cu (layer norm, RMS norm, add + layer norm)
void register_norm_backward();  // norm_bwd.cu
void register_batch_norm();   // batch_norm.cu (cuDNN)
void register_loss();         // loss.cu (cross-entropy fused with log_softmax)
void register_attention();    // attention_fwd.cu, attention_bwd.cu (flash attention)
void register_fused();       // fused.cu (linear + GELU epilogue, GELU backward, weight + bias gradient)
void register_amp();          // amp.cu (the gradient scaler's fused unscale and scale update)
void register_foreach();      // foreach.cu (multi-tensor norms and in-place multiply: gradient clipping)

void register_cuda_kernels();  // all of the above; called once at library start-up

}  // namespace tessera::cuda
