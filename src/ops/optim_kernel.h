// Kernel slots of the optim family: fused optimizer updates, one pass over each parameter's memory.
//
// Each slot takes lists of tensors (one entry per parameter of a group) so that a backend may run a
// whole list in one multi-tensor launch; the CPU backend loops over the list and splits each tensor
// over threads. Contract for every entry i: params[i], grads[i] and the state tensors are contiguous,
// of one floating dtype and one sizes, on one device; the kernel updates params[i] and the state
// tensors in place. Hyperparameters arrive in float64 and are rounded to the parameter's dtype the way
// PyTorch's tensor-scalar ops round them, and the arithmetic follows PyTorch's single-tensor algorithm
// op by op (its fused multiply-adds included), so float32 results agree with PyTorch's to rounding
// (the CPU kernels bit for bit). The caller bumps the version counters of what the kernel writes.
//
// The slots are inline variables (constant-initialized: KernelSlot's constructor is constexpr), so
// this header alone declares and defines them for the optimizer layer and the backends.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

struct SGDKernelParams {
  double lr = 0;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

// d = (maximize ? -grad : grad) + weight_decay * param;
// with momentum != 0: buf = new_buffer[i] ? d : momentum * buf + (1 - dampening) * d,
//                     d = nesterov ? d + momentum * buf : buf;
// param -= lr * d. momentum_buffers is empty when momentum == 0.
using SGDKernelFn = void(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
                         const std::vector<uint8_t>& new_buffer, const SGDKernelParams& p);
inline KernelSlot<SGDKernelFn> sgd_kernel("sgd");

struct AdamKernelParams {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW
  bool amsgrad = false;
  bool maximize = false;
};

// g = maximize ? -grad : grad; AdamW: param *= 1 - lr * weight_decay; Adam: g += weight_decay * param;
// exp_avg = beta1 * exp_avg + (1 - beta1) * g; exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g;
// amsgrad: max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq), used in place of exp_avg_sq below;
// param -= lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps).
// steps[i] is the parameter's step count after this step (>= 1); max_exp_avg_sqs is empty unless
// amsgrad.
using AdamKernelFn = void(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                          const TensorList& exp_avg_sqs, const TensorList& max_exp_avg_sqs,
                          const std::vector<int64_t>& steps, const AdamKernelParams& p);
inline KernelSlot<AdamKernelFn> adam_kernel("adam");

}  // namespace tessera
