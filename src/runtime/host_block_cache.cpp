// The pinned host block cache (Note [Pinned host cache] in host_block_cache.h).
#include "runtime/host_block_cache.h"

#include <algorithm>
#include <bit>

#include "tessera/error.h"

namespace tessera::alloc {

struct HostBlock {
  char* ptr = nullptr;
  size_t size = 0;  // a power of two
  bool allocated = false;
  int event_count = 0;
  std::vector<void*> streams;  // streams that used it (record_use) since it was handed out
};

namespace {
constexpr size_t kMinHostBlock = 512;
constexpr size_t kMaxHostRequest = size_t(1) << 62;
size_t bin_of(size_t size) { return std::bit_width(size) - 1; }
}  // namespace

HostBlockCache::HostBlockCache(std::unique_ptr<AllocBackend> backend) : backend_(std::move(backend)) {}

HostBlockCache::~HostBlockCache() {
  try {
    for (auto& [ev, b] : events_) {
      backend_->event_wait(ev);
      backend_->release_event(ev);
    }
    for (auto& [addr, b] : blocks_) {
      backend_->raw_free(b->ptr);
      delete b;
    }
  } catch (...) {
    // A device error at shutdown: the memory goes with the process.
  }
}

void* HostBlockCache::address(const HostBlock* b) { return b->ptr; }
size_t HostBlockCache::block_size(const HostBlock* b) { return b->size; }

HostBlock* HostBlockCache::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  TS_CHECK(nbytes <= kMaxHostRequest, OutOfMemoryError, "pin_memory: cannot allocate ", format_size(nbytes),
           " of pinned host memory");
  const size_t size = std::max(kMinHostBlock, std::bit_ceil(nbytes));
  std::lock_guard<std::mutex> g(mu_);
  if (!events_.empty()) process_events();
  auto& bin = free_[bin_of(size)];
  if (!bin.empty()) {
    HostBlock* b = bin.back();
    bin.pop_back();
    b->allocated = true;
    stats_.allocated_bytes += static_cast<int64_t>(b->size);
    return b;
  }
  void* p = backend_->raw_alloc(size);
  if (!p) {
    // Return the cached blocks and try once more.
    for (auto& list : free_) {
      for (HostBlock* b : list) release(b);
      list.clear();
    }
    p = backend_->raw_alloc(size);
  }
  TS_CHECK(p != nullptr, OutOfMemoryError, "pin_memory: out of pinned host memory: tried to allocate ",
           format_size(size), " with ", format_size(static_cast<uint64_t>(stats_.reserved_bytes)),
           " already pinned by tessera");
  ++stats_.num_host_alloc;
  auto* b = new HostBlock();
  b->ptr = static_cast<char*>(p);
  b->size = size;
  b->allocated = true;
  blocks_.emplace(reinterpret_cast<uintptr_t>(p), b);
  stats_.reserved_bytes += static_cast<int64_t>(size);
  stats_.allocated_bytes += static_cast<int64_t>(size);
  return b;
}

void HostBlockCache::free(HostBlock* b) {
  if (!b) return;
  std::lock_guard<std::mutex> g(mu_);
  TS_CHECK(b->allocated, ValueError, "pinned host allocator: a block was freed twice");
  b->allocated = false;
  stats_.allocated_bytes -= static_cast<int64_t>(b->size);
  if (b->streams.empty()) {
    free_[bin_of(b->size)].push_back(b);
    return;
  }
  for (void* s : b->streams) {
    events_.emplace_back(backend_->record_event(s), b);
    ++b->event_count;
  }
  b->streams.clear();
}

void HostBlockCache::process_events() {
  // Events of different streams complete in any order: look at each.
  std::erase_if(events_, [&](std::pair<void*, HostBlock*>& e) {
    if (!backend_->event_done(e.first)) return false;
    backend_->release_event(e.first);
    if (--e.second->event_count == 0) free_[bin_of(e.second->size)].push_back(e.second);
    return true;
  });
}

void HostBlockCache::release(HostBlock* b) {
  backend_->raw_free(b->ptr);
  ++stats_.num_host_free;
  stats_.reserved_bytes -= static_cast<int64_t>(b->size);
  blocks_.erase(reinterpret_cast<uintptr_t>(b->ptr));
  delete b;
}

bool HostBlockCache::contains(const void* ptr) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> g(mu_);
  auto it = blocks_.upper_bound(addr);
  if (it == blocks_.begin()) return false;
  --it;
  return addr < it->first + it->second->size;
}

bool HostBlockCache::record_use(const void* ptr, void* stream) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> g(mu_);
  auto it = blocks_.upper_bound(addr);
  if (it == blocks_.begin()) return false;
  --it;
  HostBlock* b = it->second;
  if (addr >= it->first + b->size || !b->allocated) return false;
  if (std::find(b->streams.begin(), b->streams.end(), stream) == b->streams.end()) b->streams.push_back(stream);
  return true;
}

void HostBlockCache::empty_cache() {
  std::lock_guard<std::mutex> g(mu_);
  if (!events_.empty()) process_events();
  for (auto& list : free_) {
    for (HostBlock* b : list) release(b);
    list.clear();
  }
}

HostStats HostBlockCache::stats() {
  std::lock_guard<std::mutex> g(mu_);
  HostStats s = stats_;
  s.pending_events = static_cast<int64_t>(events_.size());
  return s;
}

}  // namespace tessera::alloc
