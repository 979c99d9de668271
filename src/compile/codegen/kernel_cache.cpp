// The kernel cache on disk (kernel_cache.h, Note [Kernel cache]).
#include "compile/codegen/kernel_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "tessera/error.h"

namespace tessera::compiler {
namespace {

namespace fs = std::filesystem;

// Two FNV-1a passes with different bases and a final mix: not cryptographic, but any truncation or
// changed byte shows.
uint64_t fnv(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

std::string hex128(const std::string& s) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(fnv(s, 0xcbf29ce484222325ull)),
                static_cast<unsigned long long>(fnv(s, 0x84222325cbf29ce4ull ^ s.size())));
  return buf;
}

std::mutex g_stats_mu;
KernelCacheStats g_stats;

}  // namespace

std::string kernel_cache_dir() {
  std::string base;
  if (const char* d = std::getenv("TESSERA_CACHE_DIR"); d && *d) base = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) base = std::string(x) + "/tessera";
  else if (const char* h = std::getenv("HOME"); h && *h) base = std::string(h) + "/.cache/tessera";
  else base = fs::temp_directory_path().string() + "/tessera-cache";
  const std::string dir = base + "/kernels";
  std::error_code ec;
  fs::create_directories(dir, ec);
  TS_CHECK(!ec, IOError, "compile: cannot create the kernel cache folder ", dir, ": ", ec.message(),
           " (set TESSERA_CACHE_DIR to a writable folder)");
  return dir;
}

std::string cache_key(const std::vector<std::string>& parts) {
  std::string all;
  for (const std::string& p : parts) all += std::to_string(p.size()) + ":" + p + ";";
  return hex128(all);
}

std::string content_hash(const std::string& bytes) { return hex128(bytes); }

std::string cache_path(const std::string& key, const std::string& ext) { return kernel_cache_dir() + "/" + key + ext; }

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream os;
  os << f.rdbuf();
  if (f.bad()) return std::nullopt;
  return os.str();
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    TS_CHECK(static_cast<bool>(f), IOError, "compile: cannot write ", tmp);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    TS_CHECK(static_cast<bool>(f), IOError, "compile: writing ", tmp, " failed (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    TS_THROW(IOError, "compile: cannot move ", tmp, " to ", path);
  }
}

namespace {

bool intact(const std::string& key, const std::string& ext, std::string* bytes) {
  const std::string path = cache_path(key, ext);
  std::optional<std::string> data = read_file(path);
  if (!data) return false;  // absent: a plain miss
  std::optional<std::string> sum = read_file(path + ".sum");
  const std::string want = std::to_string(data->size()) + " " + content_hash(*data) + "\n";
  if (sum && *sum == want) {
    if (bytes) *bytes = std::move(*data);
    return true;
  }
  // Damaged, or its sum is missing or another writer's: never used, rebuilt by the caller.
  std::error_code ec;
  fs::remove(path, ec);
  fs::remove(path + ".sum", ec);
  count_cache(&KernelCacheStats::rejected);
  return false;
}

}  // namespace

std::optional<std::string> cache_read(const std::string& key, const std::string& ext) {
  std::string bytes;
  if (!intact(key, ext, &bytes)) return std::nullopt;
  return bytes;
}

bool cache_check(const std::string& key, const std::string& ext) { return intact(key, ext, nullptr); }

void cache_write(const std::string& key, const std::string& ext, const std::string& bytes) {
  const std::string path = cache_path(key, ext);
  write_file_atomic(path, bytes);
  write_file_atomic(path + ".sum", std::to_string(bytes.size()) + " " + content_hash(bytes) + "\n");
}

KernelCacheStats kernel_cache_stats() {
  std::lock_guard<std::mutex> g(g_stats_mu);
  return g_stats;
}

void count_cache(int64_t KernelCacheStats::*field) {
  std::lock_guard<std::mutex> g(g_stats_mu);
  ++(g_stats.*field);
}

}  // namespace tessera::compiler
