// Start-up of the library: each layer's registration, called explicitly and in layer order
// (DESIGN.md "One op call"). This is the top of the stack, so it may see every layer.
#include "autograd/derivatives/derivatives.h"
#include "autograd/op_node.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera {
namespace {

struct Init {
  Init() {
    cpu::register_cpu_kernels();
    autograd::register_derivatives();
    autograd::install_autograd_stage();
  }
};
// In a shared library this object is always linked and constructed before main().
const Init g_init;

}  // namespace
}  // namespace tessera
