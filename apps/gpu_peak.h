// Model FLOPs utilization (MFU) of the GPT training command: the FLOPs a training step of a GPT needs
// (nanoGPT's estimate_mfu, after the PaLM paper's appendix B) and the dense bfloat16 tensor-core peak
// of the GPUs we know, by device name.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace tessera::app {

// Dense (no sparsity) bfloat16 peak FLOP/s of the GPU called `device_name` (as cudaGetDeviceProperties
// names it, e.g. "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L4",
// "NVIDIA GeForce RTX 4090"); nullopt for a GPU not in the table.
std::optional<double> peak_bf16_flops(const std::string& device_name);

// Forward + backward FLOPs per token of a GPT: 6 N (each weight: a multiply-add forward, two backward)
// plus the attention scores and their use, 12 L H Q T (Q the head dimension, T the context). N counts
// the parameters without the position embedding (the token embedding is the tied classifier: counted).
double gpt_flops_per_token(int64_t params_without_wpe, int64_t n_layer, int64_t n_head, int64_t head_dim,
                           int64_t context);

// MFU in [0, 1]: achieved FLOP/s over the peak; nullopt when the peak is unknown.
std::optional<double> mfu(double flops_per_token, double tokens_per_second, const std::string& device_name);

}  // namespace tessera::app
