// Allocators hand out device memory as DataPtrs (a pointer plus the deleter that returns it). One
// allocator per device type is registered here; the CUDA backend registers its caching allocator.
#pragma once
#include <cstddef>
#include <memory>

#include "tessera/device.h"

namespace tessera {

// Owning pointer to device memory: `data` is what tensors read, `ctx` is what `deleter` frees (the
// two differ for memory inside a larger mapping, e.g. a memory-mapped safetensors file).
class DataPtr {
 public:
  DataPtr() = default;
  DataPtr(void* data, void* ctx, void (*deleter)(void*)) : data_(data), ctx_(ctx), deleter_(deleter) {}
  DataPtr(DataPtr&& o) noexcept : data_(o.data_), ctx_(o.ctx_), deleter_(o.deleter_) { o.deleter_ = nullptr; }
  DataPtr& operator=(DataPtr&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = o.data_;
      ctx_ = o.ctx_;
      deleter_ = o.deleter_;
      o.deleter_ = nullptr;
    }
    return *this;
  }
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() { reset(); }
  void* get() const { return data_; }
  void* context() const { return ctx_; }

 private:
  void reset() {
    if (deleter_) deleter_(ctx_);
    deleter_ = nullptr;
  }
  void* data_ = nullptr;
  void* ctx_ = nullptr;
  void (*deleter_)(void*) = nullptr;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory for `nbytes` on `device` (nbytes may be 0). Raises OutOfMemoryError on failure.
  virtual DataPtr allocate(size_t nbytes, Device device) = 0;
};

// CPU memory, 64-byte aligned so that vector loads of any width are aligned at offset 0.
Allocator* cpu_allocator();
// The allocator of a device type; raises DeviceError when none is registered (e.g. cuda without the
// CUDA backend).
Allocator* get_allocator(DeviceType type);
void set_allocator(DeviceType type, Allocator* allocator);

}  // namespace tessera
