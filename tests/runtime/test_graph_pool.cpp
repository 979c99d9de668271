// The caching allocator's graph private pools (Note [Graph private pools]) on the fake device of
// fake_device.h: pools never share segments with the general pool, sharing between graphs captured in
// order, release, deferred frees and no event work during a capture, the cudaMalloc backend, bad calls,
// and a long random workload with the statistics checked against snapshots.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "runtime/block_pool.h"
#include "runtime/fake_device.h"
#include "tessera/error.h"

namespace {

using namespace tessera;
using namespace tessera::alloc;
using namespace tessera::alloc::fake;

// A capture on `stream`: requests on it go to pool `id` until the guard ends (as cuda::Graph opens them).
StreamFilter only(void* stream) {
  return [stream](void* s) { return s == stream; };
}

// The pool of the segment holding `b`.
MempoolId segment_pool_of(CachingBlockAllocator& a, Block* b) {
  const auto p = reinterpret_cast<uintptr_t>(CachingBlockAllocator::address(b));
  for (const cuda::SegmentInfo& s : a.snapshot())
    if (p >= s.address && p < s.address + static_cast<uintptr_t>(s.total_size)) return a.segment_pool_id(s.address);
  ADD_FAILURE() << "no segment holds the block";
  return {};
}

constexpr MempoolId kPoolA{1, 0}, kPoolB{2, 0}, kShared{0, 1};

TEST(GraphPool, AllocationsInsideAndOutsideAPoolNeverShareSegments) {
  Fixture f;
  Block* before = f.a->malloc(1000, kS1);  // a general small segment with free room
  Block* before_large = f.a->malloc(3 * MiB, kS1);
  const int64_t segments = cur(f.a->stats().segment);
  f.a->begin_allocate_to_pool(kPoolA, only(kS1));
  EXPECT_TRUE(f.a->capture_underway());
  Block* in_small = f.a->malloc(1000, kS1);
  Block* in_large = f.a->malloc(3 * MiB, kS1);
  Block* other = f.a->malloc(1000, kS2);  // another stream, not captured: the general pool
  EXPECT_EQ(CachingBlockAllocator::pool_id(in_small), kPoolA);
  EXPECT_EQ(CachingBlockAllocator::pool_id(in_large), kPoolA);
  EXPECT_EQ(CachingBlockAllocator::pool_id(other), (MempoolId{0, 0}));
  EXPECT_EQ(segment_pool_of(*f.a, in_small), kPoolA);
  EXPECT_EQ(segment_pool_of(*f.a, before), (MempoolId{0, 0}));
  EXPECT_EQ(cur(f.a->stats().segment), segments + 3);  // two private segments and kS2's own
  // A block freed during the capture returns to the private pool and is reused there.
  const uintptr_t small_addr = f.addr(in_small);
  f.a->free(in_small);
  Block* again = f.a->malloc(1000, kS1);
  EXPECT_EQ(f.addr(again), small_addr);
  f.a->end_allocate_to_pool(kPoolA);
  EXPECT_FALSE(f.a->capture_underway());
  // After the capture the general pool never takes the private pool's free memory.
  f.a->free(again);
  Block* after = f.a->malloc(1000, kS1);
  EXPECT_EQ(CachingBlockAllocator::pool_id(after), (MempoolId{0, 0}));
  EXPECT_NE(f.addr(after), small_addr);
  EXPECT_EQ(segment_pool_of(*f.a, after), (MempoolId{0, 0}));
  expect_consistent(*f.a);
  for (Block* b : {before, before_large, in_large, other, after}) f.a->free(b);
  expect_consistent(*f.a);
  // The pool still has a use (its graph lives): empty_cache keeps its segments.
  f.a->empty_cache();
  EXPECT_EQ(cur(f.a->stats().segment), 2);
  f.a->release_pool(kPoolA);
  f.a->empty_cache();
  EXPECT_EQ(cur(f.a->stats().reserved_bytes), 0);
  EXPECT_EQ(f.a->num_private_pools(), 0u);
  EXPECT_TRUE(f.state.live.empty());
}

TEST(GraphPool, SharedBetweenGraphsCapturedInOrder) {
  Fixture f;
  // Graph 1: a temporary freed within the capture, an output kept.
  f.a->begin_allocate_to_pool(kShared, only(kS1));
  Block* tmp = f.a->malloc(4 * MiB, kS1);
  Block* out1 = f.a->malloc(4 * MiB, kS1);
  const uintptr_t tmp_addr = f.addr(tmp);
  f.a->free(tmp);
  f.a->end_allocate_to_pool(kShared);
  EXPECT_EQ(f.a->pool_use_count(kShared), 1);
  const int64_t device_allocs = f.a->stats().num_device_alloc;
  // Graph 2, captured after graph 1 into the same pool, reuses graph 1's freed memory.
  f.a->begin_allocate_to_pool(kShared, only(kS1));
  EXPECT_EQ(f.a->pool_use_count(kShared), 2);
  Block* b2 = f.a->malloc(4 * MiB, kS1);
  EXPECT_EQ(f.addr(b2), tmp_addr);
  EXPECT_EQ(f.a->stats().num_device_alloc, device_allocs);
  f.a->end_allocate_to_pool(kShared);
  expect_consistent(*f.a);
  // Graph 1 goes: the pool stays (graph 2 uses it).
  f.a->release_pool(kShared);
  f.a->empty_cache();
  EXPECT_EQ(f.a->pool_use_count(kShared), 1);
  EXPECT_EQ(cur(f.a->stats().segment), 1);
  // Graph 2 goes: the pool is freeable; its segment holds graph outputs still allocated, so it stays until
  // they are freed, into the pool, and the cache is released.
  f.a->release_pool(kShared);
  EXPECT_EQ(f.a->pool_use_count(kShared), 0);
  f.a->release_freeable_pools();
  EXPECT_EQ(cur(f.a->stats().segment), 1);
  EXPECT_EQ(f.a->num_private_pools(), 1u);
  f.a->free(out1);
  f.a->free(b2);
  expect_consistent(*f.a);
  EXPECT_EQ(cur(f.a->stats().segment), 1);  // freed into the pool, not to the device yet
  f.a->release_freeable_pools();
  EXPECT_EQ(cur(f.a->stats().segment), 0);
  EXPECT_EQ(f.a->num_private_pools(), 0u);
  EXPECT_THROW(f.a->release_pool(kShared), ValueError);
  EXPECT_TRUE(f.state.live.empty());
  expect_consistent(*f.a);
}

TEST(GraphPool, ReleasedPoolWithoutSegmentsGoesAtOnce) {
  Fixture f;
  f.a->begin_allocate_to_pool(kPoolA, only(kS1));
  f.a->end_allocate_to_pool(kPoolA);
  EXPECT_EQ(f.a->num_private_pools(), 1u);
  f.a->release_pool(kPoolA);
  EXPECT_EQ(f.a->num_private_pools(), 0u);
}

TEST(GraphPool, RepeatedCapturesReuseTheMemoryOfReleasedPools) {
  // 100 graphs, each captured into a pool of its own and destroyed before the next capture begins
  // (which releases the freeable pools first, as cuda::Graph::capture_begin does): reserved memory stays flat.
  Fixture f;
  int64_t peak_reserved = 0;
  for (uint64_t i = 1; i <= 100; ++i) {
    f.a->release_freeable_pools();
    const MempoolId id{i, 0};
    f.a->begin_allocate_to_pool(id, only(kS1));
    std::vector<Block*> bs;
    for (size_t n : {size_t(1000), size_t(64 * KiB), size_t(3 * MiB), size_t(12 * MiB)}) bs.push_back(f.a->malloc(n, kS1));
    for (Block* b : bs) f.a->free(b);
    f.a->end_allocate_to_pool(id);
    f.a->release_pool(id);
    peak_reserved = std::max(peak_reserved, cur(f.a->stats().reserved_bytes));
    expect_consistent(*f.a);
  }
  EXPECT_LE(peak_reserved, static_cast<int64_t>(2 * MiB + 20 * MiB + 12 * MiB));
  EXPECT_LE(f.a->num_private_pools(), 1u);
}

TEST(GraphPool, RecordStreamFreesDuringACaptureRecordNoEventUntilItEnds) {
  Fixture f;
  Block* x = f.a->malloc(MiB, kS1);  // before the capture, used by another stream too
  const uintptr_t x_addr = f.addr(x);
  Block* keep = f.a->malloc(1000, kS1);
  f.a->record_stream(x, kS2);
  f.a->begin_allocate_to_pool(kPoolA, only(kS3));
  f.a->free(x);
  EXPECT_TRUE(f.state.events.empty()) << "an event was recorded during a capture";
  EXPECT_EQ(f.a->deferred_frees(), 1u);
  EXPECT_EQ(cur(f.a->stats().active), 2);  // still active: not reusable
  EXPECT_EQ(cur(f.a->stats().allocation), 1);
  expect_consistent(*f.a);
  // Not handed out, neither to the capture nor to another stream.
  Block* y = f.a->malloc(MiB, kS1);
  EXPECT_NE(f.addr(y), x_addr);
  f.a->end_allocate_to_pool(kPoolA);
  EXPECT_EQ(f.a->deferred_frees(), 0u);
  ASSERT_EQ(f.state.events.size(), 1u);  // recorded once the capture ended
  EXPECT_EQ(f.state.events[0]->stream, kS2);
  f.a->free(y);
  f.state.complete(kS2);
  Block* z = f.a->malloc(MiB, kS1);
  EXPECT_EQ(f.addr(z), x_addr);
  for (Block* b : {z, keep}) f.a->free(b);
  f.a->release_pool(kPoolA);
  f.a->empty_cache();
  expect_consistent(*f.a);
  EXPECT_EQ(f.state.unreleased_events(), 0);
}

TEST(GraphPool, NoEventPollingNoReleaseAndNoEmptyCacheDuringACapture) {
  Fixture f(64 * MiB);
  Block* x = f.a->malloc(MiB, kS1);
  f.a->record_stream(x, kS2);
  f.a->free(x);  // awaits an event recorded before the capture
  Block* cached = f.a->malloc(30 * MiB, kS2);
  f.a->free(cached);  // 30 MiB cached in the general pool
  f.state.complete(kS2);
  f.a->begin_allocate_to_pool(kPoolA, only(kS1));
  Block* small = f.a->malloc(1000, kS1);
  EXPECT_EQ(f.a->pending_events(), 1u) << "events were polled during a capture";
  const int64_t frees = f.state.frees;
  try {
    f.a->malloc(40 * MiB, kS1);  // fits only if the cache were released
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError&) {
  }
  EXPECT_EQ(f.state.frees, frees) << "cached memory was released during a capture";
  EXPECT_EQ(f.state.waits, 0);
  try {
    f.a->empty_cache();
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("empty_cache: cannot synchronize the device while a CUDA graph is being "
                                         "captured"), std::string::npos) << e.what();
  }
  f.a->end_allocate_to_pool(kPoolA);
  Block* big = f.a->malloc(40 * MiB, kS1);  // now the cache may go
  EXPECT_EQ(f.a->pending_events(), 0u);
  for (Block* b : {small, big}) f.a->free(b);
  f.a->release_pool(kPoolA);
  f.a->empty_cache();
  expect_consistent(*f.a);
  EXPECT_TRUE(f.state.live.empty());
}

TEST(GraphPool, CudaMallocBackendCachesPrivatePoolsAndDefersGeneralFrees) {
  Fixture f(100 * MiB, "backend:cudaMalloc");
  Block* g = f.a->malloc(1000, kS1);
  f.a->begin_allocate_to_pool(kPoolA, only(kS1));
  Block* p = f.a->malloc(1000, kS1);
  const uintptr_t p_addr = f.addr(p);
  f.a->free(p);
  Block* p2 = f.a->malloc(1000, kS1);  // cached in the private pool
  EXPECT_EQ(f.addr(p2), p_addr);
  const int64_t frees = f.state.frees;
  f.a->free(g);  // general, uncached: cudaFree must wait for the end of the capture
  EXPECT_EQ(f.state.frees, frees);
  expect_consistent(*f.a);
  f.a->end_allocate_to_pool(kPoolA);
  EXPECT_EQ(f.state.frees, frees + 1);
  f.a->free(p2);
  f.a->release_pool(kPoolA);
  f.a->empty_cache();
  expect_consistent(*f.a);
  EXPECT_TRUE(f.state.live.empty());
}

TEST(GraphPool, BadPoolCallsRaise) {
  Fixture f;
  EXPECT_THROW(f.a->begin_allocate_to_pool({0, 0}, only(kS1)), ValueError);
  EXPECT_THROW(f.a->end_allocate_to_pool(kPoolA), ValueError);
  EXPECT_THROW(f.a->release_pool(kPoolA), ValueError);
  f.a->begin_allocate_to_pool(kPoolA, only(kS1));
  EXPECT_THROW(f.a->begin_allocate_to_pool(kPoolA, only(kS2)), ValueError);
  f.a->end_allocate_to_pool(kPoolA);
  f.a->release_pool(kPoolA);
  EXPECT_THROW(f.a->release_pool(kPoolA), ValueError);
}

// 2 * 10^4 random operations: captures into three pools (one shared by successive captures) on one stream
// while another stream allocates eagerly, frees in and out of captures, record_stream, event completions,
// pool releases and cache releases. Live blocks never overlap; a block lies in a segment of its own pool
// (private or general) and of its stream; statistics equal the snapshot's sums; everything returns.
TEST(GraphPool, RandomWorkloadKeepsPoolsApartAndStatsConsistent) {
  Fixture f(4ull << 30);
  std::mt19937_64 rng(777);
  struct Live {
    Block* b;
    uintptr_t lo, hi;
    void* stream;
    MempoolId pool;
  };
  std::vector<Live> live;
  const MempoolId pools[3] = {{1, 0}, {2, 0}, {0, 1}};
  std::map<MempoolId, int> uses;  // graphs alive per pool, as the test counts them
  MempoolId capturing{0, 0};
  uint64_t next_graph_pool = 10;
  std::vector<MempoolId> graphs;  // one entry per captured graph still alive (its pool)
  auto draw_size = [&]() -> size_t {
    const int kind = static_cast<int>(rng() % 100);
    if (kind < 60) return 1 + rng() % (64 * KiB);
    if (kind < 85) return 1 + rng() % MiB;
    return MiB + 1 + rng() % (24 * MiB);
  };
  auto overlaps = [&](uintptr_t lo, uintptr_t hi) {
    for (const Live& l : live)
      if (lo < l.hi && l.lo < hi) return true;
    return false;
  };
  const int steps = 20000;
  int64_t private_allocs = 0, deferred_seen = 0, shared_reuses = 0;
  for (int i = 0; i < steps; ++i) {
    const int op = static_cast<int>(rng() % 100);
    const bool cap = capturing != MempoolId{0, 0};
    if (op < 45 || live.empty()) {
      if (live.size() > 300) continue;
      void* s = rng() % 2 ? kS1 : kS2;
      Block* b = nullptr;
      try {
        b = f.a->malloc(draw_size(), s);
      } catch (const OutOfMemoryError&) {
        continue;
      }
      const auto lo = f.addr(b);
      const uintptr_t hi = lo + CachingBlockAllocator::block_size(b);
      ASSERT_FALSE(overlaps(lo, hi)) << "step " << i << ": handed out memory in use";
      const MempoolId expect = cap && s == kS1 ? capturing : MempoolId{0, 0};
      ASSERT_EQ(CachingBlockAllocator::pool_id(b), expect) << "step " << i;
      private_allocs += expect != MempoolId{0, 0};
      live.push_back({b, lo, hi, s, expect});
    } else if (op < 85) {
      const size_t k = rng() % live.size();
      Live l = live[k];
      live[k] = live.back();
      live.pop_back();
      if (rng() % 8 == 0) f.a->record_stream(l.b, l.stream == kS1 ? kS2 : kS1);
      const size_t events_before = f.state.events.size();
      f.a->free(l.b);
      if (cap) {
        ASSERT_EQ(f.state.events.size(), events_before) << "step " << i << ": event recorded during capture";
        deferred_seen += f.a->deferred_frees() > 0;
      }
    } else if (op < 90) {
      if (!cap) {  // begin a capture: a new pool, or the shared one, or a pool of a live graph
        MempoolId id;
        const int which = static_cast<int>(rng() % 3);
        if (which == 0) id = {next_graph_pool++, 0};
        else if (which == 1) id = pools[2];
        else id = graphs.empty() ? pools[rng() % 2] : graphs[rng() % graphs.size()];
        if (rng() % 2) f.a->release_freeable_pools();
        shared_reuses += f.a->pool_use_count(id) > 0;
        f.a->begin_allocate_to_pool(id, only(kS1));
        capturing = id;
      } else {
        f.a->end_allocate_to_pool(capturing);
        graphs.push_back(capturing);
        ++uses[capturing];
        capturing = {0, 0};
      }
    } else if (op < 94) {
      if (!graphs.empty()) {  // a graph goes
        const size_t k = rng() % graphs.size();
        const MempoolId id = graphs[k];
        graphs.erase(graphs.begin() + static_cast<std::ptrdiff_t>(k));
        f.a->release_pool(id);
        --uses[id];
        ASSERT_EQ(f.a->pool_use_count(id), uses[id] + (capturing == id ? 1 : 0));
      }
    } else if (op < 99) {
      f.state.complete(rng() % 2 ? kS1 : kS2);
    } else if (!cap) {
      f.a->empty_cache();
    }
    if (i % 500 == 0) {
      expect_consistent(*f.a);
      const auto snap = f.a->snapshot();
      for (const Live& l : live) {
        auto it = std::upper_bound(snap.begin(), snap.end(), l.lo,
                                   [](uintptr_t a, const cuda::SegmentInfo& s) { return a < s.address; });
        ASSERT_NE(it, snap.begin());
        --it;
        ASSERT_LE(l.hi, it->address + static_cast<uintptr_t>(it->total_size));
        ASSERT_EQ(it->stream, l.stream);
        ASSERT_EQ(f.a->segment_pool_id(it->address), l.pool) << "step " << i << ": a block outside its pool";
      }
      if (::testing::Test::HasFailure()) FAIL() << "inconsistent at step " << i;
    }
  }
  if (capturing != MempoolId{0, 0}) {
    f.a->end_allocate_to_pool(capturing);
    graphs.push_back(capturing);
  }
  for (const Live& l : live) f.a->free(l.b);
  for (const MempoolId& id : graphs) f.a->release_pool(id);
  f.state.complete(kS1);
  f.state.complete(kS2);
  f.a->empty_cache();
  expect_consistent(*f.a);
  const DeviceStats st = f.a->stats();
  EXPECT_EQ(cur(st.reserved_bytes), 0);
  EXPECT_EQ(cur(st.active), 0);
  EXPECT_EQ(f.a->num_private_pools(), 0u);
  EXPECT_EQ(f.a->deferred_frees(), 0u);
  EXPECT_TRUE(f.state.live.empty()) << "segments leaked";
  EXPECT_EQ(f.state.unreleased_events(), 0);
  EXPECT_GT(st.allocation[kAllPools].allocated, 5000);
  // The workload did what it means to.
  EXPECT_GT(private_allocs, 1000);
  EXPECT_GT(deferred_seen, 10);
  EXPECT_GT(shared_reuses, 10);
}

}  // namespace
