// TESSERA_CUDA_ALLOC_CONF parsing (alloc_conf.h). The grammar is PyTorch's: `key:value` entries separated
// by commas, where roundup_power2_divisions may take a bracketed list `[256:1,512:2,>:4]` whose commas do
// not separate top-level entries.
#include "runtime/alloc_conf.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/error.h"

namespace tessera::alloc {
namespace {

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kLargeBufferMiB = 20;  // max_split_size_mb must exceed the large segment size

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits on `sep` outside brackets.
std::vector<std::string_view> split_top(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']') --depth;
    if (s[i] == sep && depth == 0) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

// A non-negative integer (the whole token), or ValueError naming the key.
uint64_t parse_uint(std::string_view v, std::string_view key, std::string_view source) {
  const std::string s(trim(v));
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = s.empty() || s[0] == '-' ? 0 : std::strtoull(s.c_str(), &end, 10);
  TS_CHECK(!s.empty() && s[0] != '-' && end && *end == '\0' && errno == 0, ValueError, source, ": the value of ", key,
           " must be a non-negative integer, got '", s, "'");
  return x;
}

double parse_double(std::string_view v, std::string_view key, std::string_view source) {
  const std::string s(trim(v));
  char* end = nullptr;
  const double x = s.empty() ? 0 : std::strtod(s.c_str(), &end);
  TS_CHECK(!s.empty() && end && *end == '\0', ValueError, source, ": the value of ", key, " must be a number, got '",
           s, "'");
  return x;
}

bool is_pow2_or_off(uint64_t n) { return n <= 1 || std::has_single_bit(n); }

void parse_divisions(std::string_view v, AllocConf& c, std::string_view source) {
  constexpr std::string_view key = "roundup_power2_divisions";
  v = trim(v);
  if (v.empty() || v.front() != '[') {
    const uint64_t n = parse_uint(v, key, source);
    TS_CHECK(is_pow2_or_off(n), ValueError, source, ": ", key, " must be a power of two (or 0 to disable), got ", n);
    c.roundup_power2_divisions.fill(n);
    return;
  }
  TS_CHECK(v.back() == ']', ValueError, source, ": ", key, ": missing ']' in '", v, "'");
  v = v.substr(1, v.size() - 2);
  bool first = true;
  size_t last_index = 0;
  for (std::string_view entry : split_top(v, ',')) {
    entry = trim(entry);
    const size_t colon = entry.find(':');
    TS_CHECK(colon != std::string_view::npos, ValueError, source, ": ", key, ": expected 'interval_mb:divisions' in '",
             entry, "'");
    const std::string_view interval = trim(entry.substr(0, colon));
    const uint64_t n = parse_uint(entry.substr(colon + 1), key, source);
    TS_CHECK(is_pow2_or_off(n), ValueError, source, ": ", key, " must be a power of two (or 0 to disable), got ", n);
    if (interval == ">") {
      // Every interval after the last one named (all of them if none was).
      const size_t from = first ? 0 : last_index + 1;
      for (size_t i = from; i < AllocConf::kRoundUpIntervals; ++i) c.roundup_power2_divisions[i] = n;
      continue;
    }
    const uint64_t mb = parse_uint(interval, key, source);
    TS_CHECK(std::has_single_bit(mb), ValueError, source, ": ", key, ": the interval ", mb,
             " MiB is not a power of two");
    const size_t index = std::min<size_t>(std::bit_width(mb) - 1, AllocConf::kRoundUpIntervals - 1);
    // The first interval named also covers every smaller size.
    const size_t from = first ? 0 : index;
    for (size_t i = from; i <= index; ++i) c.roundup_power2_divisions[i] = n;
    first = false;
    last_index = index;
  }
}

}  // namespace

size_t AllocConf::divisions_for(size_t size) const {
  const size_t log_size = size ? std::bit_width(size) - 1 : 0;
  const size_t start = 20;  // intervals start at 1 MiB
  size_t index = log_size > start ? log_size - start : 0;
  index = std::min(index, kRoundUpIntervals - 1);
  return roundup_power2_divisions[index];
}

AllocConf parse_alloc_conf(std::string_view text, std::string_view source) {
  AllocConf c;
  text = trim(text);
  if (text.empty()) return c;
  for (std::string_view entry : split_top(text, ',')) {
    entry = trim(entry);
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    TS_CHECK(colon != std::string_view::npos, ValueError, source, ": expected 'key:value' but got '", entry, "'");
    const std::string_view key = trim(entry.substr(0, colon));
    const std::string_view value = trim(entry.substr(colon + 1));
    if (key == "max_split_size_mb") {
      const uint64_t mb = parse_uint(value, key, source);
      TS_CHECK(mb > kLargeBufferMiB, ValueError, source, ": max_split_size_mb must be > ", kLargeBufferMiB,
               " (the large segment size), got ", mb);
      c.max_split_size = mb >= std::numeric_limits<size_t>::max() / kMiB ? std::numeric_limits<size_t>::max()
                                                                         : static_cast<size_t>(mb) * kMiB;
    } else if (key == "garbage_collection_threshold") {
      const double t = parse_double(value, key, source);
      TS_CHECK(t > 0.0 && t < 1.0, ValueError, source,
               ": garbage_collection_threshold must be greater than 0 and less than 1, got ", value);
      c.garbage_collection_threshold = t;
    } else if (key == "roundup_power2_divisions") {
      parse_divisions(value, c, source);
    } else if (key == "backend") {
      if (value == "native") {
        c.use_cache = true;
      } else if (value == "cudaMalloc") {
        c.use_cache = false;
      } else {
        TS_THROW(ValueError, source, ": unknown backend '", value, "' (expected native or cudaMalloc)");
      }
    } else {
      TS_THROW(ValueError, source, ": unknown option '", key,
               "' (expected max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions or backend)");
    }
  }
  return c;
}

AllocConf alloc_conf_from_env() {
  const char* v = std::getenv("TESSERA_CUDA_ALLOC_CONF");
  return v ? parse_alloc_conf(v) : AllocConf{};
}

}  // namespace tessera::alloc
