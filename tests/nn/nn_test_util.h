// Helpers of the nn tests: PyTorch's reference values (tests/nn/data/torch_reference.safetensors,
// written by tests/nn/torch_reference.py), looked up by case, and small comparisons.
#pragma once
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "common/test_util.h"
#include "tessera/nn.h"

namespace tessera::nn_testing {

namespace fs = std::filesystem;

inline std::string reference_path() { return testing::source_path("tests/nn/data/torch_reference.safetensors"); }

inline const SafetensorsFile& reference_file() {
  static std::unique_ptr<SafetensorsFile> f = std::make_unique<SafetensorsFile>(reference_path());
  return *f;
}

// "<case>/<kind>/<name>", e.g. ref("linear", "out", "y").
inline Tensor ref(const std::string& c, const std::string& kind, const std::string& name) {
  return reference_file().get(c + "/" + kind + "/" + name);
}
inline Tensor in(const std::string& c, const std::string& name) { return ref(c, "in", name); }
inline Tensor out(const std::string& c, const std::string& name) { return ref(c, "out", name); }

// The PyTorch module's state_dict of a case, keys without the "<case>/sd/" prefix.
inline nn::StateDict state(const std::string& c) {
  nn::StateDict sd;
  const std::string prefix = c + "/sd/";
  for (const std::string& k : reference_file().keys())
    if (k.rfind(prefix, 0) == 0) sd[k.substr(prefix.size())] = reference_file().get(k);
  return sd;
}

inline std::string metadata(const std::string& key) {
  auto it = reference_file().metadata().find(key);
  return it == reference_file().metadata().end() ? std::string() : it->second;
}

// float64 results against float64 PyTorch: agreement to rounding error.
inline ::testing::AssertionResult close64(const Tensor& actual, const Tensor& expected, double tol = 1e-10) {
  return testing::all_close(actual, expected, testing::Tolerance{tol, tol});
}

}  // namespace tessera::nn_testing
