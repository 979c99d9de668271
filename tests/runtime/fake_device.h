// A fake device for the caching allocator's CUDA-free core (runtime/block_pool.h): memory that is
// only address arithmetic, events a test completes by hand, three fake streams, and the check that the
// allocator's statistics equal the sums rebuilt from its snapshot. Shared by the pool tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/block_pool.h"
#include "tessera/error.h"

namespace tessera::alloc::fake {

constexpr size_t KiB = 1024, MiB = 1024 * 1024;

struct FakeEvent {
  void* stream;
  bool done = false;
  bool released = false;
};

// What the fake device did, kept by the test (the backend itself belongs to the allocator).
struct FakeState {
  size_t capacity = 0;
  size_t used = 0;
  uintptr_t next = uintptr_t(1) << 40;
  std::map<uintptr_t, size_t> live;  // segments handed out
  std::vector<std::unique_ptr<FakeEvent>> events;
  int64_t alloc_calls = 0, failed_allocs = 0, frees = 0, waits = 0;

  void complete(void* stream) {
    for (auto& e : events)
      if (e->stream == stream) e->done = true;
  }
  int64_t unreleased_events() const {
    return std::count_if(events.begin(), events.end(), [](const auto& e) { return !e->released; });
  }
};

class FakeBackend final : public AllocBackend {
 public:
  explicit FakeBackend(FakeState* s) : s_(s) {}
  void* raw_alloc(size_t n) override {
    ++s_->alloc_calls;
    if (s_->used + n > s_->capacity) {
      ++s_->failed_allocs;
      return nullptr;
    }
    s_->used += n;
    const uintptr_t p = s_->next;
    s_->next += (n + 2 * MiB - 1) / (2 * MiB) * (2 * MiB) + 2 * MiB;  // aligned, with gaps
    s_->live.emplace(p, n);
    return reinterpret_cast<void*>(p);
  }
  void raw_free(void* p) override {
    auto it = s_->live.find(reinterpret_cast<uintptr_t>(p));
    if (it == s_->live.end()) throw std::logic_error("fake device: free of a pointer it did not allocate");
    s_->used -= it->second;
    s_->live.erase(it);
    ++s_->frees;
  }
  void* record_event(void* stream) override {
    s_->events.push_back(std::make_unique<FakeEvent>(FakeEvent{stream}));
    return s_->events.back().get();
  }
  bool event_done(void* e) override { return static_cast<FakeEvent*>(e)->done; }
  void event_wait(void* e) override {
    ++s_->waits;
    static_cast<FakeEvent*>(e)->done = true;
  }
  void release_event(void* e) override {
    auto* ev = static_cast<FakeEvent*>(e);
    if (!ev->done || ev->released) throw std::logic_error("fake device: release of an unfinished or released event");
    ev->released = true;
  }
  void mem_info(size_t* f, size_t* t) override {
    *f = s_->capacity - s_->used;
    *t = s_->capacity;
  }

 private:
  FakeState* s_;
};

void* const kS1 = reinterpret_cast<void*>(0x100);
void* const kS2 = reinterpret_cast<void*>(0x200);
void* const kS3 = reinterpret_cast<void*>(0x300);

struct Fixture {
  explicit Fixture(size_t capacity = 1024 * MiB, const std::string& conf = "") {
    state.capacity = capacity;
    a = std::make_unique<CachingBlockAllocator>(0, std::make_unique<FakeBackend>(&state), parse_alloc_conf(conf));
  }
  uintptr_t addr(Block* b) const { return reinterpret_cast<uintptr_t>(CachingBlockAllocator::address(b)); }
  FakeState state;
  std::unique_ptr<CachingBlockAllocator> a;
};

inline int64_t cur(const StatArray& s, StatType t = kAllPools) { return s[t].current; }

// Every statistic against the sums rebuilt from a snapshot, and the shape of every segment.
inline void expect_consistent(CachingBlockAllocator& a) {
  const DeviceStats st = a.stats();
  const std::vector<cuda::SegmentInfo> snap = a.snapshot();
  struct Sums {
    int64_t allocation = 0, allocated = 0, active = 0, active_bytes = 0, segment = 0, reserved = 0;
    int64_t isplit = 0, isplit_bytes = 0, requested = 0;
  };
  std::array<Sums, kNumStatTypes> sums{};
  int64_t oversize_segments = 0, oversize_allocations = 0;
  const int64_t max_split = st.max_split_size < 0 ? INT64_MAX : st.max_split_size;
  uintptr_t prev_end = 0;
  for (const cuda::SegmentInfo& s : snap) {
    ASSERT_GE(s.address, prev_end) << "segments overlap or are out of order";
    prev_end = s.address + static_cast<uintptr_t>(s.total_size);
    int64_t alloc_in = 0, active_in = 0, req_in = 0;
    for (int t : {int(kAllPools), s.is_large ? int(kLargePool) : int(kSmallPool)}) {
      ++sums[t].segment;
      sums[t].reserved += s.total_size;
    }
    if (s.total_size >= max_split) ++oversize_segments;
    uintptr_t expect = s.address;
    int64_t total = 0;
    bool prev_inactive = false;
    for (const cuda::BlockInfo& b : s.blocks) {
      ASSERT_EQ(b.address, expect) << "blocks do not tile their segment";
      ASSERT_GT(b.size, 0);
      expect += static_cast<uintptr_t>(b.size);
      total += b.size;
      const bool inactive = !b.active;
      ASSERT_FALSE(prev_inactive && inactive) << "two neighbouring free blocks were not merged";
      prev_inactive = inactive;
      if (b.allocated) {
        ASSERT_TRUE(b.active);
        ASSERT_LE(b.requested_size, b.size);
        alloc_in += b.size;
        req_in += b.requested_size;
        if (b.size >= max_split) ++oversize_allocations;
      }
      if (b.active) active_in += b.size;
      for (int t : {int(kAllPools), s.is_large ? int(kLargePool) : int(kSmallPool)}) {
        if (b.allocated) {
          ++sums[t].allocation;
          sums[t].allocated += b.size;
          sums[t].requested += b.requested_size;
        }
        if (b.active) {
          ++sums[t].active;
          sums[t].active_bytes += b.size;
        }
        if (inactive && s.blocks.size() > 1) {
          ++sums[t].isplit;
          sums[t].isplit_bytes += b.size;
        }
      }
    }
    ASSERT_EQ(total, s.total_size);
    ASSERT_EQ(alloc_in, s.allocated_size);
    ASSERT_EQ(active_in, s.active_size);
    ASSERT_EQ(req_in, s.requested_size);
  }
  for (int t = 0; t < kNumStatTypes; ++t) {
    SCOPED_TRACE("stat type " + std::to_string(t));
    EXPECT_EQ(st.allocation[t].current, sums[t].allocation);
    EXPECT_EQ(st.allocated_bytes[t].current, sums[t].allocated);
    EXPECT_EQ(st.active[t].current, sums[t].active);
    EXPECT_EQ(st.active_bytes[t].current, sums[t].active_bytes);
    EXPECT_EQ(st.segment[t].current, sums[t].segment);
    EXPECT_EQ(st.reserved_bytes[t].current, sums[t].reserved);
    EXPECT_EQ(st.inactive_split[t].current, sums[t].isplit);
    EXPECT_EQ(st.inactive_split_bytes[t].current, sums[t].isplit_bytes);
    EXPECT_EQ(st.requested_bytes[t].current, sums[t].requested);
    for (const StatArray* arr : {&st.allocation, &st.allocated_bytes, &st.active, &st.active_bytes, &st.segment,
                                 &st.reserved_bytes, &st.inactive_split, &st.inactive_split_bytes,
                                 &st.requested_bytes}) {
      const Stat& s = (*arr)[t];
      EXPECT_EQ(s.allocated - s.freed, s.current);
      EXPECT_GE(s.peak, s.current);
    }
  }
  EXPECT_EQ(st.oversize_segments.current, oversize_segments);
  EXPECT_EQ(st.oversize_allocations.current, oversize_allocations);
}

}  // namespace tessera::alloc::fake
