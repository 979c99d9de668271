// The caching allocator's core (runtime/block_pool.h, Note [CUDA caching allocator]) under threads: four
// threads allocate, free and record streams on one CachingBlockAllocator at once, a million operations
// in all, over a fake device whose events complete after a few polls. Afterwards every statistic equals
// the sums rebuilt from the snapshot, nothing is allocated or active, and empty_cache returns every
// segment to the device (no leak). Built into the ThreadSanitizer run as well (`./run tsan`), where a
// data race in the pool fails the test.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "runtime/alloc_conf.h"
#include "runtime/block_pool.h"
#include "runtime/fake_device.h"

using namespace tessera;
using namespace tessera::alloc;
using namespace tessera::alloc::fake;

namespace {

// A fake device safe to call from several threads (the pool serializes its calls under its mutex; the
// backend's own lock keeps the test independent of that). An event completes after kPolls polls.
class ThreadSafeBackend final : public AllocBackend {
 public:
  static constexpr int kPolls = 3;
  struct Event {
    void* stream;
    int polls_left = kPolls;
    bool released = false;
  };
  explicit ThreadSafeBackend(size_t capacity) : capacity_(capacity) {}

  void* raw_alloc(size_t n) override {
    std::lock_guard<std::mutex> g(mu_);
    if (used_ + n > capacity_) return nullptr;
    used_ += n;
    const uintptr_t p = next_;
    next_ += (n + 2 * MiB - 1) / (2 * MiB) * (2 * MiB) + 2 * MiB;
    live_.emplace(p, n);
    return reinterpret_cast<void*>(p);
  }
  void raw_free(void* p) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(p));
    if (it == live_.end()) throw std::logic_error("fake device: free of a pointer it did not allocate");
    used_ -= it->second;
    live_.erase(it);
  }
  void* record_event(void* stream) override {
    std::lock_guard<std::mutex> g(mu_);
    events_.push_back(std::make_unique<Event>(Event{stream}));
    ++recorded_;
    return events_.back().get();
  }
  bool event_done(void* e) override {
    std::lock_guard<std::mutex> g(mu_);
    auto* ev = static_cast<Event*>(e);
    if (ev->polls_left > 0) --ev->polls_left;
    return ev->polls_left == 0;
  }
  void event_wait(void* e) override {
    std::lock_guard<std::mutex> g(mu_);
    static_cast<Event*>(e)->polls_left = 0;
  }
  void release_event(void* e) override {
    std::lock_guard<std::mutex> g(mu_);
    auto* ev = static_cast<Event*>(e);
    if (ev->polls_left != 0 || ev->released) throw std::logic_error("fake device: release of an unfinished event");
    ev->released = true;
    ++released_;
  }
  void mem_info(size_t* f, size_t* t) override {
    std::lock_guard<std::mutex> g(mu_);
    *f = capacity_ - used_;
    *t = capacity_;
  }

  size_t live_segments() {
    std::lock_guard<std::mutex> g(mu_);
    return live_.size();
  }
  int64_t recorded() {
    std::lock_guard<std::mutex> g(mu_);
    return recorded_;
  }
  int64_t unreleased() {
    std::lock_guard<std::mutex> g(mu_);
    return recorded_ - released_;
  }

 private:
  std::mutex mu_;
  size_t capacity_, used_ = 0;
  uintptr_t next_ = uintptr_t(1) << 40;
  std::map<uintptr_t, size_t> live_;
  std::vector<std::unique_ptr<Event>> events_;
  int64_t recorded_ = 0, released_ = 0;
};

}  // namespace

TEST(BlockPoolThreads, AMillionConcurrentOperationsLeaveNothingBehind) {
  constexpr int kThreads = 4;
  constexpr int64_t kOpsPerThread = 250000;  // a million in all
  auto owned = std::make_unique<ThreadSafeBackend>(size_t{8} * 1024 * MiB);
  ThreadSafeBackend* backend = owned.get();
  CachingBlockAllocator pool(0, std::move(owned), parse_alloc_conf(""));
  void* const streams[] = {kS1, kS2, kS3};
  std::atomic<int64_t> ops{0}, ooms{0};

  auto worker = [&](int id) {
    std::mt19937_64 rng(1000 + id);
    std::vector<Block*> held;
    for (int64_t i = 0; i < kOpsPerThread; ++i) {
      const uint64_t r = rng();
      const int what = static_cast<int>(r % 10);
      if (what < 5 || held.empty()) {  // allocate: mostly small, sometimes large, on a random stream
        const size_t size = (r >> 8) % 8 == 0 ? (1 + (r >> 16) % 24) * MiB : 1 + (r >> 16) % (256 * KiB);
        try {
          held.push_back(pool.malloc(size, streams[(r >> 40) % 3]));
        } catch (const OutOfMemoryError&) {
          ooms.fetch_add(1);
        }
      } else if (what < 9) {  // free a random block
        const size_t k = (r >> 8) % held.size();
        pool.free(held[k]);
        held[k] = held.back();
        held.pop_back();
      } else {  // another stream uses a random block: its free then waits for an event
        pool.record_stream(held[(r >> 8) % held.size()], streams[(r >> 40) % 3]);
      }
      if (held.size() > 64) {  // bounded working set
        pool.free(held.front());
        held.front() = held.back();
        held.pop_back();
      }
      ops.fetch_add(1, std::memory_order_relaxed);
    }
    for (Block* b : held) pool.free(b);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(ops.load(), kThreads * kOpsPerThread);
  EXPECT_EQ(ooms.load(), 0);  // 8 GiB is ample for 4 x 64 blocks of at most 24 MiB
  EXPECT_GT(backend->recorded(), 0);  // the record_stream path ran
  // Every block is freed: nothing is allocated; once the events drain (empty_cache waits for them)
  // nothing is active and every segment goes back to the device.
  DeviceStats st = pool.stats();
  EXPECT_EQ(st.allocation[kAllPools].current, 0);
  EXPECT_EQ(st.allocated_bytes[kAllPools].current, 0);
  EXPECT_EQ(st.requested_bytes[kAllPools].current, 0);
  expect_consistent(pool);
  pool.empty_cache();
  st = pool.stats();
  EXPECT_EQ(st.active[kAllPools].current, 0);
  EXPECT_EQ(st.segment[kAllPools].current, 0);
  EXPECT_EQ(st.reserved_bytes[kAllPools].current, 0);
  EXPECT_EQ(pool.pending_events(), 0u);
  EXPECT_EQ(backend->live_segments(), 0u);
  EXPECT_EQ(backend->unreleased(), 0);
  expect_consistent(pool);
}
