// See runtime/memory_reporter.h.
#include "runtime/memory_reporter.h"

namespace tessera {
namespace detail {
std::atomic<MemoryReporter> g_memory_reporter{nullptr};
}

void set_memory_reporter(MemoryReporter reporter) { detail::g_memory_reporter.store(reporter); }

}  // namespace tessera
