// The profiler on the GPU: kernels, copies and memsets are collected (CUPTI or CUDA events), linked to
// the op that launched them, and counted as that op's CUDA time; CUDA memory events carry the caching
// allocator's totals; the trace has the GPU tracks and flow arrows.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/test_util.h"
#include "tessera/profiler.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace prof = tessera::profiler;

namespace {

bool is_gpu(const prof::Event& e) {
  return e.kind == prof::EventKind::Kernel || e.kind == prof::EventKind::Memcpy || e.kind == prof::EventKind::Memset;
}

const prof::Event* by_id(const std::vector<prof::Event>& events, int64_t id) {
  for (const prof::Event& e : events)
    if (e.id == id) return &e;
  return nullptr;
}

}  // namespace

TEST(CudaProfiler, KernelsAppearWithCudaTimeUnderTheirOp) {
  TS_REQUIRE_GPU();
  ts::Tensor a = ts::randn({1024, 1024}, {ts::kFloat32, "cuda"}), b = ts::randn({1024, 1024}, {ts::kFloat32, "cuda"});
  ts::cuda::synchronize();
  prof::profile p({.activities = {prof::CPU, prof::CUDA}, .record_shapes = true});
  ts::Tensor c;
  for (int i = 0; i < 3; ++i) c = ts::matmul(a, b).add(1.0);
  ts::Tensor host = c.cpu();
  p.stop();
  const auto& ev = p.events();
  int kernels = 0, copies = 0;
  bool add_linked = false, matmul_linked = false;
  for (const prof::Event& e : ev) {
    if (!is_gpu(e)) continue;
    EXPECT_GE(e.device, 0);
    EXPECT_GE(e.duration_ns(), 0);
    EXPECT_GT(e.correlation, 0u);
    if (e.kind == prof::EventKind::Kernel) ++kernels;
    if (e.kind == prof::EventKind::Memcpy) ++copies;
    const prof::Event* op = e.op ? by_id(ev, e.op) : nullptr;
    if (!op) continue;
    EXPECT_FALSE(is_gpu(*op));
    // The kernel runs after its op started on the host.
    EXPECT_GE(e.start_ns, op->start_ns) << e.name << " of " << op->name;
    if (op->name == "add") add_linked = true;
    if (op->name == "mm" || op->name == "matmul") matmul_linked = true;
  }
  EXPECT_GE(kernels, 6);
  EXPECT_GE(copies, 1);  // the device-to-host copy of c.cpu()
  EXPECT_TRUE(add_linked);
  EXPECT_TRUE(matmul_linked);

  prof::KeyAverages ka = p.key_averages();
  ASSERT_NE(ka.find("add"), nullptr);
  EXPECT_EQ(ka.find("add")->count, 3);
  EXPECT_GT(ka.find("add")->self_cuda_time_total_ns, 0);
  EXPECT_GE(ka.find("add")->cuda_time_total_ns, ka.find("add")->self_cuda_time_total_ns);
  const prof::KeyAverage* mm = ka.find("matmul") ? ka.find("matmul") : ka.find("mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_GT(mm->cuda_time_total_ns, 0);
  // cuda_total of each op = its own kernels + its children's.
  for (const prof::Event& e : ev) {
    if (is_gpu(e)) continue;
    EXPECT_GE(e.cuda_total_ns, e.self_cuda_ns);
  }
  std::string t = ka.table("self_cuda_time_total", 10);
  for (const char* col : {"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg", "Self CUDA time total:"})
    EXPECT_NE(t.find(col), std::string::npos) << col;
}

TEST(CudaProfiler, TraceHasGpuTracksAndFlows) {
  TS_REQUIRE_GPU();
  ts::Tensor a = ts::randn({256, 256}, {ts::kFloat32, "cuda"});
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tessera_cuda_trace_" + std::to_string(::getpid()) + ".json")).string();
  {
    prof::profile p({.activities = {prof::CPU, prof::CUDA}});
    ts::Tensor b = a.relu().sum();
    ts::Tensor h = b.cpu();
    p.stop();
    p.export_chrome_trace(path);
  }
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::filesystem::remove(path);
  nlohmann::json doc = nlohmann::json::parse(ss.str());
  std::set<int64_t> cpu_pids, gpu_pids;
  std::set<uint64_t> starts, finishes;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      const std::string cat = e["cat"];
      const bool gpu = cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
      (gpu ? gpu_pids : cpu_pids).insert(e["pid"].get<int64_t>());
    }
    if (e["ph"] == "s") starts.insert(e["id"].get<uint64_t>());
    if (e["ph"] == "f") {
      finishes.insert(e["id"].get<uint64_t>());
      EXPECT_EQ(e["bp"], "e");
    }
  }
  ASSERT_FALSE(gpu_pids.empty());
  for (int64_t p : gpu_pids) EXPECT_EQ(cpu_pids.count(p), 0u);  // GPU work on its own process track
  EXPECT_FALSE(starts.empty());
  EXPECT_EQ(starts, finishes);
}

TEST(CudaProfiler, CudaMemoryEventsCarryAllocatorTotals) {
  TS_REQUIRE_GPU();
  ts::cuda::synchronize();
  const int64_t before = ts::cuda::memory_allocated();
  prof::profile p({.activities = {prof::CPU, prof::CUDA}, .profile_memory = true});
  {
    prof::record_function r("gpu_alloc");
    ts::Tensor x = ts::zeros({1 << 20}, {ts::kFloat32, "cuda"});  // 4 MiB
  }
  p.stop();
  int64_t up = 0, down = 0;
  for (const prof::MemoryEvent& m : p.memory_events()) {
    if (!m.device.is_cuda() || (m.bytes != (4 << 20) && m.bytes != -(4 << 20))) continue;
    EXPECT_GE(m.total_reserved, m.total_allocated);
    ASSERT_FALSE(m.op_stack.empty());
    EXPECT_EQ(m.op_stack.front(), "gpu_alloc");
    if (m.bytes > 0) {
      ++up;
      EXPECT_GE(m.total_allocated, before + (4 << 20));
    } else {
      ++down;
      EXPECT_EQ(m.total_allocated, before);
    }
  }
  EXPECT_EQ(up, 1);
  EXPECT_EQ(down, 1);
}

TEST(CudaProfiler, EmitNvtxRunsOnTheGpu) {
  TS_REQUIRE_GPU();
  ts::Tensor a = ts::randn({64}, {ts::kFloat32, "cuda"});
  prof::emit_nvtx nvtx;
  ts::Tensor b = a.mul(2.0).sum();
  EXPECT_TRUE(ts::testing::all_close(b.cpu(), a.cpu().mul(2.0).sum()));
}
