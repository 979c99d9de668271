// The caching allocator's pool logic on a fake device (no GPU needed): rounding, pools, best fit,
// split and merge, streams, record_stream deferral, max_split_size, OOM retry and message, memory
// fraction, garbage collection, the cudaMalloc bypass, statistics against snapshots under a long random
// workload, the pinned host cache, and the TESSERA_CUDA_ALLOC_CONF parser. The graph private pools are
// in test_graph_pool.cpp; the fake device in fake_device.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/alloc_conf.h"
#include "runtime/block_pool.h"
#include "runtime/fake_device.h"
#include "runtime/host_block_cache.h"
#include "tessera/error.h"

namespace {

using namespace tessera;
using namespace tessera::alloc;
using namespace tessera::alloc::fake;

// ---- sizes and pools ----------------------------------------------------------------------------------

TEST(BlockPool, RoundsRequestsTo512Bytes) {
  Fixture f;
  EXPECT_EQ(f.a->round_size(1), 512u);
  EXPECT_EQ(f.a->round_size(512), 512u);
  EXPECT_EQ(f.a->round_size(513), 1024u);
  EXPECT_EQ(f.a->round_size(MiB + 1), MiB + 512);
  EXPECT_EQ(CachingBlockAllocator::segment_size_for(512), 2 * MiB);
  EXPECT_EQ(CachingBlockAllocator::segment_size_for(MiB), 2 * MiB);
  EXPECT_EQ(CachingBlockAllocator::segment_size_for(MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingBlockAllocator::segment_size_for(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingBlockAllocator::segment_size_for(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingBlockAllocator::segment_size_for(11 * MiB + 512), 12 * MiB);
}

TEST(BlockPool, RoundupPower2Divisions) {
  Fixture f(1024 * MiB, "roundup_power2_divisions:4");
  EXPECT_EQ(f.a->round_size(1500), 1536u);            // at most 512 * 4: plain rounding
  EXPECT_EQ(f.a->round_size(4097), 5120u);            // steps of 1 KiB between 4 and 8 KiB
  EXPECT_EQ(f.a->round_size(MiB + 100 * KiB), MiB + 256 * KiB);
  EXPECT_EQ(f.a->round_size(3 * MiB + 1), 3 * MiB + 512 * KiB);
  EXPECT_EQ(f.a->round_size(2 * MiB), 2 * MiB);
  EXPECT_EQ(f.a->round_size(3 * MiB), 3 * MiB);
  Block* b = f.a->malloc(MiB + 100 * KiB, kS1);
  EXPECT_EQ(CachingBlockAllocator::block_size(b), MiB + 256 * KiB);
  f.a->free(b);
  expect_consistent(*f.a);
}

TEST(BlockPool, SmallAndLargePools) {
  Fixture f;
  Block* s = f.a->malloc(1000, kS1);
  Block* l = f.a->malloc(2 * MiB, kS1);
  Block* h = f.a->malloc(30 * MiB, kS1);  // more than the 18 MiB left of the 20 MiB segment: its own
  DeviceStats st = f.a->stats();
  EXPECT_EQ(cur(st.segment, kSmallPool), 1);
  EXPECT_EQ(cur(st.segment, kLargePool), 2);
  EXPECT_EQ(cur(st.reserved_bytes, kSmallPool), int64_t(2 * MiB));
  EXPECT_EQ(cur(st.reserved_bytes, kLargePool), int64_t(20 * MiB + 30 * MiB));
  EXPECT_EQ(cur(st.allocated_bytes), int64_t(1024 + 2 * MiB + 30 * MiB));
  EXPECT_EQ(cur(st.requested_bytes), int64_t(1000 + 2 * MiB + 30 * MiB));
  EXPECT_EQ(cur(st.allocation), 3);
  expect_consistent(*f.a);
  f.a->free(s);
  f.a->free(l);
  f.a->free(h);
  st = f.a->stats();
  EXPECT_EQ(cur(st.allocated_bytes), 0);
  EXPECT_EQ(cur(st.reserved_bytes), int64_t(52 * MiB));  // cached
  EXPECT_EQ(f.a->malloc(0, kS1), nullptr);
  expect_consistent(*f.a);
}

TEST(BlockPool, CachedBlockIsReusedWithoutTheDevice) {
  Fixture f;
  Block* b = f.a->malloc(MiB, kS1);
  const uintptr_t p = f.addr(b);
  f.a->free(b);
  const int64_t calls = f.state.alloc_calls;
  for (int i = 0; i < 100; ++i) {
    Block* c = f.a->malloc(MiB, kS1);
    EXPECT_EQ(f.addr(c), p);
    f.a->free(c);
  }
  EXPECT_EQ(f.state.alloc_calls, calls);
  expect_consistent(*f.a);
}

TEST(BlockPool, BestFit) {
  Fixture f;
  // One 20 MiB large segment cut into A(4) B(2) C(6) D(2) and a free tail of 6 MiB.
  Block* A = f.a->malloc(4 * MiB, kS1);
  Block* B = f.a->malloc(2 * MiB, kS1);
  Block* C = f.a->malloc(6 * MiB, kS1);
  Block* D = f.a->malloc(2 * MiB, kS1);
  EXPECT_EQ(f.a->stats().segment[kAllPools].current, 1);
  const uintptr_t a_addr = f.addr(A), c_addr = f.addr(C);
  EXPECT_EQ(f.addr(B), a_addr + 4 * MiB);
  f.a->free(A);
  f.a->free(C);
  expect_consistent(*f.a);
  EXPECT_EQ(f.a->stats().inactive_split[kAllPools].current, 3);  // A, C, tail
  Block* x = f.a->malloc(3 * MiB, kS1);  // smallest that fits: A (4 MiB); 1 MiB left is not kept apart
  EXPECT_EQ(f.addr(x), a_addr);
  EXPECT_EQ(CachingBlockAllocator::block_size(x), 4 * MiB);
  Block* y = f.a->malloc(5 * MiB, kS1);  // C and the tail are both 6 MiB: the lower address wins
  EXPECT_EQ(f.addr(y), c_addr);
  expect_consistent(*f.a);
  for (Block* b : {x, y, B, D}) f.a->free(b);
  const auto snap = f.a->snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].blocks.size(), 1u);  // everything merged back
  expect_consistent(*f.a);
}

TEST(BlockPool, SplitRules) {
  Fixture f;
  // Large pool: the remainder is kept only if it is more than 1 MiB.
  Block* a = f.a->malloc(19 * MiB, kS1);
  EXPECT_EQ(CachingBlockAllocator::block_size(a), 20 * MiB);
  Block* b = f.a->malloc(18 * MiB + 512 * KiB, kS1);
  EXPECT_EQ(CachingBlockAllocator::block_size(b), 18 * MiB + 512 * KiB);
  // Small pool: any remainder of 512 bytes or more.
  Block* c = f.a->malloc(MiB, kS1);
  Block* d = f.a->malloc(MiB, kS1);
  EXPECT_EQ(f.addr(d), f.addr(c) + MiB);  // the same 2 MiB segment
  Block* e = f.a->malloc(2 * MiB - 512, kS1);
  EXPECT_EQ(CachingBlockAllocator::block_size(e), 2 * MiB - 512);  // large pool, 20 MiB segment, split
  expect_consistent(*f.a);
  for (Block* x : {a, b, c, d, e}) f.a->free(x);
  expect_consistent(*f.a);
}

TEST(BlockPool, MergeAndInactiveSplitStats) {
  Fixture f;
  Block* a = f.a->malloc(1000, kS1);
  Block* b = f.a->malloc(1000, kS1);
  Block* c = f.a->malloc(1000, kS1);
  EXPECT_EQ(f.addr(b), f.addr(a) + 1024);
  EXPECT_EQ(f.addr(c), f.addr(b) + 1024);
  DeviceStats st = f.a->stats();
  EXPECT_EQ(cur(st.inactive_split), 1);  // the tail of the segment
  EXPECT_EQ(cur(st.inactive_split_bytes), int64_t(2 * MiB - 3 * 1024));
  f.a->free(b);  // between two allocated blocks
  st = f.a->stats();
  EXPECT_EQ(cur(st.inactive_split), 2);
  f.a->free(a);  // merges with b
  st = f.a->stats();
  EXPECT_EQ(cur(st.inactive_split), 2);
  EXPECT_EQ(cur(st.inactive_split_bytes), int64_t(2 * MiB - 1024));
  expect_consistent(*f.a);
  f.a->free(c);  // merges both sides: one whole block, not split any more
  st = f.a->stats();
  EXPECT_EQ(cur(st.inactive_split), 0);
  EXPECT_EQ(cur(st.inactive_split_bytes), 0);
  EXPECT_EQ(f.a->snapshot()[0].blocks.size(), 1u);
  expect_consistent(*f.a);
}

// ---- streams ----------------------------------------------------------------------------------------

TEST(BlockPool, BlocksBelongToTheirStream) {
  Fixture f;
  Block* a = f.a->malloc(MiB, kS1);
  const uintptr_t p = f.addr(a);
  f.a->free(a);
  Block* b = f.a->malloc(MiB, kS2);  // never another stream's free block
  EXPECT_NE(f.addr(b), p);
  EXPECT_EQ(f.a->stats().segment[kAllPools].current, 2);
  Block* c = f.a->malloc(MiB, kS1);
  EXPECT_EQ(f.addr(c), p);
  const auto snap = f.a->snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_NE(snap[0].stream, snap[1].stream);
  f.a->free(b);
  f.a->free(c);
  expect_consistent(*f.a);
}

TEST(BlockPool, RecordStreamDefersReuseUntilTheEventsComplete) {
  Fixture f;
  Block* a = f.a->malloc(MiB, kS1);
  const uintptr_t pa = f.addr(a);
  f.a->record_stream(a, kS1);  // its own stream: nothing to do
  f.a->record_stream(a, kS2);
  f.a->record_stream(a, kS2);  // once per stream
  EXPECT_TRUE(f.a->record_stream(reinterpret_cast<void*>(pa + 100), kS3));  // an interior pointer
  EXPECT_FALSE(f.a->record_stream(reinterpret_cast<void*>(pa + 3 * MiB), kS3));
  f.a->free(a);
  EXPECT_EQ(f.a->pending_events(), 2u);  // one event on kS2, one on kS3
  DeviceStats st = f.a->stats();
  EXPECT_EQ(cur(st.allocation), 0);
  EXPECT_EQ(cur(st.active), 1);  // freed but still in use
  expect_consistent(*f.a);

  Block* b = f.a->malloc(MiB, kS1);  // must not be a's memory
  EXPECT_NE(f.addr(b), pa);
  f.a->free(b);
  f.state.complete(kS2);
  Block* c = f.a->malloc(MiB, kS1);  // kS3's event is still pending
  EXPECT_NE(f.addr(c), pa);
  EXPECT_EQ(f.a->pending_events(), 1u);
  f.a->free(c);
  f.state.complete(kS3);
  Block* d = f.a->malloc(2 * MiB - 512 * KiB, kS3);  // processes the events first (other stream: new segment)
  EXPECT_EQ(f.a->pending_events(), 0u);
  Block* e = f.a->malloc(2 * MiB, kS1);  // large pool
  f.a->free(d);
  f.a->free(e);
  const auto snap = f.a->snapshot();
  for (const auto& s : snap) EXPECT_EQ(s.blocks.size(), 1u);  // a merged back with its neighbour
  Block* g = f.a->malloc(MiB, kS1);
  EXPECT_EQ(f.addr(g), pa);
  f.a->free(g);
  expect_consistent(*f.a);
  EXPECT_EQ(f.state.unreleased_events(), 0);
}

TEST(BlockPool, EmptyCacheWaitsForEventsAndReleasesWholeSegments) {
  Fixture f;
  Block* a = f.a->malloc(MiB, kS1);
  Block* b = f.a->malloc(MiB, kS1);  // same segment
  Block* c = f.a->malloc(30 * MiB, kS1);
  f.a->record_stream(c, kS2);
  f.a->free(c);
  f.a->free(a);
  f.a->empty_cache();  // c's segment goes (after waiting), a+b's stays: b is allocated
  DeviceStats st = f.a->stats();
  EXPECT_EQ(st.num_sync_all_streams, 1);
  EXPECT_EQ(f.state.waits, 1);
  EXPECT_EQ(cur(st.segment), 1);
  EXPECT_EQ(cur(st.reserved_bytes), int64_t(2 * MiB));
  expect_consistent(*f.a);
  f.a->free(b);
  f.a->empty_cache();
  EXPECT_EQ(cur(f.a->stats().reserved_bytes), 0);
  EXPECT_TRUE(f.state.live.empty());
}

// ---- max_split_size ----------------------------------------------------------------------------------

TEST(BlockPool, MaxSplitSizeKeepsOversizeBlocksWhole) {
  Fixture f(1024 * MiB, "max_split_size_mb:40");
  EXPECT_EQ(f.a->stats().max_split_size, int64_t(40 * MiB));
  Block* big = f.a->malloc(50 * MiB, kS1);
  const uintptr_t p = f.addr(big);
  EXPECT_EQ(f.a->stats().oversize_segments.current, 1);
  EXPECT_EQ(f.a->stats().oversize_allocations.current, 1);
  f.a->free(big);
  Block* small = f.a->malloc(30 * MiB, kS1);  // below max_split: never takes an oversize block
  EXPECT_NE(f.addr(small), p);
  Block* over = f.a->malloc(45 * MiB, kS1);  // oversize, and 50 < 45 + 20: reused whole, not split
  EXPECT_EQ(f.addr(over), p);
  EXPECT_EQ(CachingBlockAllocator::block_size(over), 50 * MiB);
  f.a->free(over);
  Block* other = f.a->malloc(41 * MiB, kS1);  // 50 < 41 + 20: reused
  EXPECT_EQ(f.addr(other), p);
  f.a->free(other);
  Block* c70 = f.a->malloc(70 * MiB, kS1);
  f.a->free(c70);
  Block* d = f.a->malloc(42 * MiB, kS1);  // best fit is the 50 MiB block
  EXPECT_EQ(f.addr(d), p);
  Block* e = f.a->malloc(41 * MiB, kS1);  // only the 70 MiB block is cached: 70 >= 41 + 20, new segment
  EXPECT_NE(CachingBlockAllocator::block_size(e), 70 * MiB);
  expect_consistent(*f.a);
  for (Block* x : {small, d, e}) f.a->free(x);
  expect_consistent(*f.a);
}

TEST(BlockPool, OversizeCachedBlocksAreReleasedBeforeTheWholeCache) {
  Fixture f(200 * MiB, "max_split_size_mb:40");
  Block* a = f.a->malloc(60 * MiB, kS1);
  Block* b = f.a->malloc(60 * MiB, kS1);
  Block* small = f.a->malloc(MiB, kS1);
  f.a->free(a);
  f.a->free(b);
  f.a->free(small);
  // 122 MiB reserved; 100 MiB more needs the cached oversize blocks released (largest first), not the
  // small segment, and no wait for events.
  Block* c = f.a->malloc(100 * MiB, kS1);
  DeviceStats st = f.a->stats();
  EXPECT_EQ(st.num_alloc_retries, 0);
  EXPECT_EQ(st.num_sync_all_streams, 0);
  EXPECT_EQ(cur(st.segment, kSmallPool), 1);
  f.a->free(c);
  expect_consistent(*f.a);
}

// ---- out of memory ---------------------------------------------------------------------------------

TEST(BlockPool, OutOfMemoryReleasesTheCacheRetriesThenRaises) {
  Fixture f(100 * MiB);
  Block* a = f.a->malloc(30 * MiB, kS1);
  Block* b = f.a->malloc(30 * MiB, kS2);
  f.a->record_stream(b, kS1);
  f.a->free(b);  // cached once its event completes
  // 60 + 60 > 100: the cache (b, after waiting for its event) goes and the retry succeeds.
  Block* c = f.a->malloc(60 * MiB, kS1);
  DeviceStats st = f.a->stats();
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_sync_all_streams, 1);
  EXPECT_EQ(st.num_ooms, 0);
  EXPECT_EQ(cur(st.reserved_bytes), int64_t(90 * MiB));
  try {
    f.a->malloc(200 * MiB, kS1);
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("CUDA out of memory. Tried to allocate 200.00 MiB. GPU 0 has a total capacity of 100.00 MiB "
                     "of which 10.00 MiB is free. Of the allocated memory 90.00 MiB is allocated by tessera, and "
                     "0 bytes is reserved by tessera but unallocated. If reserved but unallocated memory is large "
                     "try setting max_split_size_mb in TESSERA_CUDA_ALLOC_CONF to avoid fragmentation."),
              std::string::npos)
        << m;
  }
  st = f.a->stats();
  EXPECT_EQ(st.num_ooms, 1);
  EXPECT_EQ(st.num_alloc_retries, 2);
  // The allocator still works afterwards (a small segment fits in the 10 MiB left).
  Block* d = f.a->malloc(512 * KiB, kS1);
  ASSERT_NE(d, nullptr);
  for (Block* x : {a, c, d}) f.a->free(x);
  expect_consistent(*f.a);
}

TEST(BlockPool, MemoryFraction) {
  Fixture f(100 * MiB);
  EXPECT_THROW(f.a->set_memory_fraction(1.5), ValueError);
  EXPECT_THROW(f.a->set_memory_fraction(-0.1), ValueError);
  f.a->set_memory_fraction(0.5);
  Block* a = f.a->malloc(40 * MiB, kS1);
  try {
    f.a->malloc(12 * MiB, kS1);
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("50.00 MiB allowed; Of the allocated memory 40.00 MiB"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(f.state.failed_allocs, 0);  // refused without asking the device
  Block* b = f.a->malloc(10 * MiB, kS1);  // a 10 MiB segment: exactly 50 MiB reserved, which is allowed
  f.a->free(a);
  f.a->free(b);
  expect_consistent(*f.a);
}

TEST(BlockPool, HugeRequestRaisesWithoutOverflow) {
  Fixture f(100 * MiB);
  EXPECT_THROW(f.a->malloc(size_t(1) << 63, kS1), OutOfMemoryError);
  EXPECT_THROW(f.a->malloc(size_t(10) << 40, kS1), OutOfMemoryError);  // 10 TiB
  EXPECT_EQ(f.a->stats().num_ooms, 2);
}

TEST(BlockPool, GarbageCollectionReleasesOldCachedSegments) {
  Fixture f(100 * MiB, "garbage_collection_threshold:0.5");
  Block* a = f.a->malloc(30 * MiB, kS1);
  Block* b = f.a->malloc(30 * MiB, kS2);
  f.a->free(a);
  f.a->free(b);
  EXPECT_EQ(cur(f.a->stats().reserved_bytes), int64_t(60 * MiB));
  // 60 MiB reserved > 0.5 * 100 MiB: a new segment for kS3 first collects the cached ones.
  Block* c = f.a->malloc(12 * MiB, kS3);
  const DeviceStats st = f.a->stats();
  EXPECT_LT(cur(st.reserved_bytes), int64_t(60 * MiB));
  EXPECT_EQ(st.num_alloc_retries, 0);
  EXPECT_EQ(st.num_sync_all_streams, 0);
  f.a->free(c);
  expect_consistent(*f.a);
}

TEST(BlockPool, CudaMallocBackendBypassesTheCache) {
  Fixture f(100 * MiB, "backend:cudaMalloc");
  Block* a = f.a->malloc(1000, kS1);
  Block* b = f.a->malloc(3 * MiB, kS1);
  EXPECT_EQ(f.state.live.size(), 2u);
  EXPECT_EQ(CachingBlockAllocator::block_size(a), 1024u);
  EXPECT_EQ(cur(f.a->stats().segment, kSmallPool), 1);
  expect_consistent(*f.a);
  f.a->record_stream(a, kS2);
  f.a->free(a);
  f.a->free(b);
  EXPECT_TRUE(f.state.live.empty());  // returned at once
  EXPECT_EQ(cur(f.a->stats().reserved_bytes), 0);
  EXPECT_THROW(f.a->malloc(200 * MiB, kS1), OutOfMemoryError);
  expect_consistent(*f.a);
}

TEST(BlockPool, DoubleFreeRaises) {
  Fixture f;
  Block* a = f.a->malloc(MiB, kS1);
  Block* keep = f.a->malloc(MiB, kS1);  // keeps `a` from merging away
  f.a->free(a);
  EXPECT_THROW(f.a->free(a), ValueError);
  f.a->free(keep);
}

// ---- statistics ---------------------------------------------------------------------------------------

TEST(BlockPool, StatsMapSummaryAndPeaks) {
  Fixture f;
  Block* a = f.a->malloc(3 * MiB, kS1);
  Block* b = f.a->malloc(100, kS1);
  f.a->free(a);
  DeviceStats st = f.a->stats();
  EXPECT_EQ(st.allocated_bytes[kAllPools].peak, int64_t(3 * MiB + 512));
  f.a->reset_peak_stats();
  st = f.a->stats();
  EXPECT_EQ(st.allocated_bytes[kAllPools].peak, 512);
  EXPECT_EQ(st.allocated_bytes[kAllPools].allocated, int64_t(3 * MiB + 512));
  f.a->reset_accumulated_stats();
  st = f.a->stats();
  EXPECT_EQ(st.allocated_bytes[kAllPools].allocated, 0);
  EXPECT_EQ(st.allocated_bytes[kAllPools].current, 512);

  const auto m = stats_as_map(st);
  for (const char* key : {"allocated_bytes.all.current", "reserved_bytes.large_pool.peak",
                          "active_bytes.small_pool.allocated", "inactive_split_bytes.all.freed",
                          "requested_bytes.all.current", "allocation.all.current", "segment.small_pool.current",
                          "active.large_pool.peak", "inactive_split.all.current", "oversize_allocations.current",
                          "oversize_segments.peak", "num_alloc_retries", "num_ooms", "num_sync_all_streams",
                          "num_device_alloc", "num_device_free", "max_split_size"})
    EXPECT_TRUE(m.count(key)) << key;
  EXPECT_EQ(m.at("allocated_bytes.all.current"), 512);
  EXPECT_EQ(m.at("segment.all.current"), 2);
  EXPECT_EQ(m.at("max_split_size"), -1);

  const std::string table = memory_summary_table(st, 0);
  EXPECT_NE(table.find("tessera CUDA memory summary, device ID 0"), std::string::npos);
  EXPECT_NE(table.find("Allocated memory"), std::string::npos);
  EXPECT_NE(table.find("Non-releasable memory"), std::string::npos);
  EXPECT_NE(table.find("from small pool"), std::string::npos);
  size_t start = 0, lines = 0;
  while (start < table.size()) {
    const size_t end = table.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    EXPECT_EQ(end - start, 77u) << table.substr(start, end - start);
    start = end + 1;
    ++lines;
  }
  EXPECT_GT(lines, 30u);
  f.a->free(b);
}

TEST(BlockPool, FormatSize) {
  EXPECT_EQ(format_size(512), "512 bytes");
  EXPECT_EQ(format_size(1024), "1024 bytes");
  EXPECT_EQ(format_size(1536), "1.50 KiB");
  EXPECT_EQ(format_size(20 * MiB), "20.00 MiB");
  EXPECT_EQ(format_size(size_t(3) << 30), "3.00 GiB");
}

// A long random workload over two streams, with cross-stream uses, frees, event completions and cache
// releases: no two live blocks ever overlap, no memory awaiting an event is handed out, the statistics
// always equal the snapshot's sums, and at the end everything returns to the device.
TEST(BlockPool, RandomWorkloadKeepsStatsAndSnapshotsConsistent) {
  Fixture f(6ull << 30, "max_split_size_mb:64");
  std::mt19937_64 rng(12345);
  struct Live {
    Block* b;
    uintptr_t lo, hi;
    void* stream;
  };
  std::vector<Live> live;
  struct Pending {
    uintptr_t lo, hi;
    FakeEvent* ev;
  };
  std::vector<Pending> pending;
  void* streams[2] = {kS1, kS2};
  auto draw_size = [&]() -> size_t {
    const int kind = static_cast<int>(rng() % 100);
    if (kind < 60) return 1 + rng() % (64 * KiB);        // small tensors
    if (kind < 85) return 1 + rng() % MiB;               // up to the small pool's limit
    if (kind < 98) return MiB + 1 + rng() % (16 * MiB);  // large pool
    return 16 * MiB + rng() % (96 * MiB);                // some oversize
  };
  auto overlaps = [&](uintptr_t lo, uintptr_t hi) {
    for (const Live& l : live)
      if (lo < l.hi && l.lo < hi) return true;
    for (const Pending& p : pending)
      if (!p.ev->done && lo < p.hi && p.lo < hi) return true;
    return false;
  };
  const int steps = 1000000;
  int64_t ooms = 0;
  for (int i = 0; i < steps; ++i) {
    const int op = static_cast<int>(rng() % 100);
    if (op < 50 || live.empty()) {
      if (live.size() > 400) continue;
      void* s = streams[rng() % 2];
      const size_t n = draw_size();
      Block* b = nullptr;
      try {
        b = f.a->malloc(n, s);
      } catch (const OutOfMemoryError&) {
        ++ooms;
        continue;
      }
      const auto lo = reinterpret_cast<uintptr_t>(CachingBlockAllocator::address(b));
      const uintptr_t hi = lo + CachingBlockAllocator::block_size(b);
      ASSERT_GE(CachingBlockAllocator::block_size(b), n);
      // Checked on a sample only: the scan is linear in the live set.
      if (i % 7 == 0) {
        ASSERT_FALSE(overlaps(lo, hi)) << "step " << i << ": handed out memory still in use";
      }
      live.push_back({b, lo, hi, s});
    } else if (op < 95) {
      const size_t k = rng() % live.size();
      Live l = live[k];
      live[k] = live.back();
      live.pop_back();
      const bool cross = rng() % 10 == 0;
      void* other = l.stream == kS1 ? kS2 : kS1;
      if (cross) f.a->record_stream(l.b, other);
      const size_t events_before = f.state.events.size();
      f.a->free(l.b);
      if (cross) {
        ASSERT_EQ(f.state.events.size(), events_before + 1);
        pending.push_back({l.lo, l.hi, f.state.events.back().get()});
      }
    } else if (op < 99) {
      f.state.complete(streams[rng() % 2]);
      std::erase_if(pending, [](const Pending& p) { return p.ev->done; });
    } else if (rng() % 20 == 0) {
      f.a->empty_cache();
      std::erase_if(pending, [](const Pending& p) { return p.ev->done; });
    }
    if (i % 10000 == 0) {
      expect_consistent(*f.a);
      // Every live block lies in a segment of the stream that asked for it.
      const auto snap = f.a->snapshot();
      for (const Live& l : live) {
        auto it = std::upper_bound(snap.begin(), snap.end(), l.lo,
                                   [](uintptr_t a, const cuda::SegmentInfo& s) { return a < s.address; });
        ASSERT_NE(it, snap.begin());
        --it;
        ASSERT_LE(l.hi, it->address + static_cast<uintptr_t>(it->total_size));
        ASSERT_EQ(it->stream, l.stream) << "step " << i << ": a block of another stream was handed out";
      }
      if (::testing::Test::HasFailure()) FAIL() << "inconsistent at step " << i;
    }
  }
  for (const Live& l : live) f.a->free(l.b);
  f.state.complete(kS1);
  f.state.complete(kS2);
  f.a->empty_cache();
  expect_consistent(*f.a);
  const DeviceStats st = f.a->stats();
  EXPECT_EQ(cur(st.allocated_bytes), 0);
  EXPECT_EQ(cur(st.reserved_bytes), 0);
  EXPECT_EQ(cur(st.active), 0);
  EXPECT_EQ(cur(st.requested_bytes), 0);
  EXPECT_EQ(st.num_ooms, ooms);
  EXPECT_EQ(st.num_device_alloc, st.num_device_free);
  EXPECT_TRUE(f.state.live.empty()) << "segments leaked";
  EXPECT_EQ(f.state.unreleased_events(), 0);
  EXPECT_GT(st.allocation[kAllPools].allocated, 100000);  // the workload did run
}

TEST(BlockPool, DestructorReturnsEverything) {
  FakeState state;
  state.capacity = 100 * MiB;
  {
    CachingBlockAllocator a(0, std::make_unique<FakeBackend>(&state));
    Block* b = a.malloc(MiB, kS1);
    a.record_stream(b, kS2);
    a.free(b);
    a.malloc(5 * MiB, kS1);  // still allocated at destruction
  }
  EXPECT_TRUE(state.live.empty());
  EXPECT_EQ(state.unreleased_events(), 0);
}

// ---- the pinned host cache -------------------------------------------------------------------------

TEST(HostBlockCache, ReusesBlocksAfterTheirEvents) {
  FakeState state;
  state.capacity = 64 * MiB;
  {
    HostBlockCache c(std::make_unique<FakeBackend>(&state));
    EXPECT_EQ(c.allocate(0), nullptr);
    HostBlock* a = c.allocate(1000);
    EXPECT_EQ(HostBlockCache::block_size(a), 1024u);
    void* pa = HostBlockCache::address(a);
    EXPECT_TRUE(c.contains(static_cast<char*>(pa) + 1000));
    EXPECT_FALSE(c.contains(static_cast<char*>(pa) + 1024));
    c.free(a);
    HostBlock* b = c.allocate(700);  // same power-of-two bin: reused
    EXPECT_EQ(HostBlockCache::address(b), pa);
    EXPECT_TRUE(c.record_use(static_cast<char*>(pa) + 10, kS1));
    EXPECT_FALSE(c.record_use(reinterpret_cast<void*>(16), kS1));
    c.free(b);
    EXPECT_EQ(c.stats().pending_events, 1);
    HostBlock* d = c.allocate(1024);  // the event has not completed: a new block
    EXPECT_NE(HostBlockCache::address(d), pa);
    state.complete(kS1);
    HostBlock* e = c.allocate(1024);
    EXPECT_EQ(HostBlockCache::address(e), pa);
    EXPECT_EQ(c.stats().pending_events, 0);
    EXPECT_EQ(c.stats().allocated_bytes, 2048);
    c.free(d);
    c.free(e);
    EXPECT_THROW(c.free(e), ValueError);
    c.empty_cache();
    EXPECT_EQ(c.stats().reserved_bytes, 0);
    EXPECT_TRUE(state.live.empty());
  }
}

TEST(HostBlockCache, OutOfMemoryEmptiesTheCacheThenRaises) {
  FakeState state;
  state.capacity = 40 * MiB;
  HostBlockCache c(std::make_unique<FakeBackend>(&state));
  HostBlock* a = c.allocate(16 * MiB);
  c.free(a);                           // cached 16 MiB
  HostBlock* b = c.allocate(32 * MiB);  // 16 + 32 > 40: the cached block goes, then it fits
  EXPECT_EQ(c.stats().num_host_free, 1);
  EXPECT_THROW(c.allocate(32 * MiB), OutOfMemoryError);
  c.free(b);
}

// ---- TESSERA_CUDA_ALLOC_CONF ------------------------------------------------------------------------

TEST(AllocConf, ParsesEveryKey) {
  AllocConf c = parse_alloc_conf("");
  EXPECT_EQ(c.max_split_size, std::numeric_limits<size_t>::max());
  EXPECT_TRUE(c.use_cache);
  c = parse_alloc_conf(" max_split_size_mb:256 , garbage_collection_threshold:0.8,backend:native ");
  EXPECT_EQ(c.max_split_size, 256 * MiB);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.8);
  EXPECT_TRUE(c.use_cache);
  c = parse_alloc_conf("backend:cudaMalloc");
  EXPECT_FALSE(c.use_cache);
  c = parse_alloc_conf("roundup_power2_divisions:8");
  EXPECT_EQ(c.divisions_for(100), 8u);
  EXPECT_EQ(c.divisions_for(size_t(100) << 30), 8u);
  // Per interval: below 512 MiB 1, [512 MiB, 1 GiB) 2, [1, 2) GiB 4, from 2 GiB 8.
  c = parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8],max_split_size_mb:100");
  EXPECT_EQ(c.divisions_for(MiB), 1u);
  EXPECT_EQ(c.divisions_for(300 * MiB), 1u);
  EXPECT_EQ(c.divisions_for(600 * MiB), 2u);
  EXPECT_EQ(c.divisions_for(1500 * MiB), 4u);
  EXPECT_EQ(c.divisions_for(size_t(3) << 30), 8u);
  EXPECT_EQ(c.max_split_size, 100 * MiB);
}

TEST(AllocConf, BadSettingsRaiseValueErrorNamingThem) {
  auto message = [](const char* text) -> std::string {
    try {
      parse_alloc_conf(text);
    } catch (const ValueError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(message("foo:1").find("unknown option 'foo'"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb").find("expected 'key:value'"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb:10").find("max_split_size_mb must be > 20"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb:abc").find("max_split_size_mb"), std::string::npos);
  EXPECT_NE(message("max_split_size_mb:-5").find("max_split_size_mb"), std::string::npos);
  EXPECT_NE(message("garbage_collection_threshold:1.5").find("garbage_collection_threshold"), std::string::npos);
  EXPECT_NE(message("garbage_collection_threshold:0").find("garbage_collection_threshold"), std::string::npos);
  EXPECT_NE(message("roundup_power2_divisions:3").find("power of two"), std::string::npos);
  EXPECT_NE(message("roundup_power2_divisions:[256:3]").find("power of two"), std::string::npos);
  EXPECT_NE(message("roundup_power2_divisions:[300:2]").find("300 MiB is not a power of two"), std::string::npos);
  EXPECT_NE(message("roundup_power2_divisions:[256:2").find("missing ']'"), std::string::npos);
  EXPECT_NE(message("backend:xyz").find("unknown backend 'xyz'"), std::string::npos);
  for (const char* bad : {"foo:1", "max_split_size_mb:10"})
    EXPECT_NE(message(bad).find("TESSERA_CUDA_ALLOC_CONF"), std::string::npos);
}

TEST(AllocConf, ReadsTheEnvironment) {
  ::setenv("TESSERA_CUDA_ALLOC_CONF", "max_split_size_mb:64", 1);
  EXPECT_EQ(alloc_conf_from_env().max_split_size, 64 * MiB);
  ::setenv("TESSERA_CUDA_ALLOC_CONF", "nonsense", 1);
  EXPECT_THROW(alloc_conf_from_env(), ValueError);
  ::unsetenv("TESSERA_CUDA_ALLOC_CONF");
  EXPECT_TRUE(alloc_conf_from_env().use_cache);
}

}  // namespace
