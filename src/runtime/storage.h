// Storage: a reference-counted block of device memory that tensors view. The version counter lives
// here so that every view of the same memory sees in-place changes (autograd checks it).
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>

#include "runtime/allocator.h"
#include "runtime/fake_data.h"

namespace tessera {

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Wraps existing memory (e.g. a memory-mapped file) that `data` owns.
  Storage(DataPtr data, size_t nbytes, Device device);

  void* data() const { return data_.get(); }
  // Note [Fake data] (runtime/fake_data.h): made while fake data was on: a size and no memory.
  bool fake() const { return fake_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  // The order in which storages were created, process-wide, from 1 (Note [Capture provenance] in
  // compile/capture.h: a tensor the compiler's capture has not seen is told apart by whether its
  // storage predates the capture).
  uint64_t serial() const { return serial_; }
  // The serial the next storage will get.
  static uint64_t next_serial();

 private:
  DataPtr data_;
  size_t nbytes_;
  Device device_;
  std::atomic<uint64_t> version_{0};
  uint64_t serial_;
  bool fake_ = false;
};

}  // namespace tessera
