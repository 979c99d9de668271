// Building and loading generated CPU kernels (cpu_library.h).
#include "compile/codegen/cpu_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "compile/codegen/kernel_cache.h"
#include "runtime/cpu_isa.h"
#include "tessera/error.h"

#ifndef TESSERA_DEFAULT_CXX
#define TESSERA_DEFAULT_CXX "c++"
#endif
#ifndef TESSERA_VERSION_STRING
#define TESSERA_VERSION_STRING "unknown"
#endif

namespace tessera::compiler {
namespace {

std::string compiler() {
  const char* c = std::getenv("TESSERA_CXX");
  return c && *c ? c : TESSERA_DEFAULT_CXX;
}

// The eager kernels' level (Note [CPU ISA dispatch] in runtime/cpu_isa.h): generated code runs the
// same instructions as the eager kernels it replaces, and a capped run stays capped. The level is part
// of the flags, so of the kernel cache's key.
const std::string& flags() {
  static const std::string f = [] {
    std::string march;
#if defined(__x86_64__)
    switch (cpu::cpu_info().level) {
      case cpu::IsaLevel::baseline: march = "-march=x86-64 "; break;
      case cpu::IsaLevel::avx2: march = "-march=x86-64-v3 "; break;
      case cpu::IsaLevel::avx512: march = "-march=x86-64-v4 -mprefer-vector-width=512 "; break;
    }
#endif
    return "-std=c++20 -O3 -fno-math-errno -fno-trapping-math -ffp-contract=off " + march +
           "-mtune=generic -fopenmp -fPIC -shared -w";
  }();
  return f;
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; returns its exit status and its output (stdout and stderr).
int run_command(const std::string& cmd, std::string* output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  TS_CHECK(p != nullptr, Error, "compile: cannot run the C++ compiler: ", cmd);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) output->append(buf, n);
  const int status = ::pclose(p);
  return status;
}

std::mutex g_mu;
std::map<std::string, std::shared_ptr<const CpuLibrary>>& loaded() {
  static std::map<std::string, std::shared_ptr<const CpuLibrary>> m;
  return m;
}

std::shared_ptr<const CpuLibrary> open_library(const std::string& path) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TS_CHECK(h != nullptr, Error, "compile: cannot load the generated kernels ", path, ": ", ::dlerror());
  return std::make_shared<const CpuLibrary>(h, path);
}

}  // namespace

void* CpuLibrary::symbol(const std::string& name) const {
  void* s = ::dlsym(handle_, name.c_str());
  TS_CHECK(s != nullptr, Error, "compile: the generated library ", path_, " has no kernel ", name);
  return s;
}

const std::string& cpu_compiler_identity() {
  static const std::string id = [] {
    std::string out;
    run_command(quoted(compiler()) + " --version", &out);
    const std::string first = out.substr(0, out.find('\n'));
    return compiler() + " (" + first + ") " + flags();
  }();
  return id;
}

std::shared_ptr<const CpuLibrary> build_cpu_library(const std::string& source) {
  const std::string key = cache_key({source, "cpu", cpu_compiler_identity(), TESSERA_VERSION_STRING});
  std::lock_guard<std::mutex> g(g_mu);
  if (auto it = loaded().find(key); it != loaded().end()) {
    count_cache(&KernelCacheStats::memory_hits);
    return it->second;
  }
  const std::string so = cache_path(key, ".so");
  if (cache_check(key, ".so")) {
    count_cache(&KernelCacheStats::disk_hits);
    return loaded()[key] = open_library(so);
  }
  const std::string src = cache_path(key, ".cpp");
  write_file_atomic(src, source);
  const std::string tmp = so + ".build." + std::to_string(::getpid());
  std::string log;
  const int status = run_command(quoted(compiler()) + " " + flags() + " -o " + quoted(tmp) + " " + quoted(src), &log);
  std::optional<std::string> bytes = status == 0 ? read_file(tmp) : std::nullopt;
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  if (!bytes || bytes->empty()) {
    if (log.size() > 8000) log = log.substr(0, 8000) + "\n[... output cut]";
    TS_THROW(Error, "compile: the C++ compiler failed on the generated kernels (", compiler(), ", status ", status,
             "); source: ", src, "\n", log);
  }
  cache_write(key, ".so", *bytes);
  count_cache(&KernelCacheStats::compiled);
  return loaded()[key] = open_library(so);
}

void forget_loaded_cpu_libraries() {
  std::lock_guard<std::mutex> g(g_mu);
  loaded().clear();  // the handles stay open: kernels already handed out keep working
}

}  // namespace tessera::compiler
