// The peak table of apps/gpu_peak.h. Figures: the vendors' data sheets, dense bfloat16 tensor-core
// throughput (the sparsity figures are twice these).
#include "gpu_peak.h"

#include <algorithm>
#include <cctype>

namespace tessera::app {

std::optional<double> peak_bf16_flops(const std::string& device_name) {
  std::string name = device_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
  // First match wins: the more specific names come before their families.
  struct Entry {
    const char* key;
    double tflops;
  };
  static const Entry table[] = {
      {"H200", 989.0}, {"H100 PCIE", 756.0}, {"H100 NVL", 835.0}, {"H100", 989.0}, {"A100", 312.0},
      {"RTX 4090", 165.0}, {"L4", 121.0},
  };
  for (const Entry& e : table) {
    const std::string key = e.key;
    size_t pos = name.find(key);
    while (pos != std::string::npos) {
      // Whole words only ("L4" must not match "L40S"): the key ends the name or is followed by a
      // non-alphanumeric character.
      const size_t end = pos + key.size();
      const bool starts = pos == 0 || !std::isalnum(static_cast<unsigned char>(name[pos - 1]));
      const bool ends = end == name.size() || !std::isalnum(static_cast<unsigned char>(name[end]));
      if (starts && ends) return e.tflops * 1e12;
      pos = name.find(key, pos + 1);
    }
  }
  return std::nullopt;
}

double gpt_flops_per_token(int64_t params_without_wpe, int64_t n_layer, int64_t n_head, int64_t head_dim,
                           int64_t context) {
  return 6.0 * static_cast<double>(params_without_wpe) +
         12.0 * static_cast<double>(n_layer) * static_cast<double>(n_head) * static_cast<double>(head_dim) *
             static_cast<double>(context);
}

std::optional<double> mfu(double flops_per_token, double tokens_per_second, const std::string& device_name) {
  const std::optional<double> peak = peak_bf16_flops(device_name);
  if (!peak) return std::nullopt;
  return flops_per_token * tokens_per_second / *peak;
}

}  // namespace tessera::app
