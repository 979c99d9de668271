// A random program as data: one SSA list of steps, each an input or an op over earlier steps, with its
// attributes as JSON. The same file runs in tessera (interpreter.cpp) and in PyTorch
// (program_oracle.py), so that a failing program can be committed as a regression case and replayed.
//
// Invariants: step i's value is the result of step i; an op step names only earlier steps; an input
// step's values are a pure function of its own fields (seed, kind, shape, dtype), so a program file
// needs no data beside it. Every op yields exactly one tensor.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::programs {

using Json = nlohmann::json;

// How an input's values are stored: contiguously, with its last two dims swapped in memory, or as a
// step-2 slice of a larger buffer. The values are the same in every layout.
enum class Layout { Contiguous, Transposed, Sliced };

// What an input holds: normal(0, 1) floats; integers in [lo, hi) (kind Int, also index tensors);
// booleans.
enum class InputKind { Normal, Int, Bool };

struct Step {
  std::string op;                  // "input" or an op of the interpreter's table
  std::vector<int> in;             // earlier steps (op steps only)
  Json attrs = Json::object();     // the op's attributes, by name
  // input steps only
  Shape shape;
  DType dtype = kFloat32;
  InputKind kind = InputKind::Normal;
  int64_t lo = -5, hi = 5;         // kind Int
  Layout layout = Layout::Contiguous;
  bool requires_grad = false;
  uint64_t seed = 0;
};

struct Program {
  uint64_t seed = 0;               // the generator's seed (also seeds the loss weights)
  DType dtype = kFloat32;          // the program's floating dtype (or int64 for an integer program)
  std::vector<Step> steps;
  std::vector<int> outputs;        // steps whose values the program returns
  std::string note;                // free text: why a regression case was kept
};

Json to_json(const Program& p);
Program from_json(const Json& j);           // throws ValueError on a malformed program
Program load_program(const std::string& path);
void save_program(const Program& p, const std::string& path);

const char* layout_name(Layout l);
const char* kind_name(InputKind k);

// An input step's values, contiguous, on the CPU (deterministic from the step's fields).
Tensor input_values(const Step& s);
// The same values stored in the step's layout on `device` (a leaf; requires_grad as the step says).
Tensor materialize_input(const Step& s, Device device);
// A short one-line description ("seed 42, float32: input(2,3) -> exp -> sum[1] ...") for messages.
std::string summary(const Program& p);

}  // namespace tessera::programs
