// Runs a random program (program.h) with tessera, op by op, eagerly: the C++ twin of
// program_oracle.py's interpreter. Both read the same op names and attributes; an op added to one
// must be added to the other (the generator emits only ops both know).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "programs/program.h"

namespace tessera::programs {

struct RunResult {
  std::vector<Tensor> outputs;          // the program's outputs (detached), in its order
  std::vector<Tensor> grads;            // per step: the gradient of the loss for a requires_grad
                                        // input (undefined where unused, or for other steps)
  bool has_loss = false;                // some output depended on a requires_grad input
  std::optional<int> error_step;        // the step that raised, if one did
  std::string error;                    // its class and message
};

// Runs `p` on `device` (inputs materialized in their layouts there, factories built there). Where
// `weights` holds a float64 tensor for output j (the oracle draws them), also differentiates
// sum_j sum(out_j.double() * weights[j]) with respect to every requires_grad input. A tessera::Error
// raised by a step is caught and reported, not rethrown.
RunResult run_program(const Program& p, Device device, const std::vector<Tensor>& weights = {});

// The program's op steps on given values of its input steps (in the order of the steps), eagerly;
// returns the outputs (not detached) and raises the first step's error. For the compiler's tests:
// the same function runs compiled and eagerly.
std::vector<Tensor> run_ops(const Program& p, const std::vector<Tensor>& inputs, Device device);

// The op names the interpreter knows (for the generator's self-check and the docs).
std::vector<std::string> interpreter_ops();

}  // namespace tessera::programs
