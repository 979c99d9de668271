// Streams and events (Note [Current stream] in cuda_stream.h). Default streams are created once per
// device, lazily, with cudaStreamNonBlocking; the current stream is thread-local per device. Streams
// made by Stream::create are never destroyed (a Stream is a plain value that may be copied anywhere),
// which is what PyTorch's stream pool amounts to as well.
#include <array>
#include <mutex>

#include "runtime/cuda/cuda_backends.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/deferred_check.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/graph_capture.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

constexpr int kMaxDevices = 64;

int resolve(int index) { return index < 0 ? current_device() : index; }

cudaStream_t default_raw(int index) {
  static std::array<cudaStream_t, kMaxDevices> streams{};
  static std::array<std::once_flag, kMaxDevices> once;
  TS_CHECK(index >= 0 && index < device_count() && index < kMaxDevices, DeviceError, "stream: invalid device cuda:",
           index, " (", device_count(), " found)");
  std::call_once(once[index], [index] {
    check_device_architecture(index);  // a device's first use (a failure leaves the flag unset)
    CurrentDevice g(index);
    TS_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[index], cudaStreamNonBlocking));
  });
  return streams[index];
}

// nullptr = the device's default stream.
thread_local std::array<cudaStream_t, kMaxDevices> t_current{};

}  // namespace

cudaStream_t current_raw_stream(int device_index) {
  const int d = resolve(device_index);
  cudaStream_t s = d < kMaxDevices ? t_current[d] : nullptr;
  return s ? s : default_raw(d);
}

Stream current_stream(int device_index) {
  const int d = resolve(device_index);
  return Stream(d, current_raw_stream(d));
}

Stream default_stream(int device_index) {
  const int d = resolve(device_index);
  return Stream(d, default_raw(d));
}

void set_current_stream(const Stream& s) {
  TS_CHECK(s.handle() != nullptr, ValueError, "set_current_stream: the stream is not a valid CUDA stream");
  TS_CHECK(s.device_index() >= 0 && s.device_index() < kMaxDevices, DeviceError, "set_current_stream: invalid device");
  t_current[s.device_index()] = static_cast<cudaStream_t>(s.handle());
}

Stream Stream::create(int device_index, Priority p) {
  const int d = resolve(device_index);
  check_device_architecture(d);
  CurrentDevice g(d);
  int least = 0, greatest = 0;
  TS_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nullptr;
  TS_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, p == Priority::High ? greatest : least));
  return Stream(d, s);
}

bool Stream::query() const {
  cudaError_t err = cudaStreamQuery(static_cast<cudaStream_t>(handle_));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  TS_CUDA_CHECK(err);
  return true;
}

void Stream::synchronize() const {
  check_not_capturing("Stream.synchronize", static_cast<cudaStream_t>(handle_));
  check_not_capturing("Stream.synchronize");
  TS_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)));
  poll_deferred_checks();  // Note [Deferred device checks]
}

StreamGuard::StreamGuard(const Stream& s) {
  prev_device_ = current_device();
  prev_stream_ = current_stream(s.device_index());
  if (s.device_index() != prev_device_) set_device(s.device_index());
  set_current_stream(s);
}
StreamGuard::~StreamGuard() {
  t_current[prev_stream_.device_index()] = static_cast<cudaStream_t>(prev_stream_.handle());
  (void)cudaSetDevice(prev_device_);
}

// ---- events --------------------------------------------------------------------------------------
Event::Event(bool enable_timing, bool blocking, bool interprocess) : timing_(enable_timing) {
  flags_ = (enable_timing ? 0u : cudaEventDisableTiming) | (blocking ? cudaEventBlockingSync : 0u) |
           (interprocess ? cudaEventInterprocess : 0u);
}

Event::~Event() {
  if (handle_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

Event::Event(Event&& o) noexcept
    : handle_(o.handle_), device_index_(o.device_index_), flags_(o.flags_), timing_(o.timing_) {
  o.handle_ = nullptr;
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (handle_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    handle_ = o.handle_;
    device_index_ = o.device_index_;
    flags_ = o.flags_;
    timing_ = o.timing_;
    o.handle_ = nullptr;
  }
  return *this;
}

void Event::record(const Stream& s) {
  if (!handle_) {
    CurrentDevice g(s.device_index());
    cudaEvent_t e = nullptr;
    TS_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags_));
    handle_ = e;
    device_index_ = s.device_index();
  }
  TS_CHECK(device_index_ == s.device_index(), DeviceError, "Event.record: the event was created on cuda:", device_index_,
           " but the stream is on cuda:", s.device_index());
  CurrentDevice g(s.device_index());
  TS_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(s.handle())));
}

void Event::record() { record(current_stream()); }

void Event::wait(const Stream& s) const {
  if (!handle_) return;  // nothing recorded: nothing to wait for (as PyTorch)
  CurrentDevice g(s.device_index());
  TS_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.handle()), static_cast<cudaEvent_t>(handle_), 0));
}

bool Event::query() const {
  if (!handle_) return true;
  cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  TS_CUDA_CHECK(err);
  return true;
}

void Event::synchronize() const {
  check_not_capturing("Event.synchronize");
  if (handle_) TS_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)));
  poll_deferred_checks();  // Note [Deferred device checks]
}

float Event::elapsed_time(const Event& end) const {
  TS_CHECK(timing_ && end.timing_, ValueError, "Event.elapsed_time: both events must be created with enable_timing=true");
  TS_CHECK(handle_ && end.handle_, ValueError, "Event.elapsed_time: both events must be recorded first");
  float ms = 0;
  TS_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_), static_cast<cudaEvent_t>(end.handle_)));
  return ms;
}

}  // namespace tessera::cuda
