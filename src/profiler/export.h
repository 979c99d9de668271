// What the profile's outputs are computed from: the stopped session's events (times relative to its
// start). profiler/key_averages.cpp, chrome_trace.cpp, memory_timeline.cpp.
#pragma once
#include <string>
#include <vector>

#include "profiler/recorder.h"
#include "tessera/profiler.h"

namespace tessera::profiler::detail {

// Makes a stopped session's times relative to its start and fills self CPU, self CUDA and CUDA total
// times (profiler/profile.cpp).
void finish_events(SessionResult& r);
KeyAverages compute_key_averages(const std::vector<Event>& events, bool group_by_input_shape, bool with_cuda);
// "[[2, 3], [3]]", PyTorch's format of input shapes.
std::string format_shapes(const std::vector<std::vector<int64_t>>& shapes);
// IOError when the file cannot be written.
void write_chrome_trace(const SessionResult& r, const std::string& path);
void write_memory_timeline(const SessionResult& r, const std::string& path);
// The SVG text itself (write_memory_timeline writes it to a file).
std::string memory_timeline_svg(const std::vector<MemoryEvent>& memory, int64_t duration_ns);

inline bool is_gpu_kind(EventKind k) { return k == EventKind::Kernel || k == EventKind::Memcpy || k == EventKind::Memset; }

}  // namespace tessera::profiler::detail
