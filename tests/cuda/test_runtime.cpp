// The CUDA runtime on a real GPU: devices and their properties, DeviceGuard, streams (current, default,
// set, guard), events (record, cross-stream wait, query, elapsed time), the caching allocator (OOM
// message and recovery, record_stream deferral, empty_cache, statistics against snapshots after random
// work, memory fraction), pinned memory round trips, build information and the architecture check.
// Device memory is written with cudaMemsetAsync / cudaMemcpyAsync so that these tests depend on no
// kernel family. Without a GPU every test skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/test_util.h"
#include "tessera/cuda.h"

#if defined(TESSERA_WITH_CUDA)
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_stream.h"
#endif

namespace ts = tessera;
namespace cuda = tessera::cuda;

namespace {

constexpr int64_t MiB = 1 << 20;

#if defined(TESSERA_WITH_CUDA)
#define CHECK_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(cudaGetLastError())
cudaStream_t raw(const cuda::Stream& s) { return static_cast<cudaStream_t>(s.handle()); }
#endif

int64_t stat(const char* key) { return cuda::memory_stats().at(key); }

// Every statistic of the current device against the sums rebuilt from memory_snapshot().
void expect_stats_match_snapshot() {
  const int dev = cuda::current_device();
  const auto st = cuda::memory_stats();
  int64_t allocated = 0, active = 0, reserved = 0, segments = 0, allocations = 0, active_n = 0, isplit = 0,
          isplit_bytes = 0, requested = 0;
  for (const cuda::SegmentInfo& s : cuda::memory_snapshot()) {
    if (s.device != dev) continue;
    ++segments;
    reserved += s.total_size;
    int64_t sum = 0;
    uintptr_t expect = s.address;
    for (const cuda::BlockInfo& b : s.blocks) {
      EXPECT_EQ(b.address, expect);
      expect += static_cast<uintptr_t>(b.size);
      sum += b.size;
      if (b.allocated) {
        ++allocations;
        allocated += b.size;
        requested += b.requested_size;
      }
      if (b.active) {
        ++active_n;
        active += b.size;
      }
      if (!b.active && s.blocks.size() > 1) {
        ++isplit;
        isplit_bytes += b.size;
      }
    }
    EXPECT_EQ(sum, s.total_size);
  }
  EXPECT_EQ(st.at("allocated_bytes.all.current"), allocated);
  EXPECT_EQ(st.at("active_bytes.all.current"), active);
  EXPECT_EQ(st.at("reserved_bytes.all.current"), reserved);
  EXPECT_EQ(st.at("segment.all.current"), segments);
  EXPECT_EQ(st.at("allocation.all.current"), allocations);
  EXPECT_EQ(st.at("active.all.current"), active_n);
  EXPECT_EQ(st.at("inactive_split.all.current"), isplit);
  EXPECT_EQ(st.at("inactive_split_bytes.all.current"), isplit_bytes);
  EXPECT_EQ(st.at("requested_bytes.all.current"), requested);
  EXPECT_EQ(cuda::memory_allocated(), allocated);
  EXPECT_EQ(cuda::memory_reserved(), reserved);
}

// ---- devices ----------------------------------------------------------------------------------------

TEST(CudaRuntime, DevicesAndProperties) {
  TS_REQUIRE_GPU();
  EXPECT_TRUE(cuda::is_built());
  ASSERT_GT(cuda::device_count(), 0);
  const int d = cuda::current_device();
  EXPECT_GE(d, 0);
  EXPECT_LT(d, cuda::device_count());
  const cuda::DeviceProperties p = cuda::get_device_properties();
  EXPECT_FALSE(p.name.empty());
  EXPECT_GE(p.major, 7);
  EXPECT_GT(p.total_memory, int64_t(1) << 30);
  EXPECT_GT(p.multi_processor_count, 0);
  EXPECT_THROW(cuda::get_device_properties(cuda::device_count()), ts::DeviceError);
  EXPECT_THROW(cuda::set_device(-1), ts::DeviceError);
  EXPECT_THROW(cuda::set_device(cuda::device_count()), ts::DeviceError);
  cuda::set_device(d);
  EXPECT_EQ(cuda::current_device(), d);
  cuda::synchronize();
}

TEST(CudaRuntime, DeviceGuardRestoresTheDevice) {
  TS_REQUIRE_GPU();
  const int before = cuda::current_device();
  {
    cuda::DeviceGuard g(cuda::device_count() - 1);
    EXPECT_EQ(cuda::current_device(), cuda::device_count() - 1);
    {
      cuda::DeviceGuard inner(ts::Device::cuda(0));
      EXPECT_EQ(cuda::current_device(), 0);
    }
    EXPECT_EQ(cuda::current_device(), cuda::device_count() - 1);
  }
  EXPECT_EQ(cuda::current_device(), before);
  EXPECT_THROW(cuda::DeviceGuard(cuda::device_count()), ts::DeviceError);
}

// ---- streams and events --------------------------------------------------------------------------------

TEST(CudaRuntime, CurrentDefaultAndGuardedStreams) {
  TS_REQUIRE_GPU();
  const cuda::Stream def = cuda::default_stream();
  EXPECT_NE(def.handle(), nullptr);  // never the legacy NULL stream
  EXPECT_EQ(cuda::current_stream(), def);
  const cuda::Stream s = cuda::Stream::create();
  const cuda::Stream hi = cuda::Stream::create(-1, cuda::Stream::Priority::High);
  EXPECT_NE(s, def);
  EXPECT_NE(s, hi);
  {
    cuda::StreamGuard g(s);
    EXPECT_EQ(cuda::current_stream(), s);
    {
      cuda::StreamGuard g2(hi);
      EXPECT_EQ(cuda::current_stream(), hi);
    }
    EXPECT_EQ(cuda::current_stream(), s);
  }
  EXPECT_EQ(cuda::current_stream(), def);
  cuda::set_current_stream(s);
  EXPECT_EQ(cuda::current_stream(), s);
#if defined(TESSERA_WITH_CUDA)
  EXPECT_EQ(cuda::current_raw_stream(), raw(s));
#endif
  cuda::set_current_stream(def);
  EXPECT_EQ(cuda::current_stream(), def);
  s.synchronize();
  EXPECT_TRUE(s.query());
  EXPECT_THROW(cuda::set_current_stream(cuda::Stream()), ts::ValueError);
}

// Whether TESSERA_CUDA_ALLOC_CONF bypasses the cache (backend:cudaMalloc, as the compute-sanitizer runs
// set it): every allocation is then a cudaMalloc and every free a cudaFree.
bool cache_bypassed() {
  const char* conf = std::getenv("TESSERA_CUDA_ALLOC_CONF");
  return conf && std::string_view(conf).find("backend:cudaMalloc") != std::string_view::npos;
}

#if defined(TESSERA_WITH_CUDA)
// Blocks a stream until the test opens the gate: a host function spinning on a flag (it calls no CUDA).
struct Gate {
  std::atomic<bool> open{false};
  static void CUDART_CB wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    while (!g->open.load(std::memory_order_acquire)) {
    }
  }
  void close_on(const cuda::Stream& s) { ASSERT_EQ(cudaLaunchHostFunc(raw(s), &Gate::wait, this), cudaSuccess); }
};
#endif

TEST(CudaRuntime, EventsOrderTwoStreams) {
  TS_REQUIRE_GPU();
#if defined(TESSERA_WITH_CUDA)
  const cuda::Stream s1 = cuda::Stream::create(), s2 = cuda::Stream::create();
  const size_t n = 64 * MiB;
  ts::DataPtr buf = ts::get_allocator(ts::DeviceType::CUDA)->allocate(n, ts::Device::cuda(cuda::current_device()));
  // Page-locked destination, allocated before the gate closes: a copy into pageable memory returns only
  // once it has run, which here would wait for the gate that this thread opens below (a deadlock).
  unsigned char* host = nullptr;
  CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&host), n));
  Gate gate;
  gate.close_on(s1);  // s1 holds until the gate opens
  CHECK_CUDA(cudaMemsetAsync(buf.get(), 0x5A, n, raw(s1)));
  cuda::Event ev;
  EXPECT_TRUE(ev.query());  // nothing recorded yet
  ev.record(s1);
  EXPECT_FALSE(ev.query());
  ev.wait(s2);  // s2's copy must see s1's memset
  CHECK_CUDA(cudaMemcpyAsync(host, buf.get(), n, cudaMemcpyDeviceToHost, raw(s2)));
  EXPECT_FALSE(s2.query());
  gate.open = true;
  s2.synchronize();
  EXPECT_TRUE(ev.query());
  EXPECT_TRUE(std::all_of(host, host + n, [](unsigned char c) { return c == 0x5A; }));
  CHECK_CUDA(cudaFreeHost(host));

  cuda::Event start(true), stop(true);
  start.record(s1);
  for (int i = 0; i < 10; ++i) CHECK_CUDA(cudaMemsetAsync(buf.get(), i, n, raw(s1)));
  stop.record(s1);
  stop.synchronize();
  EXPECT_GT(start.elapsed_time(stop), 0.0f);
  EXPECT_THROW(ev.elapsed_time(stop), ts::ValueError);  // ev has no timing
  cuda::Event unrecorded(true);
  EXPECT_THROW(start.elapsed_time(unrecorded), ts::ValueError);
  cuda::Event moved = std::move(start);
  EXPECT_TRUE(moved.query());
#endif
}

// ---- the caching allocator ---------------------------------------------------------------------------

TEST(CudaAllocator, OutOfMemoryMessageAndRecovery) {
  TS_REQUIRE_GPU();
  const int64_t ooms = stat("num_ooms");
  const int64_t ten_tb = int64_t(10) * 1000 * 1000 * 1000 * 1000;
  try {
    ts::Tensor t = ts::empty({ten_tb / 4}, {ts::kFloat32, "cuda"});
    ADD_FAILURE() << "allocating 10 TB did not raise";
  } catch (const ts::OutOfMemoryError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("CUDA out of memory. Tried to allocate 9313.23 GiB. GPU " + std::to_string(cuda::current_device()) +
                     " has a total capacity of "),
              std::string::npos)
        << m;
    EXPECT_NE(m.find(" is free. Of the allocated memory "), std::string::npos) << m;
    EXPECT_NE(m.find(" is allocated by tessera, and "), std::string::npos) << m;
    EXPECT_NE(m.find("is reserved by tessera but unallocated. If reserved but unallocated memory is large try "
                     "setting max_split_size_mb in TESSERA_CUDA_ALLOC_CONF to avoid fragmentation."),
              std::string::npos)
        << m;
  }
  EXPECT_EQ(stat("num_ooms"), ooms + 1);
  // The retry after freeing the cache happens only with a cache (not under backend:cudaMalloc).
  const char* conf = std::getenv("TESSERA_CUDA_ALLOC_CONF");
  if (conf == nullptr || std::string(conf).find("backend:cudaMalloc") == std::string::npos) {
    EXPECT_GE(stat("num_alloc_retries"), 1);
  }
  // The CUDA error was cleared: the next allocation and the next call on the stream work.
#if defined(TESSERA_WITH_CUDA)
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ts::Tensor t = ts::empty({1024}, {ts::kFloat32, "cuda"});
  CHECK_CUDA(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), cuda::current_raw_stream()));
  std::vector<float> host(1024, 1.0f);
  CHECK_CUDA(cudaMemcpyAsync(host.data(), t.data_ptr(), t.nbytes(), cudaMemcpyDeviceToHost, cuda::current_raw_stream()));
  cuda::current_stream().synchronize();
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](float v) { return v == 0.0f; }));
#endif
}

TEST(CudaAllocator, TensorsComeFromTheCache) {
  TS_REQUIRE_GPU();
  cuda::empty_cache();  // no cached block of another test can be a better fit than the one freed below
  const int64_t before = cuda::memory_allocated();
  {
    ts::Tensor t = ts::empty({256, 1024}, {ts::kFloat32, "cuda"});  // 1 MiB
    EXPECT_EQ(cuda::memory_allocated(), before + MiB);
    EXPECT_GE(cuda::max_memory_allocated(), before + MiB);
    EXPECT_GE(cuda::memory_reserved(), cuda::memory_allocated());
    void* p = t.data_ptr();
    t = ts::Tensor();
    ts::Tensor u = ts::empty({256, 1024}, {ts::kFloat32, "cuda"});
    EXPECT_EQ(u.data_ptr(), p);  // the block just freed on this stream
  }
  EXPECT_EQ(cuda::memory_allocated(), before);
  cuda::reset_peak_memory_stats();
  EXPECT_EQ(cuda::max_memory_allocated(), cuda::memory_allocated());
  EXPECT_EQ(cuda::max_memory_reserved(), cuda::memory_reserved());
  const std::string summary = cuda::memory_summary();
  EXPECT_NE(summary.find("tessera CUDA memory summary, device ID"), std::string::npos);
  EXPECT_NE(summary.find("Allocated memory"), std::string::npos);
#if defined(TESSERA_WITH_CUDA)
  {
    ts::DataPtr w = cuda::allocate_workspace(3 * MiB);
    EXPECT_NE(w.get(), nullptr);
    EXPECT_EQ(cuda::memory_allocated(), before + 3 * MiB);
  }
  EXPECT_EQ(cuda::memory_allocated(), before);
#endif
}

TEST(CudaAllocator, RecordStreamDefersReuse) {
  TS_REQUIRE_GPU();
#if defined(TESSERA_WITH_CUDA)
  // Without the cache a free is a cudaFree, which waits for the whole device: here for the gate that
  // this thread opens only later (a deadlock; compute-sanitizer runs use this backend).
  if (cache_bypassed()) GTEST_SKIP() << "the cache is bypassed (backend:cudaMalloc): nothing to defer";
  const cuda::Stream side = cuda::Stream::create();
  Gate gate;
  gate.close_on(side);  // work on `side` cannot finish until the gate opens
  ts::Tensor t = ts::empty({256, 1024}, {ts::kFloat32, "cuda"});
  void* p = t.data_ptr();
  t.record_stream(side);
  EXPECT_THROW(ts::zeros({4}).record_stream(side), ts::DeviceError);  // a CPU tensor
  const int64_t active_before = stat("active.all.current");
  t = ts::Tensor();  // freed, but `side` may still use it
  EXPECT_EQ(stat("active.all.current"), active_before);  // still active until the event completes
  std::vector<ts::Tensor> others;
  for (int i = 0; i < 32; ++i) {
    others.push_back(ts::empty({256, 1024}, {ts::kFloat32, "cuda"}));
    EXPECT_NE(others.back().data_ptr(), p) << "memory still used by another stream was handed out";
  }
  expect_stats_match_snapshot();
  gate.open = true;
  side.synchronize();
  others.clear();
  ts::Tensor poll = ts::empty({16}, {ts::kFloat32, "cuda"});  // an allocation polls the events
  EXPECT_EQ(stat("active.all.current"), active_before);  // only `poll`'s block: t's went back to the pool
  expect_stats_match_snapshot();
  // The raw interface: pointers the allocator does not own are refused.
  int local = 0;
  EXPECT_THROW(cuda::record_stream(&local, raw(side)), ts::ValueError);
#endif
}

TEST(CudaAllocator, EmptyCacheReleasesUnusedSegments) {
  TS_REQUIRE_GPU();
  if (cache_bypassed()) GTEST_SKIP() << "the cache is bypassed (backend:cudaMalloc): nothing is cached";
  ts::Tensor keep = ts::empty({1000}, {ts::kFloat32, "cuda"});
  {
    std::vector<ts::Tensor> ts_;
    for (int i = 0; i < 8; ++i) ts_.push_back(ts::empty({int64_t(30) * MiB / 4}, {ts::kFloat32, "cuda"}));
  }
  const int64_t reserved = cuda::memory_reserved();
  EXPECT_GE(reserved, 240 * MiB);
  cuda::empty_cache();
  EXPECT_LE(cuda::memory_reserved(), reserved - 240 * MiB);
  for (const cuda::SegmentInfo& s : cuda::memory_snapshot())
    EXPECT_GT(s.active_size, 0) << "empty_cache left a segment nothing uses";
  expect_stats_match_snapshot();
  EXPECT_GE(stat("num_sync_all_streams"), 1);
}

TEST(CudaAllocator, StatsMatchSnapshotsAfterRandomWork) {
  TS_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  std::vector<ts::Tensor> live;
  const cuda::Stream other = cuda::Stream::create();
  for (int i = 0; i < 4000; ++i) {
    if (live.size() < 200 && (rng() % 2 == 0 || live.empty())) {
      const int64_t kind = static_cast<int64_t>(rng() % 10);
      const int64_t n = kind < 7 ? 1 + static_cast<int64_t>(rng() % 65536) : 1 + static_cast<int64_t>(rng() % (8 * MiB));
      if (rng() % 4 == 0) {
        cuda::StreamGuard g(other);
        live.push_back(ts::empty({n}, {ts::kUInt8, "cuda"}));
      } else {
        live.push_back(ts::empty({n}, {ts::kUInt8, "cuda"}));
      }
      if (rng() % 8 == 0) live.back().record_stream(other);
    } else {
      const size_t k = rng() % live.size();
      live[k] = live.back();
      live.pop_back();
    }
    if (i % 500 == 0) expect_stats_match_snapshot();
  }
  live.clear();
  other.synchronize();
  expect_stats_match_snapshot();
  cuda::empty_cache();
  expect_stats_match_snapshot();
}

TEST(CudaAllocator, MemoryFractionCapsReservedMemory) {
  TS_REQUIRE_GPU();
  cuda::empty_cache();
  const int64_t total = cuda::get_device_properties().total_memory;
  EXPECT_THROW(cuda::set_per_process_memory_fraction(1.5), ts::ValueError);
  cuda::set_per_process_memory_fraction(0.25);
  try {
    ts::Tensor big = ts::empty({total / 3}, {ts::kUInt8, "cuda"});
    ADD_FAILURE() << "a third of the GPU was allocated under a fraction of 0.25";
  } catch (const ts::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find(" allowed; "), std::string::npos) << e.what();
  }
  { ts::Tensor ok = ts::empty({total / 5}, {ts::kUInt8, "cuda"}); }
  cuda::set_per_process_memory_fraction(1.0);
  cuda::empty_cache();
}

// ---- pinned memory -----------------------------------------------------------------------------------

TEST(CudaPinned, PinMemoryRoundTrip) {
  TS_REQUIRE_GPU();
  ts::Tensor x = ts::testing::test_data({64, 33}, ts::kFloat32);
  EXPECT_FALSE(x.is_pinned());
  ts::Tensor p = x.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_TRUE(p.is_cpu());
  EXPECT_TRUE(p.pin_memory().is_same(p));  // already pinned
  EXPECT_TRUE(p.slice(0, 3, 10).is_pinned());
  EXPECT_TRUE(ts::testing::all_close(p, x, {0, 0}));
  EXPECT_TRUE(x.t().pin_memory().is_pinned());
  EXPECT_TRUE(ts::testing::all_close(x.t().pin_memory(), x.t(), {0, 0}));
  EXPECT_THROW(ts::empty({4}, {ts::kFloat32, "cuda"}).pin_memory(), ts::DeviceError);
#if defined(TESSERA_WITH_CUDA)
  // Host -> device -> host through pinned buffers, asynchronously, on a side stream.
  const cuda::Stream s = cuda::Stream::create();
  ts::Tensor back = ts::empty({64, 33}).pin_memory();
  ts::DataPtr d = ts::get_allocator(ts::DeviceType::CUDA)->allocate(p.nbytes(), ts::Device::cuda(cuda::current_device()));
  CHECK_CUDA(cudaMemcpyAsync(d.get(), p.data_ptr(), p.nbytes(), cudaMemcpyHostToDevice, raw(s)));
  cuda::record_host_use(p.data_ptr(), raw(s));
  CHECK_CUDA(cudaMemcpyAsync(back.data_ptr(), d.get(), p.nbytes(), cudaMemcpyDeviceToHost, raw(s)));
  cuda::record_host_use(back.data_ptr(), raw(s));
  cuda::record_stream(d.get(), raw(s));
  s.synchronize();
  EXPECT_TRUE(ts::testing::all_close(back, x, {0, 0}));
  EXPECT_TRUE(cuda::is_pinned(back.data_ptr()));
  int local = 0;
  EXPECT_FALSE(cuda::is_pinned(&local));
#endif
}

TEST(CudaPinned, DataLoaderPinsBatches) {
  TS_REQUIRE_GPU();
  ts::data::TensorDataset ds{ts::testing::test_data({10, 3}, ts::kFloat32), ts::arange(10, ts::kInt64)};
  ts::data::DataLoader loader(ds, {.batch_size = 4, .pin_memory = true});
  int batches = 0;
  for (auto& [x, y] : loader) {
    EXPECT_TRUE(x.is_pinned());
    EXPECT_TRUE(y.is_pinned());
    ++batches;
  }
  EXPECT_EQ(batches, 3);
}

// ---- build and architecture -----------------------------------------------------------------------------

TEST(CudaRuntime, BuildInfo) {
  TS_REQUIRE_GPU();
  const cuda::BuildInfo b = cuda::build_info();
  EXPECT_FALSE(b.cuda_runtime.empty());
  EXPECT_FALSE(b.driver.empty());
  EXPECT_EQ(b.cudnn.substr(0, 2), "9.");
  EXPECT_FALSE(b.cublas.empty());
  const cuda::DeviceProperties p = cuda::get_device_properties();
  // This GPU is running the tests, so the architecture check let it through: the build holds its SASS,
  // or PTX it can compile (or the list was not checkable, e.g. native).
  const int sm = p.major * 10 + p.minor;
  const bool sass = std::any_of(b.architectures.begin(), b.architectures.end(),
                                [&](int a) { return a / 10 == p.major && a <= sm; });
  const bool ptx = std::any_of(b.ptx_architectures.begin(), b.ptx_architectures.end(), [&](int a) { return a <= sm; });
  EXPECT_TRUE(sass || ptx || (b.architectures.empty() && b.ptx_architectures.empty()));
}

TEST(CudaRuntime, SecondDeviceHasItsOwnAllocator) {
  TS_REQUIRE_GPU();
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const int64_t on1 = cuda::memory_allocated(1);
  ts::Tensor t = ts::empty({MiB}, {ts::kUInt8, "cuda:1"});
  EXPECT_EQ(cuda::memory_allocated(1), on1 + MiB);
  cuda::DeviceGuard g(1);
  expect_stats_match_snapshot();
}

}  // namespace
