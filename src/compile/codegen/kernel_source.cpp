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

// Note [Vectorized pointwise kernels]: the elements a CUDA thread takes per step. Every operand must
// move along the innermost canonical dimension with stride 1 (vector loads and stores) or 0 (one load
// per step); V elements of it are 16 bytes of the narrowest such operand (at most 8), the dimension's
// length and every outer stride of a moving operand are multiples of V (so each step's V elements are
// one aligned vector when the base pointer is). 1: no vector path.
int cuda_vector_width(const KernelSpec& k) {
  const size_t D = k.sizes.size();
  size_t narrowest = 0;
  for (const KernelOperand& op : k.operands) {
    const int64_t s = op.strides[D - 1];
    if (s != 0 && s != 1) return 1;
    if (s == 1) {
      const size_t e = element_size(op.meta.dtype);
      narrowest = narrowest == 0 ? e : std::min(narrowest, e);
    }
  }
  if (narrowest == 0) return 1;
  for (int v = static_cast<int>(std::min<size_t>(8, 16 / narrowest)); v >= 2; v /= 2) {
    bool ok = k.sizes[D - 1] % v == 0;
    for (const KernelOperand& op : k.operands)
      for (size_t d = 0; ok && d + 1 < D; ++d) ok = op.strides[D - 1] == 0 || op.strides[d] % v == 0;
    if (ok) return v;
  }
  return 1;
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
    // The index decomposition of `i` over the canonical dimensions (i0 outermost).
    auto decompose = [&](const std::string& ind) {
      std::ostringstream d;
      if (D > 1) {
        d << ind << idx_t << " r = i;\n";
        for (size_t q = D; q-- > 0;) {
          if (q == 0) d << ind << "const " << idx_t << " i0 = r;\n";
          else d << ind << "const " << idx_t << " " << idx[q] << " = r % " << cs[q] << "u; r /= " << cs[q] << "u;\n";
        }
      } else {
        d << ind << "const " << idx_t << " i0 = i;\n";
      }
      return d.str();
    };
    for (size_t o = 0; o < k.operands.size(); ++o)
      off[o] = is_contiguous_in(k.operands[o].strides, cs) ? "i" : offset_expr(k.operands[o].strides, idx, D);
    const int V = cuda_vector_width(k);
    k.vector_width = V;
    const std::string scalar_loop = "  for (" + idx_t + " i = (" + idx_t + ")blockIdx.x * blockDim.x + threadIdx.x; i < " +
                                    std::to_string(k.numel) + "u; i += (" + idx_t + ")gridDim.x * blockDim.x) {\n";
    os << "  // " << k.numel << " elements, " << (k.index64 ? "64" : "32") << "-bit indices";
    if (V == 1) {
      os << "\n" << scalar_loop << decompose("    ") << body(off, "    ") << "  }\n}\n";
    } else {
      // Note [Vectorized pointwise kernels]: V elements of the innermost dimension per thread and step,
      // one 16-byte load or store per operand that moves along it; an operand broadcast along it is
      // loaded once per step. The pointers' alignment is known only at the call: unaligned ones (a view
      // at an odd offset) take the scalar loop.
      os << ", " << V << " per thread where aligned\n";
      std::string misaligned;
      for (size_t o = 0; o < k.operands.size(); ++o)
        if (k.operands[o].strides[D - 1] == 1) {
          const int64_t bytes = V * static_cast<int64_t>(element_size(k.operands[o].meta.dtype));
          misaligned += std::string(misaligned.empty() ? "" : " | ") + "((unsigned long long)p" + std::to_string(o) +
                        " & " + std::to_string(bytes - 1) + "u)";
        }
      os << "  if ((" << misaligned << ") == 0) {\n";
      // Note [Invariant columns]: an operand that moves along the innermost dimension only (a batch
      // norm's statistics over channels-last activations) gives each thread the same V columns at every
      // step when the grid's stride is a whole number of rows (the launch sees to it: thread_period);
      // it is loaded, and every node computed from such operands and literals alone is evaluated, once
      // per thread before the loop, in the same order of operations as per element.
      const int64_t nv = cs[D - 1] / V;
      std::vector<char> invariant(g.values.size(), 0);
      std::vector<char> inv_operand(k.operands.size(), 0);
      bool columns = false;  // an invariant operand moves along the columns: the launch's period applies
      for (size_t o = 0; o < k.operands.size(); ++o) {
        const KernelOperand& op = k.operands[o];
        if (op.output) continue;
        bool inv = D > 1 || op.strides[D - 1] == 0;  // one dimension: only a scalar is the same at every step
        for (size_t d = 0; inv && d + 1 < D; ++d) inv = op.strides[d] == 0;
        inv_operand[o] = inv;
        columns = columns || (inv && op.strides[D - 1] == 1);
        invariant[op.value] = inv;
      }
      for (int v : grp.literals) invariant[v] = 1;
      bool any_node = false;
      for (int n : grp.nodes) {
        const Node& node = g.nodes[n];
        bool inv = true;
        for (int v : node.inputs) inv = inv && (v < 0 || invariant[v]);
        for (int v : node.outputs) invariant[v] = inv;
        any_node = any_node || inv;
      }
      // The invariant values that the per-element part reads (or stores): kept per lane in h<id>[V].
      std::vector<int> kept;
      auto keep = [&](int v) {
        if (v >= 0 && invariant[v] && std::find(kept.begin(), kept.end(), v) == kept.end()) kept.push_back(v);
      };
      const bool hoist = any_node || std::count(inv_operand.begin(), inv_operand.end(), 1) > 0;
      if (hoist) {
        if (columns) k.thread_period = nv;
        for (int n : grp.nodes)
          if (!invariant[g.nodes[n].outputs[0]])
            for (int v : g.nodes[n].inputs) keep(v);
        for (const KernelOperand& op : k.operands)
          if (op.output) keep(op.value);
        for (int& v : kept) {  // a scalar literal is cheaper to write again than to keep
          if (std::find(grp.literals.begin(), grp.literals.end(), v) != grp.literals.end()) v = -1;
        }
        kept.erase(std::remove(kept.begin(), kept.end(), -1), kept.end());
        if (columns)
          os << "    const " << idx_t << " ih = ((" << idx_t << ")blockIdx.x * blockDim.x + threadIdx.x) % " << nv << "u * "
             << V << "u;  // this thread's columns, the same at every step\n";
        std::ostringstream pro;
        for (size_t o = 0; o < k.operands.size(); ++o) {
          if (!inv_operand[o]) continue;
          const KernelOperand& op = k.operands[o];
          if (op.strides[D - 1] == 1) {
            const std::string vec = "ts_vec<" + std::string(storage_type(op.meta.dtype)) + ", " + std::to_string(V) + ">";
            const std::string w = index_name('w', static_cast<int64_t>(o));
            os << "    const " << vec << " " << w << " = *(const " << vec << "*)(p" << o << " + ih);\n";
            pro << "      const " << c_type(compute_type_of(op.meta.dtype)) << " " << kernel_var(op.value) << " = ts_load(" << w
                << ".v[j]);\n";
          } else {
            pro << load_stmt(g, op.value, o, "0", "      ");
          }
        }
        for (int v : grp.literals) pro << literal_stmt(g, v, "      ");
        for (int n : grp.nodes)
          if (invariant[g.nodes[n].outputs[0]]) pro << node_stmt(g, g.nodes[n], "      ");
        for (int v : kept) {
          os << "    " << c_type(compute_type_of(g.values[v].meta.dtype)) << " " << index_name('h', v) << "[" << V << "];\n";
          pro << "      " << index_name('h', v) << "[j] = " << kernel_var(v) << ";\n";
        }
        os << "#pragma unroll\n    for (int j = 0; j < " << V << "; ++j) {\n" << pro.str() << "    }\n";
      }
      os << "    for (" << idx_t << " t = (" << idx_t << ")blockIdx.x * blockDim.x + threadIdx.x; t < " << k.numel / V
         << "u; t += (" << idx_t << ")gridDim.x * blockDim.x) {\n";
      os << "      const " << idx_t << " i = t * " << V << "u;\n" << decompose("      ");
      std::ostringstream lanes;  // the body of one of the V lanes
      for (int v : kept) lanes << "        const " << c_type(compute_type_of(g.values[v].meta.dtype)) << " " << kernel_var(v)
                               << " = " << index_name('h', v) << "[j];\n";
      for (size_t o = 0; o < k.operands.size(); ++o) {
        const KernelOperand& op = k.operands[o];
        const std::string vec = "ts_vec<" + std::string(storage_type(op.meta.dtype)) + ", " + std::to_string(V) + ">";
        const std::string w = index_name('w', static_cast<int64_t>(o));
        if (op.output) {
          os << "      " << vec << " " << w << ";\n";
        } else if (hoist && inv_operand[o]) {
          continue;  // loaded before the loop
        } else if (op.strides[D - 1] == 1) {
          os << "      const " << vec << " " << w << " = *(const " << vec << "*)(p" << o << " + (" << off[o] << "));\n";
          lanes << "        const " << c_type(compute_type_of(op.meta.dtype)) << " " << kernel_var(op.value) << " = ts_load("
                << w << ".v[j]);\n";
        } else {
          os << load_stmt(g, op.value, o, off[o], "      ");
        }
      }
      for (int v : grp.literals) lanes << literal_stmt(g, v, "        ");
      for (int n : grp.nodes)
        if (!hoist || !invariant[g.nodes[n].outputs[0]]) lanes << node_stmt(g, g.nodes[n], "        ");
      for (size_t o = 0; o < k.operands.size(); ++o)
        if (k.operands[o].output)
          lanes << "        ts_store(&" << index_name('w', static_cast<int64_t>(o)) << ".v[j], " << kernel_var(k.operands[o].value)
                << ");\n";
      os << "#pragma unroll\n      for (int j = 0; j < " << V << "; ++j) {\n" << lanes.str() << "      }\n";
      for (size_t o = 0; o < k.operands.size(); ++o)
        if (k.operands[o].output) {
          const std::string vec =
              "ts_vec<" + std::string(storage_type(k.operands[o].meta.dtype)) + ", " + std::to_string(V) + ">";
          os << "      *(" << vec << "*)(p" << o << " + (" << off[o] << ")) = " << index_name('w', static_cast<int64_t>(o))
             << ";\n";
        }
      os << "    }\n    return;\n  }\n" << scalar_loop << decompose("    ") << body(off, "    ") << "  }\n}\n";
    }
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
