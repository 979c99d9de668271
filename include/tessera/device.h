// Where a tensor lives: the CPU, a CUDA GPU, or `meta` (shapes and dtypes only, no data).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1, Meta = 2 };
inline constexpr int kNumDeviceTypes = 3;

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index = -1) : type_(type), index_(type == DeviceType::CUDA && index < 0 ? 0 : index) {}
  // "cpu", "cuda", "cuda:1", "meta"; anything else raises ValueError.
  Device(std::string_view spec);  // NOLINT: implicit so that "cuda" can be passed where a Device is taken
  Device(const char* spec) : Device(std::string_view(spec)) {}  // NOLINT
  Device(const std::string& spec) : Device(std::string_view(spec)) {}  // NOLINT

  static constexpr Device cpu() { return Device(DeviceType::CPU); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceType::CUDA, index); }
  static constexpr Device meta() { return Device(DeviceType::Meta); }

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }
  constexpr bool is_meta() const { return type_ == DeviceType::Meta; }
  std::string str() const;  // "cpu", "cuda:0", "meta"

  constexpr bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }

 private:
  DeviceType type_ = DeviceType::CPU;
  int index_ = -1;
};

inline constexpr Device kCPU = Device(DeviceType::CPU);
inline constexpr Device kMeta = Device(DeviceType::Meta);
const char* device_type_name(DeviceType t);

}  // namespace tessera
