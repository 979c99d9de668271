#include "runtime/storage.h"

namespace tessera {

Storage::Storage(size_t nbytes, Device device)
    : data_(get_allocator(device.type())->allocate(nbytes, device)), nbytes_(nbytes), device_(device) {}

Storage::Storage(DataPtr data, size_t nbytes, Device device)
    : data_(std::move(data)), nbytes_(nbytes), device_(device) {}

}  // namespace tessera
