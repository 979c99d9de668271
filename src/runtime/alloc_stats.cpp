// The caching allocator's statistics as the user sees them (block_pool.h): PyTorch's key names, its size
// format in messages, and a summary table laid out as torch.cuda.memory_summary()'s.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "runtime/block_pool.h"

namespace tessera::alloc {
namespace {

constexpr const char* kPoolNames[kNumStatTypes] = {"all", "small_pool", "large_pool"};

void put(std::map<std::string, int64_t>& m, const std::string& prefix, const Stat& s) {
  m[prefix + ".current"] = s.current;
  m[prefix + ".peak"] = s.peak;
  m[prefix + ".allocated"] = s.allocated;
  m[prefix + ".freed"] = s.freed;
}

struct Metric {
  const char* key;
  const char* title;
  const StatArray DeviceStats::*stat;
  bool bytes;
};
constexpr Metric kMetrics[] = {
    {"allocated_bytes", "Allocated memory", &DeviceStats::allocated_bytes, true},
    {"active_bytes", "Active memory", &DeviceStats::active_bytes, true},
    {"requested_bytes", "Requested memory", &DeviceStats::requested_bytes, true},
    {"reserved_bytes", "GPU reserved memory", &DeviceStats::reserved_bytes, true},
    {"inactive_split_bytes", "Non-releasable memory", &DeviceStats::inactive_split_bytes, true},
    {"allocation", "Allocations", &DeviceStats::allocation, false},
    {"active", "Active allocs", &DeviceStats::active, false},
    {"segment", "GPU reserved segments", &DeviceStats::segment, false},
    {"inactive_split", "Non-releasable allocs", &DeviceStats::inactive_split, false},
};

// A cell of 10 characters: the value scaled to the unit that suits `ref` (the row's "all" value).
std::string table_size(int64_t v, int64_t ref) {
  static const char* units[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double r = static_cast<double>(ref < 0 ? -ref : ref);
  while (u < 5 && r >= 768.0 * 1024.0) {
    v /= 1024;
    r /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%6" PRId64 " %s", v, units[u]);
  return buf;
}

std::string table_count(int64_t v, int64_t ref) {
  static const char* units[] = {" ", "K", "M"};
  int u = 0;
  double r = static_cast<double>(ref < 0 ? -ref : ref);
  while (u < 2 && r >= 750.0 * 1000.0) {
    v /= 1000;
    r /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%7" PRId64 " %s ", v, units[u]);
  return buf;
}

// One table line: `text` padded to the inner width between the outer bars.
constexpr size_t kWidth = 75;
void line(std::string& out, std::string text) {
  text.resize(kWidth, ' ');
  out += '|';
  out += text;
  out += "|\n";
}

std::string cell_row(const char* name, const Stat& s, const Stat& ref, bool bytes) {
  auto f = [&](int64_t v, int64_t r) { return bytes ? table_size(v, r) : table_count(v, r); };
  char buf[160];
  std::snprintf(buf, sizeof buf, " %-21s | %s | %s | %s | %s ", name, f(s.current, ref.current).c_str(),
                f(s.peak, ref.peak).c_str(), f(s.allocated, ref.allocated).c_str(), f(s.freed, ref.freed).c_str());
  return buf;
}

}  // namespace

std::map<std::string, int64_t> stats_as_map(const DeviceStats& s) {
  std::map<std::string, int64_t> m;
  for (const Metric& metric : kMetrics)
    for (int t = 0; t < kNumStatTypes; ++t)
      put(m, std::string(metric.key) + "." + kPoolNames[t], (s.*metric.stat)[t]);
  put(m, "oversize_allocations", s.oversize_allocations);
  put(m, "oversize_segments", s.oversize_segments);
  m["num_alloc_retries"] = s.num_alloc_retries;
  m["num_ooms"] = s.num_ooms;
  m["num_sync_all_streams"] = s.num_sync_all_streams;
  m["num_device_alloc"] = s.num_device_alloc;
  m["num_device_free"] = s.num_device_free;
  m["max_split_size"] = s.max_split_size;
  return m;
}

std::string format_size(uint64_t size) {
  char buf[64];
  if (size <= 1024) {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " bytes", size);
  } else if (size <= 1048576) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(size) / 1024.0);
  } else if (size <= 1073741824ULL) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(size) / 1048576.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(size) / 1073741824.0);
  }
  return buf;
}

std::string memory_summary_table(const DeviceStats& s, int device) {
  std::string out;
  const std::string rule(kWidth, '='), thin(kWidth, '-');
  char buf[160];
  line(out, rule);
  std::snprintf(buf, sizeof buf, "                 tessera CUDA memory summary, device ID %-17d", device);
  line(out, buf);
  line(out, thin);
  std::snprintf(buf, sizeof buf, "            CUDA OOMs: %-12" PRId64 " |        cudaMalloc retries: %-8" PRId64, s.num_ooms,
                s.num_alloc_retries);
  line(out, buf);
  line(out, rule);
  line(out, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ");
  for (const Metric& m : kMetrics) {
    const StatArray& a = s.*m.stat;
    line(out, thin);
    line(out, cell_row(m.title, a[kAllPools], a[kAllPools], m.bytes));
    line(out, cell_row("      from large pool", a[kLargePool], a[kAllPools], m.bytes));
    line(out, cell_row("      from small pool", a[kSmallPool], a[kAllPools], m.bytes));
  }
  line(out, thin);
  line(out, cell_row("Oversize allocations", s.oversize_allocations, s.oversize_allocations, false));
  line(out, cell_row("Oversize GPU segments", s.oversize_segments, s.oversize_segments, false));
  line(out, rule);
  return out;
}

}  // namespace tessera::alloc
