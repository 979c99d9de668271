// The profiler on the CPU: op recording (names, shapes, threads, nesting, self times), key_averages,
// the Chrome trace, memory events and the SVG timeline, record_function, the off state.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/test_util.h"
#include "ops/op_scope.h"
#include "profiler/export.h"
#include "profiler/recorder.h"
#include "tessera/profiler.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace prof = tessera::profiler;

namespace {

std::vector<const prof::Event*> named(const std::vector<prof::Event>& events, const std::string& name) {
  std::vector<const prof::Event*> out;
  for (const prof::Event& e : events)
    if (e.name == name) out.push_back(&e);
  return out;
}

const prof::Event* by_id(const std::vector<prof::Event>& events, int64_t id) {
  for (const prof::Event& e : events)
    if (e.id == id) return &e;
  return nullptr;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera_prof_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every CPU event lies inside its parent, on the same thread, one level deeper; self <= total and
// self = total - children (no event overlaps a sibling).
void expect_consistent_tree(const std::vector<prof::Event>& events) {
  std::map<int64_t, int64_t> children_ns;
  for (const prof::Event& e : events) {
    if (e.kind != prof::EventKind::Op && e.kind != prof::EventKind::UserRange) continue;
    EXPECT_GE(e.duration_ns(), 0) << e.name;
    EXPECT_GE(e.self_cpu_ns, 0) << e.name;
    EXPECT_LE(e.self_cpu_ns, e.duration_ns()) << e.name;
    EXPECT_GT(e.thread, 0) << e.name;
    if (e.parent == 0) {
      EXPECT_EQ(e.depth, 0) << e.name;
      continue;
    }
    const prof::Event* p = by_id(events, e.parent);
    ASSERT_NE(p, nullptr) << e.name;
    EXPECT_EQ(p->thread, e.thread) << e.name;
    EXPECT_EQ(p->depth + 1, e.depth) << e.name;
    EXPECT_LE(p->start_ns, e.start_ns) << e.name << " in " << p->name;
    EXPECT_GE(p->end_ns, e.end_ns) << e.name << " in " << p->name;
    children_ns[p->id] += e.duration_ns();
  }
  for (const prof::Event& e : events) {
    if (e.kind != prof::EventKind::Op && e.kind != prof::EventKind::UserRange) continue;
    EXPECT_EQ(e.self_cpu_ns, e.duration_ns() - children_ns[e.id]) << e.name;
  }
}

}  // namespace

TEST(Profiler, RecordsOpsWithNamesShapesAndThread) {
  ts::Tensor a = ts::randn({2, 3}), b = ts::randn({3});
  prof::profile p({.record_shapes = true});
  ts::Tensor c = ts::add(a, b);
  ts::Tensor d = c.mul(2.0);
  p.stop();
  auto adds = named(p.events(), "add");
  ASSERT_EQ(adds.size(), 1u);
  const prof::Event& e = *adds[0];
  EXPECT_EQ(e.kind, prof::EventKind::Op);
  ASSERT_EQ(e.input_shapes.size(), 2u);
  EXPECT_EQ(e.input_shapes[0], (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(e.input_shapes[1], (std::vector<int64_t>{3}));
  EXPECT_EQ(e.input_dtypes, (std::vector<std::string>{"float32", "float32"}));
  EXPECT_EQ(e.thread, 1);
  EXPECT_EQ(e.parent, 0);
  EXPECT_GE(e.start_ns, 0);
  EXPECT_FALSE(named(p.events(), "mul").empty());
  // Events are in start order.
  for (size_t i = 1; i < p.events().size(); ++i) EXPECT_LE(p.events()[i - 1].start_ns, p.events()[i].start_ns);
  expect_consistent_tree(p.events());
}

TEST(Profiler, ShapesOnlyWhenAsked) {
  ts::Tensor a = ts::randn({2, 3});
  prof::profile p;
  ts::Tensor c = ts::add(a, a);
  p.stop();
  auto adds = named(p.events(), "add");
  ASSERT_EQ(adds.size(), 1u);
  EXPECT_TRUE(adds[0]->input_shapes.empty());
}

TEST(Profiler, NestedOpsNestAndSelfTimesAddUp) {
  ts::Tensor x = ts::randn({4, 8}), w = ts::randn({3, 8}), b = ts::randn({3});
  prof::profile p;
  {
    prof::record_function outer("outer");
    for (int i = 0; i < 3; ++i) {
      ts::Tensor y = ts::nn::functional::linear(x, w, b);
      ts::Tensor l = ts::nn::functional::cross_entropy(y, ts::zeros({4}, ts::kInt64));
    }
  }
  p.stop();
  const auto& ev = p.events();
  expect_consistent_tree(ev);
  auto outer = named(ev, "outer");
  ASSERT_EQ(outer.size(), 1u);
  EXPECT_EQ(outer[0]->kind, prof::EventKind::UserRange);
  // Everything else ran inside "outer", and at least one op has a child op (composite ops nest).
  bool nested_op = false;
  for (const prof::Event& e : ev) {
    if (e.id == outer[0]->id) continue;
    EXPECT_GE(e.depth, 1) << e.name;
    if (e.kind == prof::EventKind::Op && e.depth >= 2) nested_op = true;
  }
  EXPECT_TRUE(nested_op);
  EXPECT_LT(outer[0]->self_cpu_ns, outer[0]->duration_ns());
}

TEST(Profiler, KeyAveragesCountsAndSorting) {
  ts::Tensor a = ts::randn({16}), b = ts::randn({16});
  prof::profile p({.record_shapes = true});
  for (int i = 0; i < 5; ++i) ts::Tensor c = ts::add(a, b);
  for (int i = 0; i < 2; ++i) ts::Tensor c = ts::mul(a, b);
  ts::Tensor big = ts::randn({8, 8});
  ts::Tensor c = ts::add(big, big);
  p.stop();
  prof::KeyAverages ka = p.key_averages();
  ASSERT_NE(ka.find("add"), nullptr);
  ASSERT_NE(ka.find("mul"), nullptr);
  EXPECT_EQ(ka.find("add")->count, 6);
  EXPECT_EQ(ka.find("mul")->count, 2);
  int64_t add_total = 0, add_self = 0;
  for (const prof::Event& e : p.events())
    if (e.name == "add") {
      add_total += e.duration_ns();
      add_self += e.self_cpu_ns;
    }
  EXPECT_EQ(ka.find("add")->cpu_time_total_ns, add_total);
  EXPECT_EQ(ka.find("add")->self_cpu_time_total_ns, add_self);
  EXPECT_LE(ka.find("add")->self_cpu_time_total_ns, ka.find("add")->cpu_time_total_ns);

  // Grouped by input shape: add splits in two rows.
  prof::KeyAverages by_shape = p.key_averages(/*group_by_input_shape=*/true);
  int add_rows = 0;
  for (const prof::KeyAverage& r : by_shape.rows())
    if (r.key == "add") {
      ++add_rows;
      EXPECT_TRUE(r.input_shapes == "[[16], [16]]" || r.input_shapes == "[[8, 8], [8, 8]]") << r.input_shapes;
      EXPECT_EQ(r.count, r.input_shapes == "[[16], [16]]" ? 5 : 1);
    }
  EXPECT_EQ(add_rows, 2);
  EXPECT_NE(by_shape.table().find("Input Shapes"), std::string::npos);

  // The table: PyTorch's columns, sorted descending, limited.
  std::string t = ka.table("count", 2);
  for (const char* col : {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls",
                          "Self CPU time total:"})
    EXPECT_NE(t.find(col), std::string::npos) << col;
  EXPECT_EQ(t.find("Self CUDA"), std::string::npos);  // no CUDA activity
  const size_t add_pos = t.find(" add "), mul_pos = t.find(" mul ");
  ASSERT_NE(add_pos, std::string::npos);
  ASSERT_NE(mul_pos, std::string::npos);
  EXPECT_LT(add_pos, mul_pos);
  // Two rows only: header line, 3 separator lines, 2 rows, the total.
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 7);
  for (const char* key : {"self_cpu_time_total", "cpu_time_total", "self_cuda_time_total", "cuda_time_total",
                          "cpu_time", "cuda_time", "count", ""}) {
    std::string s = ka.table(key, -1);
    EXPECT_NE(s.find("add"), std::string::npos) << key;
  }
  std::vector<const prof::KeyAverage*> rows;
  for (const prof::KeyAverage& r : ka.rows()) rows.push_back(&r);
  // Sorted by self CPU time: the first data row has the largest.
  const prof::KeyAverage* top = *std::max_element(rows.begin(), rows.end(), [](auto* x, auto* y) {
    return x->self_cpu_time_total_ns < y->self_cpu_time_total_ns;
  });
  std::string st = ka.table("self_cpu_time_total", 1);
  // The name column is as wide as the longest name shown: the top row's name may start its line.
  EXPECT_TRUE(st.find(" " + top->key + " ") != std::string::npos || st.find("\n" + top->key + " ") != std::string::npos)
      << st;
  EXPECT_THROW(ka.table("bogus"), ts::ValueError);
}

TEST(Profiler, ChromeTraceHasWhatPerfettoNeeds) {
  ts::Tensor a = ts::randn({2, 3});
  const std::string path = temp_path("trace.json");
  {
    prof::profile p({.record_shapes = true, .profile_memory = true});
    {
      prof::record_function r("step");
      ts::Tensor c = ts::add(a, a).relu();
    }
    p.stop();
    p.export_chrome_trace(path);
  }
  nlohmann::json doc = nlohmann::json::parse(read_file(path));
  std::filesystem::remove(path);
  ASSERT_TRUE(doc.contains("traceEvents"));
  ASSERT_TRUE(doc["traceEvents"].is_array());
  int complete = 0, memory = 0, meta = 0;
  bool add_with_shapes = false, step = false;
  for (const auto& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    ASSERT_TRUE(e.contains("pid"));
    ASSERT_TRUE(e.contains("name"));
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++complete;
      for (const char* k : {"ts", "dur", "tid", "cat", "args"}) ASSERT_TRUE(e.contains(k)) << k;
      EXPECT_TRUE(e["ts"].is_number());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      if (e["name"] == "add") {
        ASSERT_TRUE(e["args"].contains("Input Dims"));
        EXPECT_EQ(e["args"]["Input Dims"], nlohmann::json::parse("[[2, 3], [2, 3]]"));
        EXPECT_EQ(e["args"]["Input type"], nlohmann::json::parse(R"(["float32", "float32"])"));
        EXPECT_EQ(e["cat"], "cpu_op");
        add_with_shapes = true;
      }
      if (e["name"] == "step") {
        EXPECT_EQ(e["cat"], "user_annotation");
        step = true;
      }
    } else if (ph == "i") {
      ++memory;
      EXPECT_EQ(e["name"], "[memory]");
      for (const char* k : {"Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved"})
        EXPECT_TRUE(e["args"].contains(k)) << k;
    } else if (ph == "M") {
      ++meta;
    }
  }
  EXPECT_GE(complete, 3);
  EXPECT_GE(memory, 2);
  EXPECT_GE(meta, 2);
  EXPECT_TRUE(add_with_shapes);
  EXPECT_TRUE(step);
}

TEST(Profiler, MemoryEventsForAKnownSequence) {
  prof::profile p({.profile_memory = true});
  const int64_t n = 1 << 18;  // 1 MiB of float32
  {
    prof::record_function r("alloc_scope");
    ts::Tensor a = ts::zeros({n});
    {
      ts::Tensor b = ts::ones({n});
      ts::Tensor c = ts::add(a, b);
    }
  }
  p.stop();
  const auto& mem = p.memory_events();
  // Three allocations of 1 MiB (a, b, c), then their three frees; the running total goes up to 3 MiB
  // and back to where it started.
  std::vector<const prof::MemoryEvent*> big;
  for (const prof::MemoryEvent& m : mem)
    if (m.bytes == n * 4 || m.bytes == -n * 4) big.push_back(&m);
  ASSERT_EQ(big.size(), 6u);
  int64_t level = 0, peak = 0;
  for (const prof::MemoryEvent* m : big) {
    level += m->bytes;
    peak = std::max(peak, level);
    EXPECT_TRUE(m->device.is_cpu());
    EXPECT_EQ(m->total_allocated, m->total_reserved);
    ASSERT_FALSE(m->op_stack.empty());
    EXPECT_EQ(m->op_stack.front(), "alloc_scope");
    EXPECT_GT(m->thread, 0);
  }
  EXPECT_EQ(peak, 3 * n * 4);
  EXPECT_EQ(level, 0);
  EXPECT_GT(big[0]->bytes, 0);
  EXPECT_LT(big.back()->bytes, 0);
  // The allocation of c happens inside the add op.
  bool add_alloc = false;
  for (const prof::MemoryEvent* m : big)
    if (m->bytes > 0 && m->op_stack.size() >= 2 && m->op_stack.back() == "add") add_alloc = true;
  EXPECT_TRUE(add_alloc);
  // Totals go up with allocations and down with frees.
  for (size_t i = 1; i < mem.size(); ++i) {
    if (!mem[i].device.is_cpu() || !mem[i - 1].device.is_cpu()) continue;
    EXPECT_EQ(mem[i].total_allocated, mem[i - 1].total_allocated + mem[i].bytes);
    EXPECT_GE(mem[i].time_ns, mem[i - 1].time_ns);
  }
}

TEST(Profiler, NoMemoryEventsWithoutProfileMemory) {
  prof::profile p;
  ts::Tensor a = ts::zeros({1024});
  p.stop();
  EXPECT_TRUE(p.memory_events().empty());
}

TEST(Profiler, MemoryTimelineSvgIsWellFormed) {
  const std::string path = temp_path("memory.svg");
  {
    prof::profile p({.profile_memory = true});
    std::vector<ts::Tensor> keep;
    for (int i = 0; i < 8; ++i) keep.push_back(ts::zeros({1 << 16}));
    keep.clear();
    p.stop();
    p.export_memory_timeline(path);
  }
  const std::string svg = read_file(path);
  std::filesystem::remove(path);
  ASSERT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  for (const char* part : {"class=\"allocated\"", "class=\"reserved\"", "time (ms)", "memory (", "Memory timeline: cpu",
                           ">allocated<", ">reserved<"})
    EXPECT_NE(svg.find(part), std::string::npos) << part;
  // Minimal XML check: every element opened is closed in order; attributes are quoted.
  std::vector<std::string> stack;
  size_t i = 0, elements = 0;
  while ((i = svg.find('<', i)) != std::string::npos) {
    const size_t end = svg.find('>', i);
    ASSERT_NE(end, std::string::npos);
    std::string tag = svg.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.starts_with("?")) continue;
    ++elements;
    ASSERT_EQ(std::count(tag.begin(), tag.end(), '"') % 2, 0) << tag;
    if (tag.starts_with("/")) {
      ASSERT_FALSE(stack.empty()) << tag;
      EXPECT_EQ(stack.back(), tag.substr(1));
      stack.pop_back();
    } else if (!tag.ends_with("/")) {
      stack.push_back(tag.substr(0, tag.find(' ')));
    }
  }
  EXPECT_TRUE(stack.empty());
  EXPECT_GT(elements, 20u);
}

TEST(Profiler, OffRecordsNothingAndLeavesNoObserver) {
  EXPECT_EQ(ts::detail::g_num_op_stages.load(), 0);
  EXPECT_FALSE(prof::detail::recording_on());
  {
    prof::record_function r("not recorded");
    ts::Tensor a = ts::randn({4});
    ts::Tensor b = ts::add(a, a);
  }
  prof::profile p;
  EXPECT_TRUE(prof::detail::recording_on());
  EXPECT_EQ(ts::detail::g_num_op_stages.load(), 1);
  p.stop();
  EXPECT_TRUE(p.events().empty());
  EXPECT_EQ(ts::detail::g_num_op_stages.load(), 0);
  EXPECT_FALSE(prof::detail::recording_on());
  // After the stop: still nothing.
  ts::Tensor a = ts::randn({4});
  ts::Tensor b = ts::add(a, a);
  EXPECT_TRUE(p.events().empty());
}

TEST(Profiler, StartStopRules) {
  prof::profile p({.start = false});
  EXPECT_FALSE(p.running());
  EXPECT_THROW(p.stop(), ts::ValueError);
  p.start();
  EXPECT_TRUE(p.running());
  EXPECT_THROW(p.start(), ts::ValueError);
  EXPECT_THROW(p.key_averages(), ts::ValueError);
  EXPECT_THROW(prof::profile q, ts::ValueError);  // one at a time
  p.stop();
  EXPECT_THROW(p.start(), ts::ValueError);
  prof::profile q;  // a new one may start now
  q.stop();
}

TEST(Profiler, OpsOpenAcrossStartAndStopStayBalanced) {
  ts::Tensor a = ts::randn({4});
  std::optional<prof::profile> p;
  {
    prof::record_function outer("outer");  // not recording: opened before the start
    p.emplace();
    ts::Tensor b = ts::add(a, a);
  }
  ts::Tensor c = ts::mul(a, a);
  prof::record_function* dangling = new prof::record_function("open at stop");
  p->stop();
  delete dangling;
  ASSERT_EQ(named(p->events(), "add").size(), 1u);
  EXPECT_EQ(named(p->events(), "add")[0]->parent, 0);
  EXPECT_EQ(named(p->events(), "mul").size(), 1u);
  EXPECT_TRUE(named(p->events(), "outer").empty());
  EXPECT_TRUE(named(p->events(), "open at stop").empty());
  // A following profile starts clean.
  prof::profile q;
  ts::Tensor d = ts::add(a, a);
  q.stop();
  ASSERT_EQ(q.events().size(), 1u);
  EXPECT_EQ(q.events()[0].depth, 0);
}

TEST(Profiler, MultiThreadedOps) {
  constexpr int kThreads = 4, kOps = 50;
  ts::Tensor a = ts::randn({32});
  prof::profile p;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      prof::record_function r("worker");
      for (int i = 0; i < kOps; ++i) ts::Tensor c = ts::add(a, a);
    });
  for (auto& th : threads) th.join();
  p.stop();
  auto adds = named(p.events(), "add");
  EXPECT_EQ(adds.size(), static_cast<size_t>(kThreads * kOps));
  std::set<int64_t> tids;
  for (const prof::Event* e : adds) tids.insert(e->thread);
  EXPECT_EQ(tids.size(), static_cast<size_t>(kThreads));
  for (const prof::Event* e : adds) {
    const prof::Event* w = by_id(p.events(), e->parent);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->name, "worker");
  }
  expect_consistent_tree(p.events());
  EXPECT_EQ(p.key_averages().find("worker")->count, kThreads);
}

TEST(Profiler, CudaActivityWithoutAGpuKeepsRecordingTheCpu) {
  ts::Tensor a = ts::randn({4});
  prof::profile p({.activities = {prof::CPU, prof::CUDA}});
  ts::Tensor b = ts::add(a, a);
  p.stop();
  if (ts::cuda::is_available()) GTEST_SKIP() << "a GPU is present (tests/cuda/test_profiler.cpp covers it)";
  EXPECT_EQ(named(p.events(), "add").size(), 1u);
  for (const prof::Event& e : p.events()) EXPECT_EQ(e.kind, prof::EventKind::Op);
}

TEST(Profiler, EmitNvtxSwitchesTheObserverOnly) {
  {
    prof::emit_nvtx nvtx;
    EXPECT_EQ(ts::detail::g_num_op_stages.load(), 1);
    ts::Tensor a = ts::randn({4});
    ts::Tensor b = ts::add(a, a);  // NVTX ranges (no-ops without a tool attached); nothing recorded
    prof::profile p;
    ts::Tensor c = ts::add(a, a);
    p.stop();
    EXPECT_EQ(named(p.events(), "add").size(), 1u);
    EXPECT_EQ(ts::detail::g_num_op_stages.load(), 1);
  }
  EXPECT_EQ(ts::detail::g_num_op_stages.load(), 0);
  { prof::emit_nvtx off(false); EXPECT_EQ(ts::detail::g_num_op_stages.load(), 0); }
}

TEST(Profiler, ExportErrors) {
  prof::profile p;
  EXPECT_THROW(p.export_chrome_trace("/nonexistent-dir/x.json"), ts::ValueError);  // still running
  p.stop();
  EXPECT_THROW(p.export_chrome_trace("/nonexistent-dir/x.json"), ts::IOError);
  EXPECT_THROW(p.export_memory_timeline("/nonexistent-dir/x.svg"), ts::IOError);
}

// The GPU side of the outputs, on the CPU: a session with made-up GPU events linked to ops.
TEST(Profiler, GpuEventsLinkToOpsInTimesTableAndTrace) {
  namespace d = prof::detail;
  d::SessionResult r;
  r.start_ns = 1000;
  r.stop_ns = 1200;
  r.with_cuda = true;
  auto cpu = [](int64_t id, const char* name, int64_t s, int64_t e, int64_t parent, int depth) {
    prof::Event ev;
    ev.id = id;
    ev.name = name;
    ev.kind = prof::EventKind::Op;
    ev.start_ns = s;
    ev.end_ns = e;
    ev.thread = 1;
    ev.parent = parent;
    ev.depth = depth;
    return ev;
  };
  auto gpu = [](int64_t id, prof::EventKind kind, const char* name, int64_t s, int64_t e, int64_t op, uint64_t corr) {
    prof::Event ev;
    ev.id = id;
    ev.kind = kind;
    ev.name = name;
    ev.start_ns = s;
    ev.end_ns = e;
    ev.op = op;
    ev.device = 0;
    ev.stream = 7;
    ev.correlation = corr;
    return ev;
  };
  r.events = {cpu(1, "outer_op", 1000, 1100, 0, 0), cpu(2, "inner_op", 1010, 1050, 1, 1),
              gpu(3, prof::EventKind::Kernel, "kernel_a", 1020, 1030, 1, 11),
              gpu(4, prof::EventKind::Kernel, "kernel_b", 1060, 1090, 2, 12),
              gpu(5, prof::EventKind::Memcpy, "Memcpy DtoH", 1095, 1097, 0, 13)};
  d::finish_events(r);
  const prof::Event& outer = r.events[0];
  const prof::Event& inner = r.events[1];
  EXPECT_EQ(outer.start_ns, 0);
  EXPECT_EQ(outer.self_cpu_ns, 60);
  EXPECT_EQ(inner.self_cpu_ns, 40);
  EXPECT_EQ(outer.self_cuda_ns, 10);
  EXPECT_EQ(inner.self_cuda_ns, 30);
  EXPECT_EQ(outer.cuda_total_ns, 40);
  EXPECT_EQ(inner.cuda_total_ns, 30);
  EXPECT_EQ(r.events[2].self_cpu_ns, 0);
  EXPECT_EQ(r.events[2].cuda_total_ns, 10);

  prof::KeyAverages ka = d::compute_key_averages(r.events, false, true);
  ASSERT_NE(ka.find("outer_op"), nullptr);
  EXPECT_EQ(ka.find("outer_op")->cuda_time_total_ns, 40);
  EXPECT_EQ(ka.find("outer_op")->self_cuda_time_total_ns, 10);
  ASSERT_NE(ka.find("kernel_b"), nullptr);
  EXPECT_TRUE(ka.find("kernel_b")->is_gpu);
  EXPECT_EQ(ka.find("kernel_b")->self_cuda_time_total_ns, 30);
  EXPECT_EQ(ka.find("kernel_b")->cpu_time_total_ns, 0);
  const std::string t = ka.table("self_cuda_time_total");
  for (const char* col : {"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg", "Self CUDA time total: 0.042us"})
    EXPECT_NE(t.find(col), std::string::npos) << col << "\n" << t;
  // Sorted by self CUDA time, descending (ties keep the order of first appearance): inner_op and
  // kernel_b (30 ns) before outer_op and kernel_a (10 ns).
  EXPECT_LT(t.find("inner_op"), t.find("kernel_a"));
  EXPECT_LT(t.find("kernel_b"), t.find("kernel_a"));

  const std::string path = temp_path("gpu_trace.json");
  d::write_chrome_trace(r, path);
  nlohmann::json doc = nlohmann::json::parse(read_file(path));
  std::filesystem::remove(path);
  std::map<uint64_t, nlohmann::json> starts, finishes;
  int64_t gpu_pid = -1, cpu_pid = -1;
  bool stream_named = false, gpu_named = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") starts[e["id"].get<uint64_t>()] = e;
    if (e["ph"] == "f") finishes[e["id"].get<uint64_t>()] = e;
    if (e["ph"] == "X" && e["name"] == "kernel_a") {
      gpu_pid = e["pid"];
      EXPECT_EQ(e["tid"], 7);
      EXPECT_EQ(e["cat"], "kernel");
      EXPECT_EQ(e["args"]["External id"], 1);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.020);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.010);
    }
    if (e["ph"] == "X" && e["name"] == "outer_op") {
      cpu_pid = e["pid"];
      EXPECT_DOUBLE_EQ(e["args"]["cuda time (us)"].get<double>(), 0.040);
    }
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "stream 7") stream_named = true;
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "GPU 0") gpu_named = true;
  }
  EXPECT_NE(gpu_pid, cpu_pid);
  EXPECT_TRUE(stream_named);
  EXPECT_TRUE(gpu_named);
  // One flow per linked GPU event (the memcpy has no op), from the op's thread to the stream.
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(finishes.size(), 2u);
  for (uint64_t corr : {11u, 12u}) {
    ASSERT_TRUE(starts.count(corr) && finishes.count(corr)) << corr;
    EXPECT_EQ(starts[corr]["pid"], cpu_pid);
    EXPECT_EQ(starts[corr]["tid"], 1);
    EXPECT_EQ(finishes[corr]["pid"], gpu_pid);
    EXPECT_EQ(finishes[corr]["bp"], "e");
    EXPECT_EQ(starts[corr]["cat"], finishes[corr]["cat"]);
  }
  EXPECT_DOUBLE_EQ(starts[12]["ts"].get<double>(), 0.010);  // inner_op's start
}
