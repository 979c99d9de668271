// Deferred device checks (Note [Deferred device checks] in deferred_check.h): a FIFO of pending checks,
// each a slot of a pinned ring (two 64-bit words) and an event; resolved in order by polling.
#include "runtime/cuda/deferred_check.h"

#include <deque>
#include <exception>
#include <mutex>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

constexpr int64_t kSlots = 4096;  // checks in flight before a new one waits for the oldest

struct Pending {
  int64_t slot;
  int device;
  cudaEvent_t done;
  DeferredRaise raise;
};

constexpr int kMaxDevices = 64;

struct State {
  std::mutex mu;
  std::deque<Pending> pending;
  std::vector<cudaEvent_t> free_events[kMaxDevices];  // per device: an event records on its own device's streams
  uint64_t* ring = nullptr;  // kSlots * 2 words of pinned host memory
  int64_t next = 0;          // the next slot to hand out
};

// Leaked on purpose: no destructor runs after the driver has gone at exit.
State& state() {
  static State* s = new State;
  return *s;
}

cudaEvent_t take_event(State& s, int device) {
  std::vector<cudaEvent_t>& free = s.free_events[device];
  if (!free.empty()) {
    cudaEvent_t e = free.back();
    free.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  TS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

// Pops the completed checks at the front (waiting for the front one when `wait_front`); returns the
// first failure's closure and words, or nothing. Called with the lock held.
bool pop_completed(State& s, bool wait_front, DeferredRaise* failed, uint64_t* w0, uint64_t* w1) {
  while (!s.pending.empty()) {
    Pending& p = s.pending.front();
    cudaError_t st = wait_front ? cudaEventSynchronize(p.done) : cudaEventQuery(p.done);
    wait_front = false;
    if (st == cudaErrorNotReady) return false;
    if (st != cudaSuccess) throw_cuda_error(st, "deferred check: cudaEventQuery", __FILE__, __LINE__);
    const uint64_t a = s.ring[2 * p.slot], b = s.ring[2 * p.slot + 1];
    DeferredRaise r = std::move(p.raise);
    s.free_events[p.device].push_back(p.done);
    s.pending.pop_front();
    if (a != 0 || b != 0) {
      *failed = std::move(r);
      *w0 = a;
      *w1 = b;
      return true;
    }
  }
  return false;
}

void resolve(bool wait_front) {
  State& s = state();
  DeferredRaise failed;
  uint64_t a = 0, b = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.pending.empty()) return;
    if (!pop_completed(s, wait_front, &failed, &a, &b)) return;
  }
  failed(a, b);  // outside the lock: it may read from the device, and it throws
}

}  // namespace

void poll_deferred_checks() { resolve(false); }

int64_t pending_deferred_checks() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return static_cast<int64_t>(s.pending.size());
}

void defer_status_check(cudaStream_t stream, const void* device_words, DeferredRaise raise) {
  // Earlier checks that have landed first (never this op's own, so an op does not raise its own
  // error); an error of theirs is raised after this op's check is queued, so that one is kept.
  std::exception_ptr earlier;
  try {
    poll_deferred_checks();
  } catch (...) {
    earlier = std::current_exception();
  }
  State& s = state();
  // A full ring: the oldest check must land before its slot is handed out again.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (static_cast<int64_t>(s.pending.size()) < kSlots) break;
    }
    resolve(true);
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.ring == nullptr) {
      void* p = nullptr;
      TS_CUDA_CHECK(cudaHostAlloc(&p, kSlots * 2 * sizeof(uint64_t), cudaHostAllocDefault));
      s.ring = static_cast<uint64_t*>(p);
    }
    int device = 0;
    TS_CUDA_CHECK(cudaGetDevice(&device));  // the entry made the stream's device current
    TS_CHECK(device >= 0 && device < kMaxDevices, DeviceError, "deferred check: device ", device, " out of range");
    const int64_t slot = s.next;
    TS_CUDA_CHECK(
        cudaMemcpyAsync(s.ring + 2 * slot, device_words, 2 * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
    cudaEvent_t done = take_event(s, device);
    TS_CUDA_CHECK(cudaEventRecord(done, stream));
    s.next = (s.next + 1) % kSlots;
    s.pending.push_back(Pending{slot, device, done, std::move(raise)});
  }
  if (earlier) std::rethrow_exception(earlier);
}

}  // namespace tessera::cuda
