// The process-wide determinism switch (tessera/determinism.h), read from TESSERA_DETERMINISTIC at
// start-up. Kept in runtime, without CUDA, so that a build without the CUDA backend answers it too.
#include "runtime/determinism.h"

#include <atomic>
#include <cstdlib>

namespace tessera {
namespace {
bool from_environment() {
  const char* v = std::getenv("TESSERA_DETERMINISTIC");
  return v != nullptr && v[0] == '1';
}
std::atomic<bool>& flag() {
  static std::atomic<bool> f{from_environment()};
  return f;
}
}  // namespace

void set_deterministic(bool on) { flag().store(on, std::memory_order_relaxed); }
bool is_deterministic() { return flag().load(std::memory_order_relaxed); }

}  // namespace tessera
