// Start-up of the library: each layer's registration, called explicitly and in layer order
// (DESIGN.md "One op call"). This is the top of the stack, so it may see every layer.
#include "amp/amp_stage.h"
#include "autograd/derivatives/derivatives.h"
#include "autograd/op_node.h"
#include "kernels/cpu/cpu_kernels.h"
#include "ops/profiler_observer.h"
#if defined(TESSERA_WITH_CUDA)
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda/cuda_allocator.h"
#endif

namespace tessera {
namespace {

struct Init {
  Init() {
    cpu::register_cpu_kernels();
#if defined(TESSERA_WITH_CUDA)
    cuda::register_cuda_runtime();
    cuda::register_cuda_kernels();
#endif
    autograd::register_derivatives();
    autograd::install_autograd_stage();
    register_profiler_stage();
    amp::install_autocast_stage();
  }
};
// In a shared library this object is always linked and constructed before main().
const Init g_init;

}  // namespace
}  // namespace tessera
