// What a pointwise node computes, as an expression of generated C++ (Note [Generated kernels] in
// kernel_source.h). One table for both targets: the CPU's C++ and CUDA C++ share the expression and
// differ only in the helper functions of their preamble (kernel_preamble.cpp).
//
// A node computes in its compute type: float for float32 and the 16-bit floats, double for float64,
// bool for logic on bools; its result is rounded to the node's dtype (a 16-bit output is rounded to 16
// bits after every node, as eager rounds after every op), so a fused chain differs from eager only where
// the helpers' math differs from the eager kernels' (on the CPU both are vec_math.h for exp, log,
// tanh, erf, sigmoid and gelu; libm for the rest).
#pragma once
#include <string>
#include <vector>

#include "compile/graph.h"

namespace tessera::compiler {

enum class ComputeType : uint8_t { Bool, Float, Double };
const char* c_type(ComputeType t);          // "bool", "float", "double"
ComputeType compute_type_of(DType d);       // the type a value of dtype d is held in inside a kernel

// Whether the op and its attributes have an expression here (dtypes are checked by is_fusible).
bool has_pointwise_expr(const Node& n);
// The type node n computes in (the promoted type of its inputs for comparisons and logic, that of its
// output otherwise).
ComputeType node_compute_type(const Graph& g, const Node& n);
// The type operand k of node n is converted to before the expression reads it (where's condition
// stays bool).
ComputeType operand_type(const Node& n, size_t k, ComputeType node_type);
// The expression for n over its operands (already converted; "" for an absent optional operand).
std::string pointwise_expr(const Node& n, ComputeType t, const std::vector<std::string>& args);

// A double as an exact C++ literal of type t ("(float)0x1.8p+1").
std::string literal(double v, ComputeType t);

}  // namespace tessera::compiler
