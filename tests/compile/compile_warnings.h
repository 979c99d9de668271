// The compiler's warnings collected for a test's duration (ts::set_compile_warning_handler), shared by
// the compile tests of both suites.
#pragma once
#include <string>
#include <vector>

#include "tessera/compile.h"

namespace tessera::testing {

struct CompileWarnings {
  std::vector<std::string> seen;
  CompileWarnings() {
    set_compile_warning_handler([this](const std::string& m) { seen.push_back(m); });
  }
  ~CompileWarnings() { set_compile_warning_handler(nullptr); }
  CompileWarnings(const CompileWarnings&) = delete;
  CompileWarnings& operator=(const CompileWarnings&) = delete;
  bool any_contains(const std::string& s) const {
    for (const std::string& w : seen)
      if (w.find(s) != std::string::npos) return true;
    return false;
  }
};

}  // namespace tessera::testing
