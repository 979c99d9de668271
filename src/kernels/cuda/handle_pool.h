// Library handles (cuBLASLt, cuDNN) per (device, thread). A handle is created lazily on a thread's first
// use on a device and returned to a per-device pool when the thread ends, so that a program starting
// many threads reuses handles instead of creating one per thread. Handles are never destroyed: the
// driver may already be gone at process exit, as PyTorch's handle pools also assume.
#pragma once
#include <cstddef>
#include <mutex>
#include <vector>

namespace tessera::cuda {

template <class Handle>
class HandlePool {
 public:
  // The calling thread's handle for `device`: its own, else one of an ended thread, else create().
  template <class Create>
  static Handle get(size_t device, Create&& create) {
    std::vector<Handle>& mine = thread_handles().by_device;
    if (mine.size() <= device) mine.resize(device + 1, Handle{});
    if (mine[device]) [[likely]] return mine[device];
    {
      FreeHandles& f = free_handles();
      std::lock_guard<std::mutex> lock(f.mu);
      if (f.by_device.size() > device && !f.by_device[device].empty()) {
        mine[device] = f.by_device[device].back();
        f.by_device[device].pop_back();
      }
    }
    if (!mine[device]) mine[device] = create();
    return mine[device];
  }

 private:
  // Handles of ended threads, per device. Leaked on purpose so that thread-local destructors running
  // at exit still find it.
  struct FreeHandles {
    std::mutex mu;
    std::vector<std::vector<Handle>> by_device;
  };
  static FreeHandles& free_handles() {
    static FreeHandles* f = new FreeHandles;
    return *f;
  }
  struct ThreadHandles {
    std::vector<Handle> by_device;
    ~ThreadHandles() {
      FreeHandles& f = free_handles();
      std::lock_guard<std::mutex> lock(f.mu);
      for (size_t d = 0; d < by_device.size(); ++d) {
        if (!by_device[d]) continue;
        if (f.by_device.size() <= d) f.by_device.resize(d + 1);
        f.by_device[d].push_back(by_device[d]);
      }
    }
  };
  static ThreadHandles& thread_handles() {
    thread_local ThreadHandles t;
    return t;
  }
};

}  // namespace tessera::cuda
