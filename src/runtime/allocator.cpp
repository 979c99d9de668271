// CPU and meta allocators and the per-device-type registry.
//
// Note [CPU block cache]: blocks of 1 MiB and more are not returned to the C library when freed but
// kept, by rounded size, for the next request of that size class. Large fresh allocations come from
// mmap and cost a page fault per 4 KiB page on first touch, which for a 64 MiB tensor is more time
// than an elementwise kernel over it; training loops allocate the same sizes every step, so reuse
// removes that cost. The cache holds at most TESSERA_CPU_CACHE_MB (default 1024) MiB;
// TESSERA_CPU_CACHE_MB=0 disables it. Sizes round up to 1/8 steps between powers of two. A request
// takes the block of its class freed last; a block freed into a full cache makes room by freeing
// those freed longest ago. (Refusing the new block instead, as the cache once did, let blocks of a
// phase that had passed hold the cache for good: GPT-2 124M's eager step on the CPU, after compiled
// calls that free in another order, slowed from 0.45 to 0.75-1.1 s a call on page faults.)
//
// Note [CPU small-block cache]: blocks under 1 MiB are kept per thread, by size class (1/4 steps
// between powers of two, from 256 bytes), at most 16 of a class and 16 MiB in all per thread; a freed
// block goes to the freeing thread's cache, or to the C library when that is full. A small op from
// Python allocates and frees one such block per call, and glibc's aligned allocation of a few KiB
// takes its slow path there (the large-request path, which consolidates the fast bins first): about a
// tenth of a 1024-element add's per-op cost on the Xeon of bench/NOTES.md ("The per-op path from
// Python"), against a few nanoseconds for a hit here. Blocks carry their class in a 64-byte header, as
// the large ones do. TESSERA_CPU_CACHE_MB=0 disables this cache too, and so does AddressSanitizer (a
// reused block would hide a use after free).
#include "runtime/allocator.h"

#include <sys/mman.h>

#include <array>
#include <cstdlib>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "runtime/memory_reporter.h"
#include "tessera/error.h"

namespace tessera {
namespace {

constexpr size_t kCacheMin = size_t(1) << 20;

size_t size_class(size_t n) {
  if (n < kCacheMin) return (n + 63) & ~size_t(63);
  size_t p = size_t(1) << (63 - __builtin_clzll(n));  // highest power of two <= n
  size_t step = p / 8;
  return (n + step - 1) / step * step;
}

size_t cache_limit() {
  const char* v = std::getenv("TESSERA_CPU_CACHE_MB");
  if (!v || !*v) return size_t(1024) << 20;
  char* end = nullptr;
  unsigned long long mb = std::strtoull(v, &end, 10);
  TS_CHECK(end && *end == '\0', ValueError, "TESSERA_CPU_CACHE_MB: expected a number of MiB, got '", v, "'");
  return static_cast<size_t>(mb) << 20;
}

class BlockCache {
 public:
  static BlockCache& get() {
    static BlockCache* c = new BlockCache();  // never destroyed: tensors may outlive static destructors
    return *c;
  }
  // The block of class `cls` freed last (the warmest), or nullptr.
  void* take(size_t cls) {
    std::lock_guard<std::mutex> g(mu_);
    auto [lo, hi] = by_class_.equal_range(cls);
    if (lo == hi) return nullptr;
    auto it = std::prev(hi);
    void* p = it->second->p;
    order_.erase(it->second);
    by_class_.erase(it);
    cached_ -= cls;
    return p;
  }
  // Keeps a freed block, making room by freeing the blocks freed longest ago (Note [CPU block
  // cache]); false when the block alone is larger than the cache (the caller frees it).
  bool put(void* p, size_t cls) {
    std::lock_guard<std::mutex> g(mu_);
    if (cls > limit_) return false;
    while (cached_ + cls > limit_) {
      const Entry& old = order_.front();
      auto [lo, hi] = by_class_.equal_range(old.cls);
      for (auto it = lo; it != hi; ++it)
        if (it->second == order_.begin()) {
          by_class_.erase(it);
          break;
        }
      cached_ -= old.cls;
      std::free(old.p);
      order_.pop_front();
    }
    order_.push_back(Entry{p, cls});
    by_class_.emplace(cls, std::prev(order_.end()));
    cached_ += cls;
    return true;
  }
  size_t limit() const { return limit_; }

 private:
  struct Entry {
    void* p;
    size_t cls;
  };
  BlockCache() : limit_(cache_limit()) {}
  std::mutex mu_;
  std::list<Entry> order_;                                      // oldest first
  std::multimap<size_t, std::list<Entry>::iterator> by_class_;  // within a class, in the order freed
  size_t cached_ = 0;
  size_t limit_;
};

// A cached block remembers its size class just before the data (64 bytes, keeping alignment).
struct BlockHeader {
  size_t cls;
  char pad[56];
};
static_assert(sizeof(BlockHeader) == 64);

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSmallCacheBuilt = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSmallCacheBuilt = false;
#else
constexpr bool kSmallCacheBuilt = true;
#endif
#else
constexpr bool kSmallCacheBuilt = true;
#endif

// Note [CPU small-block cache]. Class 4*(k-8)+q holds blocks of 2^k * (1 + q/4) bytes (q < 4), the
// smallest 256: every size a multiple of 64, as aligned_alloc asks.
class SmallCache {
 public:
  static constexpr int kPerClass = 16;
  static constexpr size_t kMaxBytes = size_t(16) << 20;
  static constexpr int kClasses = 4 * (20 - 8) + 1;  // up to 2^20 bytes

  // The class of a block of `n` bytes (header included, n <= 2^20) and its size.
  static std::pair<int, size_t> classify(size_t n) {
    if (n <= 256) return {0, 256};
    const int k = 63 - __builtin_clzll(n - 1);  // 2^k < n <= 2^(k+1)
    const size_t step = (size_t(1) << k) / 4;
    const size_t q = (n - (size_t(1) << k) + step - 1) / step;  // 1..4
    if (q == 4) return {4 * (k + 1 - 8), size_t(1) << (k + 1)};
    return {4 * (k - 8) + static_cast<int>(q), (size_t(1) << k) + q * step};
  }

  void* take(int c) {
    Bin& b = bins_[c];
    if (b.count == 0) return nullptr;
    void* p = b.blocks[--b.count];
    bytes_ -= static_cast<BlockHeader*>(p)->cls;
    return p;
  }
  bool put(void* base) {
    const size_t size = static_cast<BlockHeader*>(base)->cls;
    Bin& b = bins_[classify(size).first];
    if (b.count == kPerClass || bytes_ + size > kMaxBytes) return false;
    b.blocks[b.count++] = base;
    bytes_ += size;
    return true;
  }
  ~SmallCache() {
    for (Bin& b : bins_)
      for (int i = 0; i < b.count; ++i) std::free(b.blocks[i]);
  }

 private:
  struct Bin {
    int count = 0;
    void* blocks[kPerClass];
  };
  std::array<Bin, kClasses> bins_{};
  size_t bytes_ = 0;
};

// This thread's cache; nullptr once the thread's exit has destroyed it (frees then go to the C library).
thread_local bool t_small_cache_gone = false;
struct SmallCacheOwner {
  SmallCache cache;
  ~SmallCacheOwner() { t_small_cache_gone = true; }  // before `cache` frees its blocks
};
SmallCache* small_cache() {
  if (t_small_cache_gone) [[unlikely]] return nullptr;
  thread_local SmallCacheOwner owner;
  return &owner.cache;
}

bool small_cache_on() {
  static const bool on = kSmallCacheBuilt && cache_limit() > 0;
  return on;
}

// Frees are reported with the size unknown (0): small blocks do not remember theirs; the profiler keeps
// the sizes of the allocations it saw.
void free_cpu(void* p) {
  report_memory({p, 0, kCPU, -1, -1});
  std::free(p);
}

void free_small(void* base) {
  report_memory({static_cast<char*>(base) + sizeof(BlockHeader), 0, kCPU, -1, -1});
  SmallCache* c = small_cache();
  if (!c || !c->put(base)) std::free(base);
}

void free_cached(void* base) {
  report_memory({static_cast<char*>(base) + sizeof(BlockHeader), 0, kCPU, -1, -1});
  auto* h = static_cast<BlockHeader*>(base);
  if (!BlockCache::get().put(base, h->cls)) std::free(base);
}

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device) override {
    DataPtr p = allocate_block(nbytes);
    if (memory_reporting_on() && p.get()) [[unlikely]] report_memory({p.get(), static_cast<int64_t>(nbytes), kCPU, -1, -1});
    return p;
  }

 private:
  static DataPtr allocate_block(size_t nbytes) {
    if (nbytes == 0) return DataPtr();
    TS_CHECK(nbytes < (size_t(1) << 62), OutOfMemoryError, "cpu allocator: request of ", nbytes, " bytes is too large");
    if (nbytes + sizeof(BlockHeader) < kCacheMin && small_cache_on()) {
      const auto [cls, size] = SmallCache::classify(nbytes + sizeof(BlockHeader));
      SmallCache* c = small_cache();
      void* base = c ? c->take(cls) : nullptr;
      if (!base) {
        base = std::aligned_alloc(64, size);
        TS_CHECK(base != nullptr, OutOfMemoryError, "cpu allocator: out of memory allocating ", nbytes, " bytes");
        static_cast<BlockHeader*>(base)->cls = size;
      }
      return DataPtr(static_cast<char*>(base) + sizeof(BlockHeader), base, &free_small);
    }
    if (nbytes < kCacheMin || BlockCache::get().limit() == 0) {
      void* p = std::aligned_alloc(64, size_class(nbytes));
      TS_CHECK(p != nullptr, OutOfMemoryError, "cpu allocator: out of memory allocating ", nbytes, " bytes");
      return DataPtr(p, p, &free_cpu);
    }
    const size_t cls = size_class(nbytes + sizeof(BlockHeader));
    void* base = BlockCache::get().take(cls);
    if (!base) {
      base = std::aligned_alloc(64, cls);
      TS_CHECK(base != nullptr, OutOfMemoryError, "cpu allocator: out of memory allocating ", nbytes, " bytes");
      // Transparent huge pages where the kernel offers them on request: fewer faults on first touch.
      madvise(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(base) & ~uintptr_t(4095)), cls, MADV_HUGEPAGE);
      static_cast<BlockHeader*>(base)->cls = cls;
    }
    return DataPtr(static_cast<char*>(base) + sizeof(BlockHeader), base, &free_cached);
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
