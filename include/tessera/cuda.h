// The CUDA runtime as a user sees it: devices, streams, events, memory statistics and the TF32 switch.
// The header holds no CUDA types (a user without the CUDA toolkit builds against it); streams and
// events carry the raw handles as opaque pointers. Built without the CUDA backend, `is_available()`
// is false, `device_count()` is 0 and everything that needs a GPU raises DeviceError saying so.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/device.h"

namespace tessera::cuda {

// ---- devices ---------------------------------------------------------------------------------
bool is_available();        // built with CUDA and at least one GPU visible
bool is_built();            // built with the CUDA backend (whether or not a GPU is present)
int device_count();         // 0 when none (never raises)
int current_device();       // the calling thread's current device
void set_device(int index);

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;        // compute capability sm_<major><minor>
  int64_t total_memory = 0;        // bytes
  int multi_processor_count = 0;
  int64_t l2_cache_size = 0;       // bytes
  int memory_bus_width = 0;        // bits
  int memory_clock_khz = 0;
};
DeviceProperties get_device_properties(int index = -1);

// Makes `device` current for the guard's lifetime, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// Waits for all work on a device (default: the current one) to finish. Raises an error a kernel found
// in its data since the last synchronization (an index out of range: IndexError naming the op), as
// every point where the host waits for the device does (item(), cpu(), Stream/Event synchronize).
void synchronize(int index = -1);

// Checks of device data (bounds of gather, index_select, embedding, scatter, cross-entropy targets)
// queued and not yet resolved; each resolves at the next synchronization. 0 without CUDA.
int64_t pending_deferred_checks();

// ---- streams and events ----------------------------------------------------------------------
// A Stream is a value: a device index plus the raw cudaStream_t. Each device's default stream is one
// that tessera creates with cudaStreamNonBlocking (the legacy NULL stream, which synchronizes with
// every other stream, is never used).
class Stream {
 public:
  enum class Priority { Normal, High };
  Stream() = default;
  // Creates a new stream on a device (-1: the current one), non-blocking with respect to the legacy
  // default stream. Streams live until the process ends (as PyTorch's pool streams do).
  static Stream create(int device_index = -1, Priority p = Priority::Normal);
  Device device() const { return Device::cuda(device_index_); }
  int device_index() const { return device_index_; }
  void* handle() const { return handle_; }  // the cudaStream_t
  bool query() const;                       // true when all work on it has finished
  void synchronize() const;
  bool operator==(const Stream& o) const { return handle_ == o.handle_ && device_index_ == o.device_index_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

  Stream(int device_index, void* handle) : device_index_(device_index), handle_(handle) {}

 private:
  int device_index_ = 0;
  void* handle_ = nullptr;
};

// The stream every kernel and library call of tessera runs on, per device and thread.
Stream current_stream(int device_index = -1);
// The device's default stream (what current_stream returns until set_current_stream).
Stream default_stream(int device_index = -1);
void set_current_stream(const Stream& s);

// Makes `s` current on its device (and its device current) for the guard's lifetime.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream prev_stream_;
  int prev_device_ = -1;
};

class Event {
 public:
  explicit Event(bool enable_timing = false, bool blocking = false, bool interprocess = false);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& s);
  void record();                       // on the current stream
  void wait(const Stream& s) const;    // s waits for the work recorded before this event
  bool query() const;                  // true when the recorded work has finished
  void synchronize() const;
  float elapsed_time(const Event& end) const;  // milliseconds between this event and `end`
  void* handle() const { return handle_; }     // the cudaEvent_t (created lazily at the first record)

 private:
  void* handle_ = nullptr;
  int device_index_ = -1;
  unsigned flags_ = 0;
  bool timing_ = false;
};

// ---- the caching allocator --------------------------------------------------------------------
// Device memory is cached and reused as by PyTorch's caching allocator; settings come from the
// environment variable TESSERA_CUDA_ALLOC_CONF (e.g. max_split_size_mb:256, backend:cudaMalloc), read at
// a device's first allocation; a bad setting raises ValueError there.
// Keys as PyTorch's torch.cuda.memory_stats(): "allocated_bytes.all.current", "reserved_bytes.large_pool.peak",
// "active_bytes.small_pool.allocated", "inactive_split_bytes.all.current", "num_alloc_retries",
// "num_ooms", "allocation.all.current", "segment.all.current", ...
std::map<std::string, int64_t> memory_stats(int device_index = -1);
int64_t memory_allocated(int device_index = -1);
int64_t max_memory_allocated(int device_index = -1);
int64_t memory_reserved(int device_index = -1);
int64_t max_memory_reserved(int device_index = -1);
void reset_peak_memory_stats(int device_index = -1);

void reset_accumulated_memory_stats(int device_index = -1);  // the .allocated/.freed sums and num_* counters
std::string memory_summary(int device_index = -1);  // a readable table

// memory_snapshot(): every segment (one cudaMalloc) of every device, in address order, with its blocks in
// address order. A block is allocated, or active (allocated, or freed but still awaiting the streams
// that record_stream named), or free (cached for reuse).
struct BlockInfo {
  uintptr_t address = 0;
  int64_t size = 0;
  bool allocated = false;
  bool active = false;
  int64_t requested_size = 0;  // what was asked for (allocated blocks; 0 otherwise)
};
struct SegmentInfo {
  int device = 0;
  uintptr_t address = 0;
  int64_t total_size = 0;
  int64_t allocated_size = 0;  // sum of the allocated blocks
  int64_t active_size = 0;     // sum of the active blocks
  int64_t requested_size = 0;  // sum of the allocated blocks' requests
  bool is_large = false;       // large pool (else small pool: requests of at most 1 MiB)
  void* stream = nullptr;      // the cudaStream_t the segment's blocks belong to
  std::vector<BlockInfo> blocks;
};
std::vector<SegmentInfo> memory_snapshot();
// Returns every cached segment whose blocks are all free to the device (waiting for the streams that
// still use freed blocks first).
void empty_cache();
// Caps this process's reserved memory on a device at fraction * total memory: allocations beyond raise
// OutOfMemoryError (ValueError for a fraction outside [0, 1]).
void set_per_process_memory_fraction(double fraction, int device_index = -1);

// ---- math switches -----------------------------------------------------------------------------
// TF32 tensor cores for float32 matmuls and convolutions (PyTorch: torch.backends.cuda.matmul.allow_tf32
// defaults to false; cudnn.allow_tf32 to true).
void set_allow_tf32(bool matmul);
bool allow_tf32();
void set_cudnn_allow_tf32(bool conv);
bool cudnn_allow_tf32();
// How cuDNN convolution algorithms are chosen, once per shape (PyTorch: torch.backends.cudnn.benchmark,
// default false): false takes cuDNN's heuristics; true times the candidate algorithms on the first call
// of each shape (that call synchronizes and needs extra workspace) and keeps the fastest.
void set_cudnn_benchmark(bool benchmark);
bool cudnn_benchmark();
// Whether nn::functional::scaled_dot_product_attention may take the fused flash attention kernels
// (PyTorch: torch.backends.cuda.enable_flash_sdp, default true). Off, it runs the composite math path
// (matmul, softmax, matmul), which keeps the (L, S) scores in memory: for comparing the two.
void enable_flash_sdp(bool enabled);
bool flash_sdp_enabled();
// Whether the fused attention on the GPU may run cuDNN's fused flash attention engines (PyTorch:
// torch.backends.cuda.enable_cudnn_sdp, default true). Where they apply (float16 / bfloat16, compute
// capability 8.0 or newer, a cuDNN with such an engine for the shape) they run forward and backward;
// otherwise, or when this is off, tessera's own flash kernels do. With use_deterministic_algorithms
// on, the backward takes a cuDNN engine only if cuDNN marks it deterministic. enable_flash_sdp(false)
// turns off both.
void enable_cudnn_sdp(bool enabled);
bool cudnn_sdp_enabled();

// ---- build information ---------------------------------------------------------------------------
struct BuildInfo {
  std::string cuda_runtime;    // "13.0"
  std::string cudnn;           // "9.x.y" or "" when not linked
  std::string cublas;          // "13.x.y"
  std::string nccl;            // "" when not linked
  std::vector<int> architectures;  // compute capabilities compiled in as SASS, e.g. {90}
  std::vector<int> ptx_architectures;
  std::string driver;          // "13.0" (driver API version)
};
BuildInfo build_info();

}  // namespace tessera::cuda
