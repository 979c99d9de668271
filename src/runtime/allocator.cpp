// CPU and meta allocators and the per-device-type registry.
#include "runtime/allocator.h"

#include <array>
#include <cstdlib>
#include <new>

#include "tessera/error.h"

namespace tessera {
namespace {

void free_cpu(void* p) { std::free(p); }

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return DataPtr();
    size_t rounded = (nbytes + 63) & ~size_t(63);
    TS_CHECK(rounded >= nbytes, OutOfMemoryError, "cpu allocator: request of ", nbytes, " bytes is too large");
    void* p = std::aligned_alloc(64, rounded);
    TS_CHECK(p != nullptr, OutOfMemoryError, "cpu allocator: out of memory allocating ", nbytes, " bytes");
    return DataPtr(p, p, &free_cpu);
  }
};

// Meta tensors have sizes and strides but no data.
class MetaAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t, Device) override { return DataPtr(); }
};

std::array<Allocator*, kNumDeviceTypes>& registry() {
  static CpuAllocator cpu;
  static MetaAllocator meta;
  static std::array<Allocator*, kNumDeviceTypes> r{&cpu, nullptr, &meta};
  return r;
}

}  // namespace

Allocator* cpu_allocator() { return registry()[0]; }

Allocator* get_allocator(DeviceType type) {
  Allocator* a = registry()[static_cast<int>(type)];
  TS_CHECK(a != nullptr, DeviceError, "no allocator for device type '", device_type_name(type),
           "': tessera was built without the ", device_type_name(type), " backend");
  return a;
}

void set_allocator(DeviceType type, Allocator* allocator) { registry()[static_cast<int>(type)] = allocator; }

}  // namespace tessera
