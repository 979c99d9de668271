// Device parsing and names.
#include "tessera/device.h"

#include <charconv>

#include "tessera/error.h"

namespace tessera {

Device::Device(std::string_view spec) {
  auto colon = spec.find(':');
  std::string_view kind = spec.substr(0, colon);
  if (kind == "cpu") type_ = DeviceType::CPU;
  else if (kind == "cuda") type_ = DeviceType::CUDA;
  else if (kind == "meta") type_ = DeviceType::Meta;
  else TS_THROW(ValueError, "Device: expected one of cpu, cuda, cuda:N, meta but got '", spec, "'");
  if (colon == std::string_view::npos) {
    index_ = type_ == DeviceType::CUDA ? 0 : -1;
    return;
  }
  std::string_view num = spec.substr(colon + 1);
  int idx = -1;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), idx);
  TS_CHECK(ec == std::errc() && p == num.data() + num.size() && idx >= 0 && !num.empty(), ValueError,
           "Device: invalid device index in '", spec, "' (expected a non-negative integer after ':')");
  TS_CHECK(type_ == DeviceType::CUDA || idx == 0, ValueError, "Device: '", spec,
           "' has an index; only cuda devices are numbered (cpu and meta take 0 or none)");
  index_ = type_ == DeviceType::CUDA ? idx : -1;
}

std::string Device::str() const {
  if (type_ == DeviceType::CUDA) return "cuda:" + std::to_string(index_);
  return device_type_name(type_);
}

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Meta: return "meta";
  }
  return "unknown";
}

}  // namespace tessera
