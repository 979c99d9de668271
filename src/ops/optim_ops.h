// The fused optimizer steps as ops of the table (_fused_sgd_, _fused_adam_; PyTorch's aten::_fused_sgd_
// and aten::_fused_adam_). The optimizers in src/optim call these, never a kernel slot, so that the
// profiler and the tracer see the step like any other op (Note [Scoped kernels]). Each takes the lists
// of one device (the optimizer groups its parameters by device), checks that they line up, runs the
// kernel once and bumps the version counter of every tensor it wrote.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/optim_kernel.h"
#include "tessera/tensor.h"

namespace tessera {

// Whether the fused kernel can take `p`: the slot has a kernel for p's device type and p is a
// contiguous float32 or float64 tensor. Otherwise the optimizer takes its composite path.
bool fused_sgd_supported(const Tensor& p);
bool fused_adam_supported(const Tensor& p);

// The update of optim_kernel.h's SGDKernelFn on lists of one device.
void fused_sgd_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
                const std::vector<uint8_t>& new_buffer, const SGDKernelParams& p);

// The update of optim_kernel.h's AdamKernelFn (Adam and AdamW) on lists of one device.
void fused_adam_(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                 const TensorList& exp_avg_sqs, const TensorList& max_exp_avg_sqs, const std::vector<int64_t>& steps,
                 const AdamKernelParams& p);

}  // namespace tessera
