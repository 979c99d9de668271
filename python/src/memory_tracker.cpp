// tessera._C._memory: live CPU bytes and blocks handed out by tessera's allocators, for the leak tests
// (python/tests/test_refcount.py): the allocators report every block they hand out and take back
// (runtime/memory_reporter.h); while tracking is on, this reporter keeps the live set. The profiler
// installs its own reporter while it records memory, so tracking and a memory profile do not nest.
#include <mutex>
#include <unordered_map>

#include "bindings.h"
#include "runtime/memory_reporter.h"

namespace tessera::python {
namespace {

struct Live {
  std::mutex mu;
  std::unordered_map<const void*, int64_t> blocks;  // CPU block -> bytes
  int64_t bytes = 0;
};
Live& live() {
  static auto* l = new Live();
  return *l;
}

void reporter(const MemoryReport& r) {
  if (!r.device.is_cpu() || !r.ptr) return;
  Live& l = live();
  std::lock_guard<std::mutex> g(l.mu);
  if (r.bytes > 0) {
    l.blocks[r.ptr] = r.bytes;
    l.bytes += r.bytes;
  } else if (auto it = l.blocks.find(r.ptr); it != l.blocks.end()) {
    l.bytes -= it->second;
    l.blocks.erase(it);
  }
}

}  // namespace

void init_memory_tracker(py::module_& m) {
  py::module_ mem = m.def_submodule("_memory", "live CPU allocations (the leak tests)");
  mem.def("start", [] {
    {
      std::lock_guard<std::mutex> g(live().mu);
      live().blocks.clear();
      live().bytes = 0;
    }
    set_memory_reporter(&reporter);
  });
  mem.def("stop", [] { set_memory_reporter(nullptr); });
  mem.def("live_bytes", [] {
    std::lock_guard<std::mutex> g(live().mu);
    return live().bytes;
  });
  mem.def("live_blocks", [] {
    std::lock_guard<std::mutex> g(live().mu);
    return static_cast<int64_t>(live().blocks.size());
  });
}

}  // namespace tessera::python
