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
  bool expect_error = false;         // PyTorch must raise, and tessera the error class that answers it
  bool differentiable = true;        // false: the output carries no gradient of the inputs (no grad case)
};

std::vector<Case> all_cases();

// Note [Case device]: a case runs on the device its inputs are on. The runner moves the inputs (see
// test_torch.cpp) and sets the case device for the call; what a case builds itself (factories with
// no input to follow, host values wrapped as tensors) goes to case_device(), or to an input's
// device, so that a case never mixes devices. Outside a CaseDevice scope it is the CPU.
Device case_device();
class CaseDevice {
 public:
  explicit CaseDevice(Device d);
  ~CaseDevice();
  CaseDevice(const CaseDevice&) = delete;
  CaseDevice& operator=(const CaseDevice&) = delete;

 private:
  Device prev_;
};

}  // namespace tessera::conformance
