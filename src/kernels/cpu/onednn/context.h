// What the oneDNN kernels share (kernels/cpu/onednn/*.cpp only; this header includes oneDNN's): the
// CPU engine and stream, the dtype map, tensors as oneDNN memory, reorders, and the primitive cache.
//
// Note [oneDNN primitive cache]: creating a primitive descriptor costs 50 to 100 us (oneDNN walks its
// implementation list and checks each against the shape), as much as a small convolution itself; its
// own cache keeps the JIT-compiled primitives but not the descriptors. So each op keeps its
// descriptors and primitives here, keyed by everything that decides them (dtype, geometry, strides
// class, alpha and beta): a training loop builds them on its first step and only looks them up after.
// The cache is bounded (kCacheEntries; cleared whole when full, which a loop over a few shapes never
// reaches) and guarded by a mutex; primitives are executed concurrently from any thread.
#pragma once
#include <dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/tensor.h"

namespace tessera::cpu::onednn {

dnnl::engine& engine();
// A stream per calling thread (oneDNN's CPU stream runs the primitive on the caller, in its OpenMP pool).
dnnl::stream& stream();

// float32 and bfloat16 (the dtypes the oneDNN paths take); nullopt for the others.
std::optional<dnnl::memory::data_type> to_dnnl(DType dt);

// A memory descriptor for t with its own sizes and strides (elements).
dnnl::memory::desc plain_desc(const Tensor& t);
dnnl::memory::desc plain_desc(const Tensor& t, const dnnl::memory::dims& dims, const dnnl::memory::dims& strides);

// A memory over t's data (no copy).
dnnl::memory wrap(const dnnl::memory::desc& d, const Tensor& t);

// A memory of layout `d` over a buffer of the calling thread kept across calls (`slot` tells a call's
// buffers apart: 0 .. kScratchSlots - 1), so that a training loop does not fault in fresh pages for its
// reordered operands every step. Above kKeepBytes the buffer is oneDNN's, freed with the memory.
constexpr int kScratchSlots = 4;
constexpr size_t kKeepBytes = size_t(64) << 20;
dnnl::memory scratch(const dnnl::memory::desc& d, int slot);

// `user` as the primitive wants it (`want`): `user` itself when the layouts agree, else reordered into
// scratch(want, slot). For an input.
dnnl::memory to_layout(const dnnl::memory& user, const dnnl::memory::desc& want, int slot);

// Copies `from` into `to` (layouts may differ): an output computed in the primitive's layout.
void reorder_into(const dnnl::memory& from, const dnnl::memory& to);

// Counts a call run through oneDNN (calls_taken() in onednn.h).
void count_call();

// Key builder for the primitive cache: a flat list of integers.
struct Key {
  std::vector<int64_t> v;
  Key& add(int64_t x) {
    v.push_back(x);
    return *this;
  }
  Key& add(const std::vector<int64_t>& xs) {
    v.insert(v.end(), xs.begin(), xs.end());
    return *this;
  }
  bool operator==(const Key& o) const { return v == o.v; }
};
struct KeyHash {
  size_t operator()(const Key& k) const;
};

constexpr size_t kCacheEntries = 512;

// Note [oneDNN primitive cache]. Entry is whatever an op keeps per key (descriptors, primitives).
template <class Entry>
class PrimitiveCache {
 public:
  std::shared_ptr<const Entry> get(const Key& key, const std::function<std::shared_ptr<const Entry>()>& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    std::shared_ptr<const Entry> e = make();  // outside the lock: creation takes a while
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= kCacheEntries) map_.clear();
    return map_.emplace(key, std::move(e)).first->second;
  }

 private:
  std::mutex mu_;
  std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> map_;
};

}  // namespace tessera::cpu::onednn
