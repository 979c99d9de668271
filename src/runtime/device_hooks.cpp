// The CUDA hook table (device_hooks.h): written once at start-up, read afterwards.
#include "runtime/device_hooks.h"

namespace tessera {
namespace {
CudaHooks g_hooks;
bool g_set = false;
}  // namespace

const CudaHooks* cuda_hooks() { return g_set ? &g_hooks : nullptr; }

void set_cuda_hooks(const CudaHooks& hooks) {
  g_hooks = hooks;
  g_set = true;
}

}  // namespace tessera
