// The CPU allocator (src/runtime/allocator.cpp): every block 64-byte aligned and its own (no two live
// blocks overlap, whatever the sizes and the order of frees); the per-thread small-block cache (Note
// [CPU small-block cache]) hands a freed block back for the next request of its class, at most 16 a
// class, a block freed on another thread goes to that thread's cache, and a thread's exit gives its
// cache back; the large blocks' cache (Note [CPU block cache]) as before. Under AddressSanitizer the
// small cache is off (a reused block would hide a use after free): the reuse tests then check that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "runtime/allocator.h"

namespace ts = tessera;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSmallCache = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSmallCache = false;
#else
constexpr bool kSmallCache = true;
#endif
#else
constexpr bool kSmallCache = true;
#endif

ts::DataPtr alloc(size_t n) { return ts::cpu_allocator()->allocate(n, ts::kCPU); }

TEST(CpuAllocator, EveryBlockIsAlignedAndOwnsItsBytes) {
  std::mt19937 rng(3);
  std::vector<std::pair<ts::DataPtr, size_t>> live;
  std::vector<uint8_t> tag;
  for (int step = 0; step < 4000; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      const size_t i = rng() % live.size();
      // The block still holds what was written into it: no other block overlapped it.
      const auto* p = static_cast<const uint8_t*>(live[i].first.get());
      for (size_t k = 0; k < live[i].second; k += 61) ASSERT_EQ(p[k], tag[i]) << "block " << i << " byte " << k;
      live.erase(live.begin() + static_cast<long>(i));
      tag.erase(tag.begin() + static_cast<long>(i));
      continue;
    }
    // Sizes around the class edges and the 1 MiB boundary between the two caches.
    static const size_t kEdges[] = {1, 63, 64, 65, 191, 192, 193, 4096, 4097, 65536 - 64, (1u << 20) - 65,
                                    (1u << 20) - 64, (1u << 20) - 1, 1u << 20, (1u << 20) + 1};
    const size_t n = rng() % 2 ? kEdges[rng() % std::size(kEdges)] : 1 + rng() % 300000;
    ts::DataPtr d = alloc(n);
    ASSERT_NE(d.get(), nullptr) << n;
    ASSERT_EQ(reinterpret_cast<uintptr_t>(d.get()) % 64, 0u) << n;
    const auto t = static_cast<uint8_t>(step * 7 + 1);
    std::memset(d.get(), t, n);
    live.emplace_back(std::move(d), n);
    tag.push_back(t);
  }
  EXPECT_EQ(alloc(0).get(), nullptr);
}

TEST(CpuAllocator, SmallBlocksAreReusedByClassAndBoundedPerClass) {
  void* first = nullptr;
  {
    ts::DataPtr a = alloc(4096);
    first = a.get();
  }
  ts::DataPtr again = alloc(4100);  // the same class as 4096: both with the header in (4096, 5120]
  EXPECT_EQ(again.get() == first, kSmallCache);
  // 40 blocks of one class freed at once: at most 16 come back.
  std::vector<ts::DataPtr> many;
  std::set<void*> freed;
  for (int i = 0; i < 40; ++i) many.push_back(alloc(10000));
  for (const auto& d : many) freed.insert(d.get());
  many.clear();
  int reused = 0;
  for (int i = 0; i < 40; ++i) {
    many.push_back(alloc(10000));
    reused += freed.count(many.back().get()) ? 1 : 0;
  }
  if (kSmallCache) {
    EXPECT_GE(reused, 16);  // the cache's 16, and perhaps the C library's own reuse beyond them
  } else {
    SUCCEED() << "small cache off under AddressSanitizer; " << reused << " reused by the C library";
  }
}

TEST(CpuAllocator, ABlockFreedOnAnotherThreadServesThatThread) {
  ts::DataPtr d = alloc(20000);
  void* p = d.get();
  void* got = nullptr;
  std::thread other([&] {
    { ts::DataPtr mine = std::move(d); }  // freed here: into this thread's cache
    ts::DataPtr next = alloc(20000);
    got = next.get();
  });  // the thread's exit frees its cache (LeakSanitizer would report a block left behind)
  other.join();
  EXPECT_EQ(got == p, kSmallCache);
}

TEST(CpuAllocator, LargeBlocksAreReusedBySizeClass) {
  void* first = nullptr;
  {
    ts::DataPtr a = alloc((8u << 20) - 1000);
    first = a.get();
  }
  ts::DataPtr b = alloc((8u << 20) - 2000);  // with the header, both round up to the 8 MiB step
  EXPECT_EQ(b.get(), first);
}

}  // namespace

// Note [CPU block cache]: a block freed into a full cache makes room by freeing the blocks freed
// longest ago, and a request takes the block of its class freed last. (The cache once refused the
// new block instead, so blocks of a passed phase held it for good.) The blocks are never touched:
// 128 MiB requests cost address space only.
TEST(CpuAllocator, AFullLargeBlockCacheKeepsTheBlocksFreedLast) {
  const char* env = std::getenv("TESSERA_CPU_CACHE_MB");
  const size_t limit = (env && *env ? std::strtoull(env, nullptr, 10) : 1024) << 20;
  if (limit == 0) GTEST_SKIP() << "TESSERA_CPU_CACHE_MB=0: no cache";
  const size_t request = size_t(128) << 20, cls = size_t(144) << 20;  // 128 MiB + header, in 1/8 steps
  const size_t n = limit / cls + 2;  // more than the cache holds
  std::vector<ts::DataPtr> blocks;
  std::vector<void*> where;
  for (size_t i = 0; i < n; ++i) {
    blocks.push_back(alloc(request));
    where.push_back(blocks.back().get());
  }
  blocks.clear();  // freed in order: the first ones make room for the last
  ts::DataPtr again = alloc(request);
  EXPECT_EQ(again.get(), where.back());
  ts::DataPtr next = alloc(request);
  EXPECT_EQ(next.get(), where[n - 2]);
}
