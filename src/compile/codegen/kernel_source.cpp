// The kernel source generator (kernel_source.h, Note [Generated kernels]).
#include "compile/codegen/kernel_source.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "compile/codegen/kernel_body.h"
#include "compile/codegen/pointwise_expr.h"

namespace tessera::compiler {
namespace {

constexpr int64_t kCpuTile = 1024;            // elements per simd loop
constexpr int64_t kCpuParallelFrom = 32768;   // elements below which one thread runs the kernel

bool is_contiguous_in(const std::vector<int64_t>& strides, const std::vector<int64_t>& sizes) {
  int64_t expect = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

}  // namespace

KernelSpec make_kernel_spec(const Graph& g, const FusionGroup& grp, KernelTarget target, int index) {
  if (grp.reduction()) return make_reduction_spec(g, grp, target, index);
  KernelSpec k;
  k.target = target;
  k.name = "ts_fused_" + std::to_string(index);
  for (size_t j = 0; j < grp.nodes.size() && j < 4; ++j) k.name += std::string("_") + op_name(g.nodes[grp.nodes[j]].op);
  const Shape& sizes = grp.sizes;
  for (int v : grp.outputs) k.operands.push_back({v, true, g.values[v].meta, aligned_strides(g.values[v].meta, sizes)});
  for (int v : grp.inputs) k.operands.push_back({v, false, g.values[v].meta, aligned_strides(g.values[v].meta, sizes)});

  // Canonical dimensions: drop size 1, order by the first output's strides, merge contiguous neighbours.
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) dims.push_back(d);
  const std::vector<int64_t>& lead = k.operands[0].strides;
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return lead[a] > lead[b]; });
  std::vector<int64_t> cs;
  std::vector<std::vector<int64_t>> cst(k.operands.size());
  for (size_t d : dims) {
    bool merge = !cs.empty();
    for (size_t o = 0; merge && o < k.operands.size(); ++o)
      merge = cst[o].back() == k.operands[o].strides[d] * sizes[d];
    if (merge) {
      cs.back() *= sizes[d];
      for (size_t o = 0; o < k.operands.size(); ++o) cst[o].back() = k.operands[o].strides[d];
    } else {
      cs.push_back(sizes[d]);
      for (size_t o = 0; o < k.operands.size(); ++o) cst[o].push_back(k.operands[o].strides[d]);
    }
  }
  if (cs.empty()) {  // one element
    cs.push_back(1);
    for (auto& s : cst) s.push_back(0);
  }
  k.sizes = cs;
  k.numel = std::accumulate(cs.begin(), cs.end(), int64_t{1}, std::multiplies<>());
  for (size_t o = 0; o < k.operands.size(); ++o) k.operands[o].strides = cst[o];
  k.index64 = k.numel >= (int64_t{1} << 31);
  for (const KernelOperand& op : k.operands)
    k.index64 = k.index64 || op.meta.span_bytes() / static_cast<int64_t>(element_size(op.meta.dtype)) >= (int64_t{1} << 31);

  const size_t D = cs.size();
  const bool cpu = target == KernelTarget::Cpu;
  const std::string idx_t = cpu || k.index64 ? "int64_t" : "uint32_t";
  std::ostringstream os;
  // Signature.
  if (cpu) {
    os << "extern \"C\" void " << k.name << "(void* const* args) {\n";
    for (size_t o = 0; o < k.operands.size(); ++o) {
      const KernelOperand& op = k.operands[o];
      const char* st = storage_type(op.meta.dtype);
      os << "  " << (op.output ? "" : "const ") << st << "* __restrict__ p" << o << " = (" << (op.output ? "" : "const ")
         << st << "*)args[" << o << "];\n";
    }
  } else {
    os << "extern \"C\" __global__ void __launch_bounds__(256) " << k.name << "(";
    for (size_t o = 0; o < k.operands.size(); ++o) {
      const KernelOperand& op = k.operands[o];
      os << (o ? ", " : "") << (op.output ? "" : "const ") << storage_type(op.meta.dtype) << "* __restrict__ p" << o;
    }
    os << ") {\n";
  }
  // The element body, given each operand's offset expression.
  auto body = [&](const std::vector<std::string>& off, const std::string& ind) {
    std::ostringstream b;
    for (size_t o = 0; o < k.operands.size(); ++o)
      if (!k.operands[o].output) b << load_stmt(g, k.operands[o].value, o, off[o], ind);
    for (int v : grp.literals) b << literal_stmt(g, v, ind);
    for (int i : grp.nodes) b << node_stmt(g, g.nodes[i], ind);
    for (size_t o = 0; o < k.operands.size(); ++o)
      if (k.operands[o].output)
        b << ind << "ts_store(p" << o << " + (" << off[o] << "), " << kernel_var(k.operands[o].value) << ");\n";
    return b.str();
  };
  std::vector<std::string> idx(D);
  for (size_t d = 0; d < D; ++d) idx[d] = index_name('i', static_cast<int64_t>(d));
  std::vector<std::string> off(k.operands.size());
  if (cpu) {
    const int64_t inner = cs[D - 1], ntiles = (inner + kCpuTile - 1) / kCpuTile, outer = k.numel / inner;
    os << "  // " << k.numel << " elements: " << outer << " rows of " << inner << ", in tiles of " << kCpuTile << "\n";
    os << "#pragma omp parallel for schedule(static)" << (k.numel >= kCpuParallelFrom ? "" : " if(0)") << "\n";
    os << "  for (int64_t t = 0; t < " << outer * ntiles << "; ++t) {\n";
    os << "    const int64_t o = t / " << ntiles << ", j0 = (t % " << ntiles << ") * " << kCpuTile << ";\n";
    os << "    const int64_t j1 = j0 + " << kCpuTile << " < " << inner << " ? j0 + " << kCpuTile << " : " << inner << ";\n";
    if (D > 1) {
      os << "    int64_t r = o;\n";
      for (size_t d = D - 1; d-- > 0;) {
        if (d == 0) os << "    const int64_t i0 = r;\n";
        else os << "    const int64_t " << idx[d] << " = r % " << cs[d] << "; r /= " << cs[d] << ";\n";
      }
    }
    for (size_t o = 0; o < k.operands.size(); ++o) {
      os << "    const int64_t b" << o << " = " << offset_expr(k.operands[o].strides, idx, D - 1) << ";\n";
      const int64_t s = k.operands[o].strides[D - 1];
      off[o] = index_name('b', static_cast<int64_t>(o)) + (s == 0 ? "" : s == 1 ? " + j" : " + j * " + std::to_string(s));
    }
    os << "#pragma omp simd\n";
    os << "    for (int64_t j = j0; j < j1; ++j) {\n" << body(off, "      ") << "    }\n  }\n}\n";
  } else {
    os << "  // " << k.numel << " elements, " << (k.index64 ? "64" : "32") << "-bit indices\n";
    os << "  for (" << idx_t << " i = (" << idx_t << ")blockIdx.x * blockDim.x + threadIdx.x; i < " << k.numel << "u; i += ("
       << idx_t << ")gridDim.x * blockDim.x) {\n";
    if (D > 1) {
      os << "    " << idx_t << " r = i;\n";
      for (size_t d = D; d-- > 0;) {
        if (d == 0) os << "    const " << idx_t << " i0 = r;\n";
        else os << "    const " << idx_t << " " << idx[d] << " = r % " << cs[d] << "u; r /= " << cs[d] << "u;\n";
      }
    } else {
      os << "    const " << idx_t << " i0 = i;\n";
    }
    for (size_t o = 0; o < k.operands.size(); ++o)
      off[o] = is_contiguous_in(k.operands[o].strides, cs) ? "i" : offset_expr(k.operands[o].strides, idx, D);
    os << body(off, "    ") << "  }\n}\n";
  }
  k.function = os.str();
  return k;
}

std::string translation_unit(KernelTarget target, const std::vector<const KernelSpec*>& kernels) {
  std::string s = kernel_preamble(target);
  for (const KernelSpec* k : kernels) s += "\n" + k->function;
  return s;
}

}  // namespace tessera::compiler
