// Scaled-dot-product attention through cuDNN's fused flash attention engines (attention_cudnn.cpp):
// the first choice of the GPU attention kernels (attention_fwd.cu, attention_bwd.cu) where cuDNN
// has an engine for the case, with tessera's own flash kernels as the fallback. The arguments are
// those of the kernel slots (ops/attention_kernel.h, Note [Flash attention layout]).
#pragma once
#include <cstdint>
#include <string>

#include "ops/attention_kernel.h"

namespace tessera::cuda {

// Runs the forward (out, lse <- q, k, v) through cuDNN and returns true, or returns false having run
// nothing: cuda::cudnn_sdp_enabled() is off, the dtype is not float16 / bfloat16, the GPU is older
// than sm_80, a pointer is not 16-byte aligned, the stream is capturing a CUDA graph and no plan for
// the case exists yet (building one is not capturable), or cuDNN has no engine for the case (the
// verdict is cached per case; attention_cudnn_last_failure() says why).
bool attention_forward_cudnn(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionParams& p);

// The backward (dq, dk, dv <- dout, q, k, v, out, lse), on the same terms; with the determinism switch
// on, only through an engine cuDNN marks deterministic.
bool attention_backward_cudnn(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const AttentionParams& p);

// How many forward and backward calls cuDNN has run in this process, and why the last case it
// declined was declined (empty if none was): for tests and diagnostics.
int64_t attention_cudnn_runs();
std::string attention_cudnn_last_failure();

}  // namespace tessera::cuda
