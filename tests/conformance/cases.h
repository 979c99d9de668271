// The conformance cases: each runs one tessera op on deterministic inputs and names the PyTorch
// expression that computes the same thing (evaluated by torch_oracle.py with `x` = the inputs).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace tessera::conformance {

struct Case {
  std::string op;                    // the tessera op under test (counted in the op list)
  std::string name;                  // unique: op + variant
  std::vector<Tensor> inputs;
  std::string torch_expr;            // Python expression over x[0], x[1], ...
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;
  // A looser tolerance for this case (reductions, products: the summation order differs from
  // PyTorch's); never tighter than DESIGN.md's tolerance of the output's dtype.
  std::optional<testing::Tolerance> tol;
  bool compare_values = true;        // false for random ops: sizes and dtype only
};

std::vector<Case> all_cases();

}  // namespace tessera::conformance
