// Direct kernel calls: graph nodes of the plain elementwise families run by their kernel slot, not
// through the public op (the executor's eager backend; DESIGN.md "The compiler").
//
// Note [Direct kernel calls]: an op call does its work in stages (autocast, the dispatcher's scope,
// argument checks, type promotion, broadcasting, the output's layout, the kernel, autograd's record);
// a captured graph has already made every decision but the kernel's: the output's metadata is in the
// graph, verified by the meta functions. So where the call would record nothing and no stage watches
// (no profiler, no tracer: detail::op_stages_installed() is false; grad mode off or no input that
// requires grad), the executor allocates the output with the recorded layout and calls the slot:
//   - unary ops of a floating input whose output has the input's dtype (exp, tanh, relu, gelu, ...);
//   - binary ops of two inputs of one floating dtype (add, sub with alpha, mul, div, maximum,
//     minimum, relu's threshold_backward, and the comparisons into bool), a 0-dim CPU scalar operand
//     included, as the op passes it;
//   - where (a bool condition) and clamp (bounds absent or of the input's dtype, an output of the
//     input's shape), every operand on the output's device;
//   - fill_ of a fresh buffer (the Scalar operands' 0-dim buffers of every binary op with a number).
// Anything else (other dtypes, which need the op's casts; in-place and out= forms; every other
// family) runs through its op. The kernel, its inputs and the output's layout are the ones the op
// would use, so the result is the same bits (the compiled-equals-eager tests check it bitwise).
// Measured in bench/NOTES.md ("Direct kernel calls in the executor").
#pragma once
#include <cstdint>
#include <vector>

#include "compile/graph.h"

namespace tessera::compiler {

struct DirectCall {
  enum class Kind : uint8_t { None, Unary, Binary, Ternary, Fill };
  Kind kind = Kind::None;
  uint8_t op = 0;          // the UnaryOp, BinaryOp or TernaryOp
  bool predicate = false;  // a comparison: bool output, inputs of one floating dtype
};

// How node `n` of `g` can run directly; Kind::None where it must run through its op.
DirectCall plan_direct_call(const Graph& g, const Node& n);

// Runs a planned direct call when the inputs meet its conditions (their dtypes and devices as the
// slot needs; no input requiring grad while grad mode is on); returns the output, or an undefined
// tensor when the node must run through its op after all. The caller checks that no stage watches.
// `into`, when defined, is the output's planned buffer (Note [Planned buffers] in executor.h), of
// `out`'s layout; otherwise the output is allocated.
Tensor run_direct_call(const DirectCall& d, const Node& n, const std::vector<Tensor>& in, const TensorMeta& out,
                       bool grad_enabled, const Tensor& into = Tensor());

}  // namespace tessera::compiler
