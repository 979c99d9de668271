// Process-wide math switches (tessera/cuda.h): TF32 for float32 matmuls (off by default, as PyTorch's
// torch.backends.cuda.matmul.allow_tf32) and for cuDNN convolutions (on by default), and cuDNN's
// benchmark mode (off by default, as torch.backends.cudnn.benchmark), and whether attention may take
// the flash kernels (on by default, as torch.backends.cuda.enable_flash_sdp) and among them cuDNN's
// fused attention engines (on by default, as torch.backends.cuda.enable_cudnn_sdp). Kept in runtime,
// without CUDA, so that a build without the CUDA backend still answers them.
#include <atomic>

#include "tessera/cuda.h"

namespace tessera::cuda {
namespace {
std::atomic<bool> g_matmul_tf32{false};
std::atomic<bool> g_cudnn_tf32{true};
std::atomic<bool> g_cudnn_benchmark{false};
std::atomic<bool> g_flash_sdp{true};
std::atomic<bool> g_cudnn_sdp{true};
}  // namespace

void set_allow_tf32(bool matmul) { g_matmul_tf32.store(matmul, std::memory_order_relaxed); }
bool allow_tf32() { return g_matmul_tf32.load(std::memory_order_relaxed); }
void set_cudnn_allow_tf32(bool conv) { g_cudnn_tf32.store(conv, std::memory_order_relaxed); }
bool cudnn_allow_tf32() { return g_cudnn_tf32.load(std::memory_order_relaxed); }
void set_cudnn_benchmark(bool benchmark) { g_cudnn_benchmark.store(benchmark, std::memory_order_relaxed); }
bool cudnn_benchmark() { return g_cudnn_benchmark.load(std::memory_order_relaxed); }
void enable_flash_sdp(bool enabled) { g_flash_sdp.store(enabled, std::memory_order_relaxed); }
bool flash_sdp_enabled() { return g_flash_sdp.load(std::memory_order_relaxed); }
void enable_cudnn_sdp(bool enabled) { g_cudnn_sdp.store(enabled, std::memory_order_relaxed); }
bool cudnn_sdp_enabled() { return g_cudnn_sdp.load(std::memory_order_relaxed); }

}  // namespace tessera::cuda
