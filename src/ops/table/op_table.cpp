// Lookups over the op table that are not constexpr (op_table.h). op_from_name serves graph parsing
// and tests; no dispatch path calls it.
#include "ops/table/op_table.h"

#include <algorithm>
#include <array>

namespace tessera {

static_assert(sizeof(detail::kOpTable) / sizeof(OpInfo) == static_cast<size_t>(kNumOps));

namespace {
// The table's rows sorted by name, built once.
const std::array<const OpInfo*, kNumOps>& by_name() {
  static const std::array<const OpInfo*, kNumOps> sorted = [] {
    std::array<const OpInfo*, kNumOps> a{};
    for (int i = 0; i < kNumOps; ++i) a[i] = &detail::kOpTable[i];
    std::sort(a.begin(), a.end(), [](const OpInfo* x, const OpInfo* y) { return std::string_view(x->name) < y->name; });
    return a;
  }();
  return sorted;
}
}  // namespace

std::optional<OpId> op_from_name(std::string_view name) {
  const auto& a = by_name();
  auto it = std::lower_bound(a.begin(), a.end(), name, [](const OpInfo* x, std::string_view n) { return x->name < n; });
  if (it == a.end() || (*it)->name != name) return std::nullopt;
  return (*it)->id;
}

const char* op_family_name(OpFamily f) {
  static constexpr const char* names[] = {"copy", "view", "pointwise", "softmax", "reduce", "linalg", "shape",
                                          "index", "sort", "conv", "pool", "norm", "batch_norm", "attention",
                                          "loss", "fused", "random", "factory", "foreach"};
  return names[static_cast<int>(f)];
}

const char* op_kind_name(OpKind k) {
  static constexpr const char* names[] = {"functional", "view", "in-place", "out", "factory"};
  return names[static_cast<int>(k)];
}

}  // namespace tessera
