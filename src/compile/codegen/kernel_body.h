// The statements both kernel generators write (kernel_source.cpp for pointwise groups,
// reduction_source.cpp for reduction groups): operand strides over an iteration space, offsets,
// loads, literals and one node's value. A value is the local `v<id>` of its compute type
// (pointwise_expr.h).
#pragma once
#include <string>
#include <vector>

#include "compile/graph.h"

namespace tessera::compiler {

const char* storage_type(DType d);  // "float", "ts_bf16", ...
std::string kernel_var(int value);  // "v12"
std::string index_name(char c, int64_t k);  // "i0", "b3"

// An operand's strides aligned to `sizes` (right-aligned; zero where it broadcasts).
std::vector<int64_t> aligned_strides(const TensorMeta& m, const Shape& sizes);

// "i0 * 64 + i1" over the first `dims` dimensions ("0" when nothing moves).
std::string offset_expr(const std::vector<int64_t>& strides, const std::vector<std::string>& idx, size_t dims);

// "const float v3 = ts_load(p1[off]);"
std::string load_stmt(const Graph& g, int value, size_t operand, const std::string& offset, const std::string& ind);
// "const float v6 = ((float)0x1p+1);" for a scalar literal.
std::string literal_stmt(const Graph& g, int value, const std::string& ind);
// "const float v7 = (v3 * v6);  // mul", rounded to the node's dtype.
std::string node_stmt(const Graph& g, const Node& n, const std::string& ind);

}  // namespace tessera::compiler
