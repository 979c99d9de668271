// The statements of generated kernels (kernel_body.h).
#include "compile/codegen/kernel_body.h"

#include "compile/codegen/pointwise_expr.h"
#include "compile/fusion.h"

namespace tessera::compiler {

const char* storage_type(DType d) {
  switch (d) {
    case kFloat32: return "float";
    case kFloat64: return "double";
    case kBool: return "bool";
    case kBFloat16: return "ts_bf16";
    case kFloat16: return "ts_f16";
    default: TS_THROW(DTypeError, "compile: no generated storage type for ", dtype_name(d));
  }
}

// Written as appends (GCC 12 warns, wrongly, of overlap for "v" + std::to_string(v)).
std::string index_name(char c, int64_t k) {
  std::string s(1, c);
  s += std::to_string(k);
  return s;
}
std::string kernel_var(int value) { return index_name('v', value); }

std::vector<int64_t> aligned_strides(const TensorMeta& m, const Shape& sizes) {
  const size_t R = sizes.size(), r = m.sizes.size();
  std::vector<int64_t> s(R, 0);
  for (size_t k = 0; k < r; ++k) {
    const size_t d = R - r + k;
    s[d] = m.sizes[k] == 1 && sizes[d] != 1 ? 0 : m.strides[k];
  }
  return s;
}

std::string offset_expr(const std::vector<int64_t>& strides, const std::vector<std::string>& idx, size_t dims) {
  std::string e;
  for (size_t d = 0; d < dims; ++d) {
    if (strides[d] == 0) continue;
    if (!e.empty()) e += " + ";
    e += strides[d] == 1 ? idx[d] : idx[d] + " * " + std::to_string(strides[d]);
  }
  return e.empty() ? "0" : e;
}

std::string load_stmt(const Graph& g, int value, size_t operand, const std::string& offset, const std::string& ind) {
  return ind + "const " + c_type(compute_type_of(g.values[value].meta.dtype)) + " " + kernel_var(value) + " = ts_load(p" +
         std::to_string(operand) + "[" + offset + "]);\n";
}

std::string literal_stmt(const Graph& g, int value, const std::string& ind) {
  double x = 0;
  scalar_literal(g, value, &x);
  const DType d = g.values[value].meta.dtype;
  std::string lit = literal(x, compute_type_of(d));
  if (d == kBFloat16) lit = "ts_round_bf16(" + lit + ")";
  if (d == kFloat16) lit = "ts_round_f16(" + lit + ")";
  return ind + "const " + c_type(compute_type_of(d)) + " " + kernel_var(value) + " = " + lit + ";\n";
}

std::string node_stmt(const Graph& g, const Node& n, const std::string& ind) {
  const ComputeType ct = node_compute_type(g, n);
  std::vector<std::string> args;
  for (size_t a = 0; a < n.inputs.size(); ++a) {
    const int v = n.inputs[a];
    if (v < 0) {
      args.emplace_back();
      continue;
    }
    const ComputeType want = operand_type(n, a, ct), have = compute_type_of(g.values[v].meta.dtype);
    args.push_back(want == have ? kernel_var(v) : std::string("((") + c_type(want) + ")" + kernel_var(v) + ")");
  }
  const int out = n.outputs[0];
  const DType od = g.values[out].meta.dtype;
  const char* ot = c_type(compute_type_of(od));
  std::string e = pointwise_expr(n, ct, args);
  if (ct != compute_type_of(od)) e = std::string("((") + ot + ")" + e + ")";
  if (od == kBFloat16) e = "ts_round_bf16(" + e + ")";
  if (od == kFloat16) e = "ts_round_f16(" + e + ")";
  return ind + "const " + ot + " " + kernel_var(out) + " = " + e + ";  // " + op_name(n.op) + "\n";
}

}  // namespace tessera::compiler
