// Generated CPU kernels built by the system C++ compiler into a shared library and loaded with
// dlopen (Note [Kernel cache] for where the library is kept).
//
// The compiler is $TESSERA_CXX, else the one tessera was built with. The flags are the eager CPU
// kernels' (-O3 -fno-math-errno -fno-trapping-math, -march of the CPU kernels' level: Note [CPU ISA
// dispatch]) with OpenMP, and
// -ffp-contract=off: each op of a fused chain rounds as the eager op does (no a * b + c made one FMA).
// A compiler error raises with the compiler's output and the path of the source it was given.
#pragma once
#include <memory>
#include <string>

namespace tessera::compiler {

class CpuLibrary {
 public:
  CpuLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  // The generated function `name`; raises naming the library when it is absent.
  void* symbol(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

// The library of one translation unit: from this process's modules, the disk cache, or the compiler.
std::shared_ptr<const CpuLibrary> build_cpu_library(const std::string& source);

void forget_loaded_cpu_libraries();

// "g++ (Debian 12.2.0-14) 12.2.0 -O3 ..." : what goes into the cache key besides the source.
const std::string& cpu_compiler_identity();

}  // namespace tessera::compiler
