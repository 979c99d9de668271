// The op table's kernel slots. Each kernel family (unary, binary, reduce, gemm, ...) declares one
// slot with its signature in `ops/<family>_kernel.h`; each backend fills the slot for its device type
// at start-up (kernels/cpu/register.cpp, kernels/cuda/register.cu). Ops call `slot(device, args...)`:
// meta tensors skip the kernel (the meta function already produced the output), so does everything
// while fake data is on (Note [Fake data] in runtime/fake_data.h), and a device with no
// kernel raises NotImplementedError naming the kernel and the device. A slot called outside every
// op while a stage is installed is reported (Note [Scoped kernels] in ops/op_scope.h).
#pragma once
#include <array>
#include <utility>

#include "ops/dispatch_depth.h"
#include "runtime/fake_data.h"
#include "tessera/device.h"
#include "tessera/error.h"

namespace tessera {

template <class Fn>
class KernelSlot {
 public:
  constexpr explicit KernelSlot(const char* name) : name_(name) {}
  void set(DeviceType d, Fn* fn) { fns_[static_cast<int>(d)] = fn; }
  bool has(DeviceType d) const { return fns_[static_cast<int>(d)] != nullptr; }
  Fn* get(DeviceType d) const {
    Fn* f = fns_[static_cast<int>(d)];
    TS_CHECK(f != nullptr, NotImplementedError, name_, ": no kernel for device type '", device_type_name(d),
             "'", d == DeviceType::CUDA ? " (tessera was built without the CUDA backend)" : "");
    return f;
  }
  template <class... Args>
  void operator()(Device device, Args&&... args) const {
    if (detail::op_stages_installed()) [[unlikely]]
      detail::notify_kernel_slot(name_);
    if (device.is_meta() || detail::t_fake_data) [[unlikely]] return;  // Note [Fake data]
    get(device.type())(std::forward<Args>(args)...);
  }
  const char* name() const { return name_; }

 private:
  const char* name_;
  std::array<Fn*, kNumDeviceTypes> fns_{};
};

}  // namespace tessera
