// tessera/cuda.h in a build without the CUDA backend: no devices; queries answer "none" and every
// call that needs a GPU raises DeviceError saying that tessera was built without CUDA.
#include "tessera/cuda.h"
#include "tessera/cuda_graph.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  TS_THROW(DeviceError, what, ": tessera was built without the CUDA backend (configure with the cuda preset)");
}
}  // namespace

bool is_available() { return false; }
bool is_built() { return false; }
int device_count() { return 0; }
int current_device() { no_cuda("current_device"); }
void set_device(int) { no_cuda("set_device"); }
DeviceProperties get_device_properties(int) { no_cuda("get_device_properties"); }
DeviceGuard::DeviceGuard(int) { no_cuda("DeviceGuard"); }
DeviceGuard::DeviceGuard(Device) { no_cuda("DeviceGuard"); }
DeviceGuard::~DeviceGuard() = default;
void synchronize(int) { no_cuda("synchronize"); }
int64_t pending_deferred_checks() { return 0; }

Stream Stream::create(int, Priority) { no_cuda("Stream.create"); }
bool Stream::query() const { no_cuda("Stream.query"); }
void Stream::synchronize() const { no_cuda("Stream.synchronize"); }
Stream current_stream(int) { no_cuda("current_stream"); }
Stream default_stream(int) { no_cuda("default_stream"); }
void set_current_stream(const Stream&) { no_cuda("set_current_stream"); }
StreamGuard::StreamGuard(const Stream&) { no_cuda("StreamGuard"); }
StreamGuard::~StreamGuard() = default;

Event::Event(bool, bool, bool) { no_cuda("Event"); }
Event::~Event() = default;
Event::Event(Event&& o) noexcept : handle_(o.handle_) {}
Event& Event::operator=(Event&&) noexcept { return *this; }
void Event::record(const Stream&) { no_cuda("Event.record"); }
void Event::record() { no_cuda("Event.record"); }
void Event::wait(const Stream&) const { no_cuda("Event.wait"); }
bool Event::query() const { no_cuda("Event.query"); }
void Event::synchronize() const { no_cuda("Event.synchronize"); }
float Event::elapsed_time(const Event&) const { no_cuda("Event.elapsed_time"); }

std::map<std::string, int64_t> memory_stats(int) { no_cuda("memory_stats"); }
int64_t memory_allocated(int) { no_cuda("memory_allocated"); }
int64_t max_memory_allocated(int) { no_cuda("max_memory_allocated"); }
int64_t memory_reserved(int) { no_cuda("memory_reserved"); }
int64_t max_memory_reserved(int) { no_cuda("max_memory_reserved"); }
void reset_peak_memory_stats(int) { no_cuda("reset_peak_memory_stats"); }
void reset_accumulated_memory_stats(int) { no_cuda("reset_accumulated_memory_stats"); }
std::string memory_summary(int) { no_cuda("memory_summary"); }
std::vector<SegmentInfo> memory_snapshot() { no_cuda("memory_snapshot"); }
void empty_cache() {}  // nothing cached: a no-op, as torch.cuda.empty_cache() without CUDA initialised
void set_per_process_memory_fraction(double, int) { no_cuda("set_per_process_memory_fraction"); }
BuildInfo build_info() { return {}; }


// CUDA graphs (tessera/cuda_graph.h): nothing can be captured; nothing is ever being captured.
struct Graph::Impl {};
Graph::Graph() = default;
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;
void Graph::capture_begin(MempoolId, CaptureMode) { no_cuda("Graph.capture_begin"); }
void Graph::capture_end() { no_cuda("Graph.capture_end"); }
void Graph::replay() { no_cuda("Graph.replay"); }
void Graph::reset() {}
MempoolId Graph::pool() const { return {0, 0}; }
bool Graph::captured() const { return false; }
bool Graph::capturing() const { return false; }
MempoolId graph_pool_handle() { no_cuda("graph_pool_handle"); }
bool is_current_stream_capturing() { return false; }
void check_not_capturing(const char*) {}
void check_capturable(const char*, const char*) {}
CaptureProbe::CaptureProbe() : prev_(nullptr) {}
CaptureProbe::~CaptureProbe() = default;
void CaptureProbe::note(std::string reason) {
  if (reason_.empty()) reason_ = std::move(reason);
}

}  // namespace tessera::cuda
