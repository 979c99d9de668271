// Whether oneDNN is built in and switched on (tessera/cpu.h), read once from TESSERA_ONEDNN; in a
// build without oneDNN (CMake option TESSERA_ONEDNN off), the kernels' offers (onednn.h) decline every
// call, so the native kernels run everything.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cpu/onednn/onednn.h"

#if defined(TESSERA_HAVE_ONEDNN)
#include <dnnl.hpp>
#endif

namespace tessera::cpu {
namespace {

const char* env() { return std::getenv("TESSERA_ONEDNN"); }

// TESSERA_ONEDNN=0 (or "off", "false") switches oneDNN off; unset or anything else leaves it on.
bool enabled_from_env() {
  const char* v = env();
  if (v == nullptr) return true;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "OFF") == 0 ||
           std::strcmp(v, "false") == 0);
}

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> flag(onednn_built() && enabled_from_env());
  return flag;
}

}  // namespace

namespace {
std::atomic<bool>& everywhere_flag() {
  static std::atomic<bool> flag(env() != nullptr && std::strcmp(env(), "all") == 0);
  return flag;
}
}  // namespace

bool onednn::everywhere() { return everywhere_flag().load(std::memory_order_relaxed) && onednn_enabled(); }
bool onednn::set_everywhere(bool on) { return everywhere_flag().exchange(on); }

bool onednn_built() {
#if defined(TESSERA_HAVE_ONEDNN)
  return true;
#else
  return false;
#endif
}

bool onednn_enabled() { return enabled_flag().load(std::memory_order_relaxed); }

bool set_onednn_enabled(bool on) { return enabled_flag().exchange(on && onednn_built()); }

std::string onednn_version() {
#if defined(TESSERA_HAVE_ONEDNN)
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
#else
  return "";
#endif
}

#if !defined(TESSERA_HAVE_ONEDNN)
namespace onednn {
bool conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const ConvGeometry&) { return false; }
bool conv2d_input_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const ConvGeometry&) {
  return false;
}
bool conv2d_weight_backward(const Tensor&, const Tensor&, const Tensor&, const ConvGeometry&) { return false; }
bool gemm(const GemmParams&) { return false; }
bool max_pool2d_forward(const Tensor&, const Tensor&, const Tensor&, const PoolGeometry&) { return false; }
bool max_pool2d_backward(const Tensor&, const Tensor&, const Tensor&, const PoolGeometry&) { return false; }
bool avg_pool2d_forward(const Tensor&, const Tensor&, const PoolGeometry&) { return false; }
bool avg_pool2d_backward(const Tensor&, const Tensor&, const PoolGeometry&) { return false; }
bool adaptive_avg_pool2d_forward(const Tensor&, const Tensor&, const PoolGeometry&) { return false; }
bool adaptive_avg_pool2d_backward(const Tensor&, const Tensor&, const PoolGeometry&) { return false; }
bool batch_norm_forward_training(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                 const Tensor&, const Tensor&, const Tensor&, const BatchNormShape&, double, double) {
  return false;
}
bool batch_norm_forward_inference(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  const Tensor&, const BatchNormShape&, double) {
  return false;
}
bool batch_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&, const Tensor&, const BatchNormShape&, bool, double) {
  return false;
}
int64_t calls_taken() { return 0; }
}  // namespace onednn
#endif

}  // namespace tessera::cpu
