// The captures of Generators (Note [Philox under graph capture] in philox_capture.h). A short list
// under one mutex; the common case (no capture anywhere) is one relaxed atomic load.
#include "runtime/philox_capture.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "tessera/error.h"

namespace tessera {
namespace {

struct Capture {
  Generator* gen;
  std::thread::id thread;
  const uint64_t* seed_ptr;
  const uint64_t* offset_ptr;
  uint64_t reserved = 0;
};

std::mutex g_mu;
std::vector<Capture> g_captures;
std::atomic<int> g_count{0};

}  // namespace

bool philox_reserve_captured(Generator& gen, uint64_t counters, CapturedPhilox* out) {
  if (g_count.load(std::memory_order_acquire) == 0) [[likely]] return false;
  std::lock_guard<std::mutex> g(g_mu);
  const auto me = std::this_thread::get_id();
  for (Capture& c : g_captures) {
    if (c.gen == &gen && c.thread == me) {
      out->seed_ptr = c.seed_ptr;
      out->offset_ptr = c.offset_ptr;
      out->offset = c.reserved;
      c.reserved += counters;
      return true;
    }
  }
  return false;
}

void philox_capture_begin(Generator& gen, const uint64_t* seed_ptr, const uint64_t* offset_ptr) {
  std::lock_guard<std::mutex> g(g_mu);
  for (const Capture& c : g_captures)
    TS_CHECK(c.gen != &gen, ValueError, "capture_begin: the CUDA random generator is already being captured by "
             "another graph (capture graphs that draw random numbers one at a time)");
  g_captures.push_back(Capture{&gen, std::this_thread::get_id(), seed_ptr, offset_ptr});
  g_count.fetch_add(1, std::memory_order_release);
}

uint64_t philox_capture_end(Generator& gen) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = std::find_if(g_captures.begin(), g_captures.end(), [&](const Capture& c) { return c.gen == &gen; });
  if (it == g_captures.end()) return 0;
  const uint64_t reserved = it->reserved;
  g_captures.erase(it);
  g_count.fetch_sub(1, std::memory_order_release);
  return reserved;
}

}  // namespace tessera
