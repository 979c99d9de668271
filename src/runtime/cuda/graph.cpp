// cuda::Graph (tessera/cuda_graph.h): stream capture into a private memory pool, instantiation and
// replay, as PyTorch's CUDAGraph; and the capture checks of synchronizing calls (graph_capture.h).
//
// Invariants: a Graph holds at most one capture; between capture_begin and capture_end the capture
// stream is the one it began on, the caching allocator sends that capture's requests to the graph's
// pool (Note [Graph private pools]) and the CUDA generator's draws are relative to the graph (Note
// [Philox under graph capture]); after capture_end the graph holds an instantiated cudaGraphExec_t and
// one use of its pool until reset().
//
// Choices, following PyTorch: capture mode Global by default (a stray synchronizing call from any
// thread fails loudly instead of corrupting the capture); the capture's cudaMallocs run in relaxed mode
// (cuda_backends.cpp); instantiation with cudaGraphInstantiateFlagAutoFreeOnLaunch (no effect unless
// the graph holds stream-ordered allocations, which tessera does not make; PyTorch passes it); the
// cudaGraph_t is destroyed once instantiated (nothing reads it again). Before a capture begins, the
// segments of pools that no graph uses any more go back to the device (torch.cuda.graph empties the
// cache there): captured one after another, graphs that are destroyed in between reuse the memory.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/graph_capture.h"
#include "runtime/philox_capture.h"
#include "tessera/cuda_graph.h"
#include "tessera/error.h"
#include "tessera/generator.h"

namespace tessera::cuda {
namespace {

std::atomic<uint64_t> g_pool_uid{1};
// What keep_for_graph reaches of a capturing graph.
struct HostKeep {
  cudaStream_t capture_stream = nullptr;
  std::vector<DataPtr> kept_host;            // pinned blocks captured copies read (keep_for_graph)
  std::vector<cudaStream_t> replay_streams;  // where replays ran (only while kept_host is not empty)

  // Pinned blocks go back to their cache after the work queued so far on the streams that read them.
  void release_kept_host() noexcept {
    try {
      for (DataPtr& p : kept_host) {
        record_host_use(p.get(), capture_stream);
        for (cudaStream_t s : replay_streams) record_host_use(p.get(), s);
      }
    } catch (...) {
    }
    kept_host.clear();
    replay_streams.clear();
  }
};

std::mutex g_capturing_mu;
std::map<unsigned long long, HostKeep*> g_capturing;  // capture id -> the graph capturing it
std::atomic<PhiloxStateWriter> g_philox_writer{nullptr};

cudaStreamCaptureMode to_cuda(CaptureMode m) {
  switch (m) {
    case CaptureMode::ThreadLocal: return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::Relaxed: return cudaStreamCaptureModeRelaxed;
    default: return cudaStreamCaptureModeGlobal;
  }
}

}  // namespace

// ---- capture checks ------------------------------------------------------------------------------

bool stream_is_captured(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TS_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

namespace {
thread_local CaptureProbe* t_probe = nullptr;
}  // namespace

CaptureProbe::CaptureProbe() : prev_(t_probe) { t_probe = this; }
CaptureProbe::~CaptureProbe() { t_probe = prev_; }
void CaptureProbe::note(std::string reason) {
  if (reason_.empty()) reason_ = std::move(reason);
}

void check_not_capturing(const char* op, cudaStream_t stream) {
  if (!stream_is_captured(stream)) [[likely]] {
    if (t_probe) [[unlikely]] t_probe->note(std::string(op) + " synchronizes the device with the host");
    return;
  }
  TS_THROW(Error, op, ": cannot synchronize the device while a CUDA graph is being captured (a captured graph "
           "replays its kernels without the host: read results after capture_end and replay, and keep host "
           "reads, printing and synchronizations out of the captured work)");
}

void check_not_capturing(const char* op) {
  if (device_count() == 0) return;
  check_not_capturing(op, current_raw_stream(-1));
}

void check_capturable(const char* op, const char* why) {
  if (device_count() == 0) return;
  if (!stream_is_captured(current_raw_stream(-1))) {
    if (t_probe) t_probe->note(std::string(op) + ": " + why);
    return;
  }
  TS_THROW(Error, op, ": cannot be captured in a CUDA graph: ", why);
}

bool is_current_stream_capturing() {
  if (device_count() == 0) return false;
  return stream_is_captured(current_raw_stream(-1));
}

void set_philox_state_writer(PhiloxStateWriter writer) { g_philox_writer.store(writer, std::memory_order_release); }

void keep_for_graph(cudaStream_t stream, DataPtr host) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  TS_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id));
  std::lock_guard<std::mutex> lock(g_capturing_mu);
  auto it = status == cudaStreamCaptureStatusActive ? g_capturing.find(id) : g_capturing.end();
  TS_CHECK(it != g_capturing.end(), ValueError, "CUDA graph capture: a copy from host memory was captured outside a "
           "cuda::Graph capture (capture with cuda::Graph, which keeps the host memory for its replays)");
  it->second->kept_host.push_back(std::move(host));
}

MempoolId graph_pool_handle() { return {0, g_pool_uid.fetch_add(1)}; }

// ---- Graph -----------------------------------------------------------------------------------------

struct Graph::Impl : HostKeep {
  int device = -1;
  MempoolId pool{0, 0};
  bool pool_open = false;     // the allocator sends the capture's requests to `pool`
  bool holds_pool = false;    // this graph holds one use of `pool`
  bool capturing = false;
  bool rng_capturing = false;
  std::atomic<unsigned long long> capture_id{0};  // read by the allocator's stream filter
  cudaGraphExec_t exec = nullptr;
  DataPtr rng_state;           // {seed, base offset} (device): the words random kernels read at replay
  uint64_t rng_increment = 0;  // counters the capture reserved: what each replay reserves

  // Undoes what capture_begin set up (not the CUDA capture itself).
  void close_capture() noexcept {
    {
      std::lock_guard<std::mutex> lock(g_capturing_mu);
      for (auto it = g_capturing.begin(); it != g_capturing.end(); ++it) {
        if (it->second == static_cast<HostKeep*>(this)) {
          g_capturing.erase(it);
          break;
        }
      }
    }
    try {
      if (rng_capturing) {
        rng_increment = philox_capture_end(default_generator(Device::cuda()));
        rng_capturing = false;
      }
      if (pool_open) {
        pool_open = false;
        end_allocate_to_pool(device, pool);
      }
    } catch (...) {
    }
    capturing = false;
  }
};

Graph::Graph() : impl_(std::make_unique<Impl>()) {}
Graph::~Graph() {
  if (impl_) reset();
}
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    if (impl_) reset();
    impl_ = std::move(o.impl_);
  }
  return *this;
}

MempoolId Graph::pool() const { return impl_ ? impl_->pool : MempoolId{0, 0}; }
bool Graph::captured() const { return impl_ && impl_->exec != nullptr; }
bool Graph::capturing() const { return impl_ && impl_->capturing; }

void Graph::capture_begin(MempoolId pool, CaptureMode mode) {
  if (!impl_) impl_ = std::make_unique<Impl>();
  Impl& g = *impl_;
  TS_CHECK(!g.capturing && g.exec == nullptr, ValueError,
           "capture_begin: this graph already holds a capture (call reset() before capturing again)");
  const int device = current_device();
  const cudaStream_t stream = current_raw_stream(device);
  TS_CHECK(stream != static_cast<cudaStream_t>(default_stream(device).handle()), ValueError,
           "capture_begin: CUDA graphs must be captured on a stream other than the default stream (make a "
           "cuda::Stream::create() current with a cuda::StreamGuard for the capture; replays may run on any "
           "stream)");
  TS_CHECK(!stream_is_captured(stream), ValueError, "capture_begin: the current stream is already being captured");
  CurrentDevice dg(device);
  g.device = device;
  g.capture_stream = stream;
  g.pool = pool != MempoolId{0, 0} ? pool : MempoolId{g_pool_uid.fetch_add(1), 0};
  g.capture_id.store(0);
  // Memory of graphs gone, then the words the graph's random kernels read (before the capture: this is
  // ordinary memory, written by each replay).
  release_freeable_pools(device);
  if (g.rng_state.get() == nullptr) g.rng_state = cuda_allocator()->allocate(2 * sizeof(uint64_t), Device::cuda(device));
  Impl* self = &g;
  begin_allocate_to_pool(device, g.pool, [self](void* s) {
    // The capture's stream and the streams it forked (they share its capture id).
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    if (cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(s), &status, &id) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return status == cudaStreamCaptureStatusActive && id != 0 && id == self->capture_id.load();
  });
  g.pool_open = true;
  g.holds_pool = true;
  g.capturing = true;
  try {
    auto* words = static_cast<uint64_t*>(g.rng_state.get());
    philox_capture_begin(default_generator(Device::cuda()), words, words + 1);
    g.rng_capturing = true;
    TS_CUDA_CHECK(cudaStreamBeginCapture(stream, to_cuda(mode)));
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    TS_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id));
    g.capture_id.store(id);
    std::lock_guard<std::mutex> lock(g_capturing_mu);
    g_capturing[id] = &g;
  } catch (...) {
    if (stream_is_captured(stream)) {
      cudaGraph_t discard = nullptr;
      if (cudaStreamEndCapture(stream, &discard) == cudaSuccess && discard) (void)cudaGraphDestroy(discard);
      (void)cudaGetLastError();
    }
    g.close_capture();
    reset();
    throw;
  }
}

void Graph::capture_end() {
  TS_CHECK(impl_ && impl_->capturing, ValueError, "capture_end: capture_begin was not called on this graph");
  Impl& g = *impl_;
  CurrentDevice dg(g.device);
  const cudaStream_t stream = current_raw_stream(g.device);
  TS_CHECK(stream == g.capture_stream, ValueError,
           "capture_end: the capture must end on the stream it began on (make that stream current again)");
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(stream, &graph);
  g.close_capture();
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (graph) (void)cudaGraphDestroy(graph);
    const char* name = cudaGetErrorName(err);
    const char* text = cudaGetErrorString(err);
    reset();
    TS_THROW(Error, "capture_end: the CUDA graph capture failed (", name, ": ", text,
             "); a call inside the capture synchronized, or used an operation that cannot be captured");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ierr = cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
  (void)cudaGraphDestroy(graph);
  if (ierr != cudaSuccess) {
    (void)cudaGetLastError();
    reset();
    throw_cuda_error(ierr, "capture_end: cudaGraphInstantiateWithFlags", __FILE__, __LINE__);
  }
  g.exec = exec;
}

void Graph::replay() {
  TS_CHECK(captured(), ValueError, "replay: the graph holds no capture (call capture_begin and capture_end first)");
  Impl& g = *impl_;
  CurrentDevice dg(g.device);
  const cudaStream_t stream = current_raw_stream(g.device);
  if (g.rng_increment > 0) {
    // This replay's share of the generator, written where the graph's random kernels read it.
    PhiloxStateWriter writer = g_philox_writer.load(std::memory_order_acquire);
    TS_CHECK(writer != nullptr, DeviceError, "replay: the CUDA random kernels are not registered");
    const auto [seed, offset] = default_generator(Device::cuda()).reserve(g.rng_increment);
    writer(static_cast<uint64_t*>(g.rng_state.get()), seed, offset, stream);
    // The words belong to the capture stream; a replay elsewhere reads them too (Note [CUDA caching allocator]).
    if (stream != g.capture_stream) record_stream(g.rng_state.get(), stream);
  }
  if (!g.kept_host.empty() && stream != g.capture_stream &&
      std::find(g.replay_streams.begin(), g.replay_streams.end(), stream) == g.replay_streams.end())
    g.replay_streams.push_back(stream);
  TS_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
}

void Graph::reset() {
  if (!impl_) return;
  Impl& g = *impl_;
  try {
    if (g.capturing) {
      // Abandoned mid-capture (an exception in the captured work): end and discard the capture.
      CurrentDevice dg(g.device);
      if (g.capture_stream && stream_is_captured(g.capture_stream)) {
        cudaGraph_t discard = nullptr;
        if (cudaStreamEndCapture(g.capture_stream, &discard) == cudaSuccess && discard) (void)cudaGraphDestroy(discard);
        (void)cudaGetLastError();
      }
      g.close_capture();
    }
    if (g.exec) {
      CurrentDevice dg(g.device);
      (void)cudaGraphExecDestroy(g.exec);
      g.exec = nullptr;
    }
    g.release_kept_host();
    if (g.holds_pool) {
      g.holds_pool = false;
      release_pool(g.device, g.pool);
    }
  } catch (...) {
    // Only from a device already failing; the graph is unusable either way.
  }
  g.rng_increment = 0;
  g.capture_stream = nullptr;
  g.pool = {0, 0};
}

}  // namespace tessera::cuda
