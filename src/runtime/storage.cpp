#include "runtime/storage.h"

#include <atomic>

namespace tessera {
namespace detail {
thread_local bool t_fake_data = false;  // Note [Fake data]
}  // namespace detail
namespace {
std::atomic<uint64_t> g_next_serial{1};
}

Storage::Storage(size_t nbytes, Device device)
    : data_(detail::t_fake_data ? DataPtr() : get_allocator(device.type())->allocate(nbytes, device)),
      nbytes_(nbytes),
      device_(device),
      serial_(g_next_serial.fetch_add(1, std::memory_order_relaxed)),
      fake_(detail::t_fake_data && nbytes > 0 && !device.is_meta()) {}

Storage::Storage(DataPtr data, size_t nbytes, Device device)
    : data_(std::move(data)), nbytes_(nbytes), device_(device), serial_(g_next_serial.fetch_add(1, std::memory_order_relaxed)) {}

uint64_t Storage::next_serial() { return g_next_serial.load(std::memory_order_relaxed); }

}  // namespace tessera
