// The source of a reduction group's kernel (kernel_source.h, Note [Reduction kernels]).
//
// Note [Reduction kernels]
// The group's full space is split into rows (the kept dims) and the elements of a row (the reduced
// dims); both are put in canonical form as a pointwise kernel's space is (size-1 dims dropped, dims
// ordered by the operands' strides, contiguous neighbours merged), each set on its own. The kernel
// walks a row once per pass of the group's schedule (reduction_schedule.h):
//   row scope   the row's offset into each operand; the row-shaped inputs' loads; the Row nodes
//               computable before the first pass;
//   pass p      a loop over the row's elements that loads what the pass needs, computes the Full
//               nodes it needs, accumulates the reductions of pass p and stores the Full outputs
//               first computable in p; after it, the accumulators are finished (a mean divides by the
//               row's length, amax/amin become nan if a nan was seen, the result is rounded to the
//               output's dtype) and the Row nodes that they make computable follow;
//   end         the row-shaped outputs are stored.
// CPU: rows are shared among OpenMP threads; a row's innermost loop is `omp simd` with the pass's
// accumulators as simd reductions (the vectorizer's form: lanes accumulate apart and combine at the
// end), loops over the other reduced dims around it; int64 indices. Sums and means accumulate in
// double: the eager kernels sum float32 by a pairwise tree (Note [Reduction tree]) and center layer
// norm's mean (Note [Refined mean]); lanes of float, each adding a long row's elements one after the
// other, came out several times further from float64 than they did (a layer norm of 7 columns by
// 40 rows, found by the random programs). A row is read from cache; the wider lanes cost nothing.
// CUDA: a row belongs to one warp when it has at most 1024 elements (8 rows to a block of 256), to a
// block of 256 threads up to 16384, to a block of 1024 beyond; the threads stride over the row's
// elements and combine by warp shuffles (and shared memory across a block's warps), so that every
// thread holds the row's result for the next pass. 32-bit indices unless an operand or the space
// reaches 2^31 elements.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "compile/codegen/kernel_body.h"
#include "compile/codegen/kernel_source.h"
#include "compile/codegen/pointwise_expr.h"
#include "compile/reduction_schedule.h"

namespace tessera::compiler {
namespace {

constexpr int64_t kCpuParallelFrom = 32768;  // elements below which one thread runs the kernel
constexpr int64_t kCpuRowCache = 4096;       // Note [Row cache]: the longest row kept
constexpr int kCpuCachedValues = 4;          // and how many of its values
constexpr int64_t kPersistentValues = 64;    // Note [Persistent rows]: registers of kept operands per thread

enum class Acc : uint8_t { Sum, Mean, Max, Min };

Acc acc_of(OpId op) {
  switch (op) {
    case OpId::sum: return Acc::Sum;
    case OpId::mean: return Acc::Mean;
    case OpId::amax: return Acc::Max;
    default: return Acc::Min;
  }
}

std::string identity(Acc a, ComputeType t) {
  switch (a) {
    case Acc::Sum: case Acc::Mean: return literal(0, t);
    case Acc::Max: return literal(-HUGE_VAL, t);
    case Acc::Min: return literal(HUGE_VAL, t);
  }
  return literal(0, t);
}

const char* cuda_op(Acc a) {
  return a == Acc::Max ? "ts_op_max" : a == Acc::Min ? "ts_op_min" : "ts_op_sum";
}

ComputeType wider(ComputeType a, ComputeType b) {
  return a == ComputeType::Double || b == ComputeType::Double ? ComputeType::Double : ComputeType::Float;
}

// Merges neighbouring dims of `dims` (in order) that are contiguous in every operand.
void canonical(const std::vector<size_t>& dims, const Shape& full, const std::vector<std::vector<int64_t>>& st,
               std::vector<int64_t>* sizes, std::vector<std::vector<int64_t>>* strides) {
  strides->assign(st.size(), {});
  for (size_t d : dims) {
    bool merge = !sizes->empty();
    for (size_t o = 0; merge && o < st.size(); ++o) merge = (*strides)[o].back() == st[o][d] * full[d];
    if (merge) {
      sizes->back() *= full[d];
      for (size_t o = 0; o < st.size(); ++o) (*strides)[o].back() = st[o][d];
    } else {
      sizes->push_back(full[d]);
      for (size_t o = 0; o < st.size(); ++o) (*strides)[o].push_back(st[o][d]);
    }
  }
}

// Statements decomposing `flat` into coordinates `<c>k` of `sizes` (outermost first).
std::string coordinates(const std::string& flat, const std::vector<int64_t>& sizes, char c, const std::string& t,
                        const std::string& ind) {
  std::ostringstream os;
  const size_t D = sizes.size();
  if (D == 0) return "";
  if (D == 1) {
    os << ind << "const " << t << " " << index_name(c, 0) << " = " << flat << ";\n";
    return os.str();
  }
  const std::string rest = index_name(c, 99);
  os << ind << t << " " << rest << " = " << flat << ";\n";
  for (size_t d = D; d-- > 1;)
    os << ind << "const " << t << " " << index_name(c, static_cast<int64_t>(d)) << " = " << rest << " % " << sizes[d]
       << "; " << rest << " /= " << sizes[d] << ";\n";
  os << ind << "const " << t << " " << index_name(c, 0) << " = " << rest << ";\n";
  return os.str();
}

}  // namespace

KernelSpec make_reduction_spec(const Graph& g, const FusionGroup& grp, KernelTarget target, int index) {
  const Shape& full = grp.sizes;
  const std::vector<char>& mask = grp.reduce_mask;
  const ReductionSchedule sc = schedule_reduction(g, grp.nodes, full, mask);
  TS_CHECK(sc.ok, ValueError, "compile: reduction group ", index, " has no schedule (", sc.why,
           "); this is a bug of the fusion pass");
  const size_t R = full.size(), M = grp.nodes.size();
  KernelSpec k;
  k.target = target;
  k.name = "ts_fused_" + std::to_string(index);
  for (size_t j = 0; j < M && j < 4; ++j) k.name += std::string("_") + op_name(g.nodes[grp.nodes[j]].op);

  std::vector<int> pos(g.nodes.size(), -1);
  for (size_t j = 0; j < M; ++j) pos[grp.nodes[j]] = static_cast<int>(j);
  auto member_of = [&](int v) { return g.values[v].node < 0 ? -1 : pos[g.values[v].node]; };

  // Operands: the outputs, then the inputs, each with its strides over the full space in the context
  // it is read in (a row-shaped tensor has zero strides over the reduced dims).
  std::vector<char> is_full;  // per operand: indexed by the row's elements, or by the row only
  auto row_strides = [&](const TensorMeta& m, const Shape& reader) {
    std::vector<int64_t> st(R, 0);
    const std::vector<int64_t> a = aligned_strides(m, reader);
    if (reader.size() == R) {
      for (size_t d = 0; d < R; ++d) st[d] = mask[d] ? 0 : a[d];
    } else {
      size_t j = 0;
      for (size_t d = 0; d < R; ++d)
        if (!mask[d]) st[d] = a[j++];
    }
    return st;
  };
  auto add = [&](int v, bool output, bool full_ctx, std::vector<int64_t> st) {
    for (size_t o = 0; o < k.operands.size(); ++o)
      if (k.operands[o].value == v && k.operands[o].output == output && k.operands[o].strides == st) return o;
    k.operands.push_back({v, output, g.values[v].meta, std::move(st)});
    is_full.push_back(full_ctx);
    return k.operands.size() - 1;
  };
  for (int v : grp.outputs) {
    const TensorMeta& m = g.values[v].meta;
    if (m.sizes == full) add(v, true, true, aligned_strides(m, full));
    else add(v, true, false, row_strides(m, m.sizes));
  }
  std::vector<int> full_operand(g.values.size(), -1), row_operand(g.values.size(), -1);
  for (size_t j = 0; j < M; ++j) {
    const Node& n = g.nodes[grp.nodes[j]];
    for (int v : n.inputs) {
      if (v < 0 || member_of(v) >= 0 || scalar_literal(g, v)) continue;
      const TensorMeta& m = g.values[v].meta;
      if (sc.role[j] == MemberRole::Row) {
        if (row_operand[v] < 0) row_operand[v] = static_cast<int>(add(v, false, false, row_strides(m, g.values[n.outputs[0]].meta.sizes)));
      } else if (full_operand[v] < 0) {
        full_operand[v] = static_cast<int>(add(v, false, true, aligned_strides(m, full)));
      }
    }
  }
  const size_t O = k.operands.size();

  // Canonical rows and row elements.
  std::vector<size_t> outer, inner;
  for (size_t d = 0; d < R; ++d)
    if (full[d] != 1) (mask[d] ? inner : outer).push_back(d);
  size_t lead_full = 0;
  while (lead_full < O && !is_full[lead_full]) ++lead_full;
  if (lead_full == O) lead_full = 0;
  const std::vector<int64_t>& lead = k.operands[0].strides;
  const std::vector<int64_t>& lead_in = k.operands[lead_full].strides;
  std::stable_sort(outer.begin(), outer.end(), [&](size_t a, size_t b) { return lead[a] > lead[b]; });
  std::stable_sort(inner.begin(), inner.end(), [&](size_t a, size_t b) { return lead_in[a] > lead_in[b]; });
  std::vector<std::vector<int64_t>> st(O);
  for (size_t o = 0; o < O; ++o) st[o] = k.operands[o].strides;
  std::vector<int64_t> os_, is_;
  std::vector<std::vector<int64_t>> ost, ist;
  canonical(outer, full, st, &os_, &ost);
  canonical(inner, full, st, &is_, &ist);
  k.rows = std::accumulate(os_.begin(), os_.end(), int64_t{1}, std::multiplies<>());
  k.inner = std::accumulate(is_.begin(), is_.end(), int64_t{1}, std::multiplies<>());
  k.numel = k.rows * k.inner;
  k.sizes = os_;
  k.sizes.insert(k.sizes.end(), is_.begin(), is_.end());
  for (size_t o = 0; o < O; ++o) {
    k.operands[o].strides = ost[o];
    k.operands[o].strides.insert(k.operands[o].strides.end(), ist[o].begin(), ist[o].end());
  }
  k.index64 = k.numel >= (int64_t{1} << 31);
  for (const KernelOperand& op : k.operands)
    k.index64 = k.index64 || op.meta.span_bytes() / static_cast<int64_t>(element_size(op.meta.dtype)) >= (int64_t{1} << 31);
  const bool cpu = target == KernelTarget::Cpu;
  if (!cpu) {
    k.row_threads = k.inner <= 1024 ? 32 : k.inner <= 16384 ? 256 : 1024;
    k.rows_per_block = k.row_threads == 32 ? 8 : 1;
  }
  const std::string it = cpu || k.index64 ? "int64_t" : "uint32_t";

  // What each pass computes: the Full members its reductions and its stores need.
  //
  // Note [Row cache]: on the CPU, a row of at most kCpuRowCache elements (one canonical dim) keeps
  // the values a pass computed that a later pass needs again in a buffer on the thread's stack, and
  // the later pass reads them instead of recomputing them and what they came from (softmax's exp:
  // computed for the sum, read back for the division). Only the values that the later pass reads
  // directly are kept, at most kCpuCachedValues of them.
  std::vector<char> is_output(g.values.size(), 0);
  for (int v : grp.outputs) is_output[v] = 1;
  const bool row_cache = cpu && is_.size() == 1 && k.inner <= kCpuRowCache;
  std::vector<std::vector<char>> needed(sc.passes, std::vector<char>(M, 0));
  std::vector<std::vector<char>> from_cache(sc.passes, std::vector<char>(M, 0));  // read back in pass p
  std::vector<char> cached(M, 0);                                                  // kept for a later pass
  std::vector<int> first(M, -1);  // the pass that first computes a member (and writes it when cached)
  for (int p = 0; p < sc.passes; ++p) {
    std::vector<char>& need = needed[p];
    for (size_t j = 0; j < M; ++j) {
      const int out = g.nodes[grp.nodes[j]].outputs[0];
      if (sc.role[j] == MemberRole::Reduce && sc.level[j] == p) need[j] = 1;
      if (sc.role[j] == MemberRole::Full && sc.level[j] == p && is_output[out]) need[j] = 1;
    }
    int kept = static_cast<int>(std::count(cached.begin(), cached.end(), 1));
    for (size_t j = M; j-- > 0;) {
      if (!need[j]) continue;
      if (row_cache && sc.role[j] == MemberRole::Full && first[j] >= 0 && first[j] < p &&
          (cached[j] || kept < kCpuCachedValues)) {
        kept += cached[j] ? 0 : 1;
        cached[j] = 1;
        from_cache[p][j] = 1;
        continue;  // its inputs are not needed for it
      }
      for (int v : g.nodes[grp.nodes[j]].inputs) {
        const int q = v >= 0 ? member_of(v) : -1;
        if (q >= 0 && sc.role[q] == MemberRole::Full) need[q] = 1;
      }
    }
    for (size_t j = 0; j < M; ++j)
      if (need[j] && !from_cache[p][j] && first[j] < 0) first[j] = p;
  }
  std::vector<int> write_pass(M, -1);  // the pass that writes a kept value to its buffer
  for (size_t j = 0; j < M; ++j)
    if (cached[j]) write_pass[j] = first[j];

  auto acc_type = [&](size_t j) {
    const Node& n = g.nodes[grp.nodes[j]];
    const Acc a = acc_of(n.op);
    if (cpu && (a == Acc::Sum || a == Acc::Mean)) return ComputeType::Double;  // Note [Reduction kernels]
    return wider(compute_type_of(g.values[n.inputs[0]].meta.dtype), compute_type_of(g.values[n.outputs[0]].meta.dtype));
  };
  // The full operands each pass loads.
  std::vector<std::vector<char>> load(sc.passes, std::vector<char>(O, 0));
  for (int p = 0; p < sc.passes; ++p)
    for (size_t j = 0; j < M; ++j) {
      if (!needed[p][j] || from_cache[p][j]) continue;
      for (int v : g.nodes[grp.nodes[j]].inputs)
        if (v >= 0 && full_operand[v] >= 0) load[p][full_operand[v]] = 1;
    }

  // Note [Persistent rows]: on CUDA, a row whose elements split evenly into K chunks of V per thread
  // (V: 16 bytes of the narrowest operand that moves along the row, when every such operand moves with
  // stride 1 and its rows start on multiples of V) is read from global memory once: the operands that
  // several passes load are kept in registers (at most kPersistentValues per thread), the others are
  // loaded in their pass, each chunk as one vector, and the full outputs are stored as vectors. Chunk
  // t of lane l holds the row's elements (t * row_threads + l) * V + [0, V): a warp's loads are
  // contiguous. The pointers' alignment is known only at the call: unaligned ones take the strided
  // loop above. Inductor calls this a persistent reduction.
  int pv = 0, pk = 0;  // vector width and chunks per thread of the persistent path (0: none)
  std::vector<char> moving(O, 0), kept_in_regs(O, 0);
  if (!cpu && is_.size() == 1) {
    bool ok = true;
    size_t narrowest = 0;
    for (size_t o = 0; o < O && ok; ++o) {
      if (!is_full[o] || ist[o][0] == 0) continue;
      ok = ist[o][0] == 1;
      moving[o] = 1;
      const size_t e = element_size(k.operands[o].meta.dtype);
      narrowest = narrowest == 0 ? e : std::min(narrowest, e);
    }
    for (size_t o = 0; o < O && ok; ++o)  // a full output that does not move along the row is not written per element
      ok = !(k.operands[o].output && is_full[o] && !moving[o]);
    for (int v = ok && narrowest ? static_cast<int>(std::min<size_t>(8, 16 / narrowest)) : 0; v >= 1 && pv == 0; v /= 2) {
      if (k.inner % (k.row_threads * v) != 0) continue;
      bool rows_aligned = true;
      for (size_t o = 0; o < O; ++o)
        for (size_t d = 0; moving[o] && d < ost[o].size(); ++d) rows_aligned = rows_aligned && ost[o][d] % v == 0;
      if (!rows_aligned) continue;
      const int chunks = static_cast<int>(k.inner / (k.row_threads * v));
      int64_t values = 0;
      for (size_t o = 0; o < O; ++o) {
        int passes = 0;
        for (int p = 0; p < sc.passes; ++p) passes += load[p][o];
        if (moving[o] && !k.operands[o].output && passes > 1)
          values += int64_t{chunks} * v * (compute_type_of(k.operands[o].meta.dtype) == ComputeType::Double ? 2 : 1);
      }
      if (values <= kPersistentValues) pv = v, pk = chunks;
    }
  }
  k.persistent_vector = pv;
  k.persistent_chunks = pk;

  std::ostringstream os;
  if (cpu) {
    os << "extern \"C\" void " << k.name << "(void* const* args) {\n";
    for (size_t o = 0; o < O; ++o) {
      const KernelOperand& op = k.operands[o];
      const char* t = storage_type(op.meta.dtype);
      os << "  " << (op.output ? "" : "const ") << t << "* __restrict__ p" << o << " = (" << (op.output ? "" : "const ")
         << t << "*)args[" << o << "];\n";
    }
  } else {
    os << "extern \"C\" __global__ void __launch_bounds__(" << k.row_threads * k.rows_per_block << ") " << k.name << "(";
    for (size_t o = 0; o < O; ++o) {
      const KernelOperand& op = k.operands[o];
      os << (o ? ", " : "") << (op.output ? "" : "const ") << storage_type(op.meta.dtype) << "* __restrict__ p" << o;
    }
    os << ") {\n";
    if (pk > 0) {  // Note [Persistent rows]: vector accesses need aligned pointers
      std::string mis;
      for (size_t o = 0; o < O; ++o)
        if (moving[o])
          mis += std::string(mis.empty() ? "" : " | ") + "((unsigned long long)p" + std::to_string(o) + " & " +
                 std::to_string(pv * element_size(k.operands[o].meta.dtype) - 1) + "u)";
      os << "  const bool aligned = (" << mis << ") == 0;\n";
    }
  }
  os << "  // " << k.rows << " rows of " << k.inner << " elements, " << sc.passes << " pass" << (sc.passes > 1 ? "es" : "")
     << (cpu ? "" : k.row_threads == 32 ? ", a warp per row" : ", a block per row") << "\n";
  for (int v : grp.literals) os << literal_stmt(g, v, "  ");
  std::string ind = "    ";
  if (cpu) {
    os << "#pragma omp parallel for schedule(static)" << (k.numel >= kCpuParallelFrom && k.rows > 1 ? "" : " if(0)") << "\n";
    os << "  for (int64_t r = 0; r < " << k.rows << "; ++r) {\n";
  } else {
    const int rpb = k.rows_per_block;
    os << "  const unsigned lane = threadIdx.x % " << k.row_threads << "u;\n";
    os << "  for (" << it << " r = (" << it << ")blockIdx.x * " << rpb << "u + threadIdx.x / " << k.row_threads << "u; r < "
       << k.rows << "u; r += (" << it << ")gridDim.x * " << rpb << "u) {\n";
  }
  std::vector<std::string> oidx(os_.size()), iidx(is_.size());
  for (size_t d = 0; d < oidx.size(); ++d) oidx[d] = index_name('o', static_cast<int64_t>(d));
  for (size_t d = 0; d < iidx.size(); ++d) iidx[d] = index_name('j', static_cast<int64_t>(d));
  os << coordinates("r", os_, 'o', it, ind);
  for (size_t o = 0; o < O; ++o)
    os << ind << "const " << it << " b" << o << " = " << offset_expr(ost[o], oidx, os_.size()) << ";\n";
  // Row-shaped reads (an operand may also be read in the passes, when its strides over the row's
  // elements are zero in both contexts).
  for (size_t o = 0; o < O; ++o) {
    const int v = k.operands[o].value;
    if (!k.operands[o].output && row_operand[v] == static_cast<int>(o))
      os << load_stmt(g, v, o, index_name('b', static_cast<int64_t>(o)), ind);
  }
  auto row_nodes = [&](int level, const std::string& at) {
    for (size_t j = 0; j < M; ++j)
      if (sc.role[j] == MemberRole::Row && sc.level[j] == level) os << node_stmt(g, g.nodes[grp.nodes[j]], at);
  };
  for (size_t j = 0; j < M; ++j)
    if (cached[j]) {
      const int v = g.nodes[grp.nodes[j]].outputs[0];
      os << ind << c_type(compute_type_of(g.values[v].meta.dtype)) << " " << index_name('c', v) << "[" << k.inner
         << "];  // Note [Row cache]\n";
    }
  row_nodes(0, ind);
  auto vec_type = [&](size_t o) {
    return "ts_vec<" + std::string(storage_type(k.operands[o].meta.dtype)) + ", " + std::to_string(pv) + ">";
  };
  const std::string rt = std::to_string(k.row_threads);
  const std::string chunk_at = "(t * " + rt + "u + lane) * " + std::to_string(pv) + "u";

  // Every pass, then the row-shaped outputs; persistent: Note [Persistent rows].
  auto emit_passes = [&](const std::string& ind, bool persistent) {
    if (persistent) {
      for (size_t o = 0; o < O; ++o) {
        int passes = 0;
        for (int p = 0; p < sc.passes; ++p) passes += load[p][o];
        kept_in_regs[o] = moving[o] && !k.operands[o].output && passes > 1;
        const std::string ct = c_type(compute_type_of(k.operands[o].meta.dtype));
        const std::string b = index_name('b', static_cast<int64_t>(o));
        if (kept_in_regs[o]) {
          const std::string c = index_name('k', static_cast<int64_t>(o));
          os << ind << ct << " " << c << "[" << pk * pv << "];  // operand " << o << ", kept for " << passes << " passes\n";
          os << ind << "#pragma unroll\n" << ind << "for (unsigned t = 0; t < " << pk << "u; ++t) {\n";
          os << ind << "  const " << vec_type(o) << " w = *(const " << vec_type(o) << "*)(p" << o << " + " << b << " + " << chunk_at << ");\n";
          os << ind << "  #pragma unroll\n" << ind << "  for (unsigned e = 0; e < " << pv << "u; ++e) " << c << "[t * " << pv
             << "u + e] = ts_load(w.v[e]);\n";
          os << ind << "}\n";
        } else if (is_full[o] && !moving[o] && !k.operands[o].output && passes > 0) {
          os << load_stmt(g, k.operands[o].value, o, b, ind);  // the same for the whole row
        }
      }
    }
    for (int p = 0; p < sc.passes; ++p) {
      os << ind << "// pass " << p << "\n";
      std::vector<size_t> reds;
      for (size_t j = 0; j < M; ++j)
        if (sc.role[j] == MemberRole::Reduce && sc.level[j] == p) reds.push_back(j);
      for (size_t j : reds) {
        const Node& n = g.nodes[grp.nodes[j]];
        const Acc a = acc_of(n.op);
        os << ind << c_type(acc_type(j)) << " " << index_name('a', n.outputs[0]) << " = " << identity(a, acc_type(j)) << ";\n";
        if (cpu && (a == Acc::Max || a == Acc::Min)) os << ind << "int " << index_name('n', n.outputs[0]) << " = 0;\n";
      }
      // The loop over the row's elements and each full operand's offset in it.
      std::string body_ind;
      std::vector<std::string> off(O);
      std::vector<size_t> stored;  // the full outputs this pass stores
      for (size_t o = 0; o < O; ++o) {
        const KernelOperand& op = k.operands[o];
        const int q = op.output && is_full[o] ? member_of(op.value) : -1;
        if (q >= 0 && sc.level[q] == p) stored.push_back(o);
      }
      if (persistent) {
        os << ind << "#pragma unroll\n" << ind << "for (unsigned t = 0; t < " << pk << "u; ++t) {\n";
        for (size_t o = 0; o < O; ++o) {
          const std::string w = index_name('w', static_cast<int64_t>(o));
          if (load[p][o] && moving[o] && !kept_in_regs[o])
            os << ind << "  const " << vec_type(o) << " " << w << " = *(const " << vec_type(o) << "*)(p" << o << " + "
               << index_name('b', static_cast<int64_t>(o)) << " + " << chunk_at << ");\n";
        }
        for (size_t o : stored) os << ind << "  " << vec_type(o) << " " << index_name('w', static_cast<int64_t>(o)) << ";\n";
        os << ind << "  #pragma unroll\n" << ind << "  for (unsigned e = 0; e < " << pv << "u; ++e) {\n";
        body_ind = ind + "    ";
        for (size_t o = 0; o < O; ++o) {
          if (!load[p][o] || !moving[o]) continue;
          const std::string src = kept_in_regs[o] ? index_name('k', static_cast<int64_t>(o)) + "[t * " + std::to_string(pv) + "u + e]"
                                                  : "ts_load(" + index_name('w', static_cast<int64_t>(o)) + ".v[e])";
          os << body_ind << "const " << c_type(compute_type_of(k.operands[o].meta.dtype)) << " "
             << kernel_var(k.operands[o].value) << " = " << src << ";\n";
        }
      } else if (cpu) {
        const size_t D = is_.size();
        std::string li = ind;
        for (size_t d = 0; d + 1 < D; ++d) {
          os << li << "for (int64_t " << iidx[d] << " = 0; " << iidx[d] << " < " << is_[d] << "; ++" << iidx[d] << ") {\n";
          li += "  ";
        }
        os << "#pragma omp simd";
        for (size_t j : reds) {
          const Node& n = g.nodes[grp.nodes[j]];
          const Acc a = acc_of(n.op);
          const std::string acc = index_name('a', n.outputs[0]);
          if (a == Acc::Sum || a == Acc::Mean) os << " reduction(+:" << acc << ")";
          else os << " reduction(" << (a == Acc::Max ? "max" : "min") << ":" << acc << ") reduction(|:" << index_name('n', n.outputs[0]) << ")";
        }
        os << "\n";
        os << li << "for (int64_t " << iidx[D - 1] << " = 0; " << iidx[D - 1] << " < " << is_[D - 1] << "; ++" << iidx[D - 1]
           << ") {\n";
        body_ind = li + "  ";
      } else {
        os << ind << "for (" << it << " j = lane; j < " << k.inner << "u; j += " << k.row_threads << "u) {\n";
        body_ind = ind + "  ";
        os << coordinates("j", is_, 'j', it, body_ind);
      }
      if (!persistent) {
        for (size_t o = 0; o < O; ++o) {
          const std::string e = offset_expr(ist[o], iidx, is_.size());
          off[o] = index_name('b', static_cast<int64_t>(o)) + (e == "0" ? "" : " + " + e);
        }
        for (size_t o = 0; o < O; ++o)
          if (load[p][o]) os << load_stmt(g, k.operands[o].value, o, off[o], body_ind);
      }
      for (size_t j = 0; j < M; ++j) {
        if (!needed[p][j]) continue;
        const Node& n = g.nodes[grp.nodes[j]];
        if (sc.role[j] == MemberRole::Full) {
          const std::string buf = index_name('c', n.outputs[0]) + "[" + (iidx.empty() ? "0" : iidx[0]) + "]";
          if (from_cache[p][j]) {
            os << body_ind << "const " << c_type(compute_type_of(g.values[n.outputs[0]].meta.dtype)) << " "
               << kernel_var(n.outputs[0]) << " = " << buf << ";  // " << op_name(n.op) << ", kept\n";
            continue;
          }
          os << node_stmt(g, n, body_ind);
          if (write_pass[j] == p) os << body_ind << buf << " = " << kernel_var(n.outputs[0]) << ";\n";
          continue;
        }
        const Acc a = acc_of(n.op);
        const std::string acc = index_name('a', n.outputs[0]);
        const std::string x = "((" + std::string(c_type(acc_type(j))) + ")" + kernel_var(n.inputs[0]) + ")";
        if (a == Acc::Sum || a == Acc::Mean) os << body_ind << acc << " += " << x << ";  // " << op_name(n.op) << "\n";
        else if (!cpu) os << body_ind << acc << " = " << (a == Acc::Max ? "ts_maximum(" : "ts_minimum(") << acc << ", " << x << ");  // " << op_name(n.op) << "\n";
        else {
          os << body_ind << acc << " = " << x << (a == Acc::Max ? " > " : " < ") << acc << " ? " << x << " : " << acc
             << ";  // " << op_name(n.op) << "\n";
          os << body_ind << index_name('n', n.outputs[0]) << " |= " << x << " != " << x << ";\n";
        }
      }
      for (size_t o : stored) {
        if (persistent) os << body_ind << "ts_store(&" << index_name('w', static_cast<int64_t>(o)) << ".v[e], " << kernel_var(k.operands[o].value) << ");\n";
        else os << body_ind << "ts_store(p" << o << " + (" << off[o] << "), " << kernel_var(k.operands[o].value) << ");\n";
      }
      if (persistent) {
        os << ind << "  }\n";
        for (size_t o : stored)
          os << ind << "  *(" << vec_type(o) << "*)(p" << o << " + " << index_name('b', static_cast<int64_t>(o)) << " + " << chunk_at
             << ") = " << index_name('w', static_cast<int64_t>(o)) << ";\n";
        os << ind << "}\n";
      } else if (cpu) {
        for (size_t d = is_.size(); d-- > 0;) os << ind << std::string(2 * d, ' ') << "}\n";
      } else {
        os << ind << "}\n";
      }
      // Finish the pass's reductions.
      for (size_t j : reds) {
        const Node& n = g.nodes[grp.nodes[j]];
        const Acc a = acc_of(n.op);
        const std::string acc = index_name('a', n.outputs[0]);
        const ComputeType at = acc_type(j);
        if (!cpu)
          os << ind << acc << " = " << (k.row_threads == 32 ? "ts_warp_reduce<" : "ts_block_reduce<") << cuda_op(a) << ">(" << acc
             << ");\n";
        std::string e = acc;
        if (a == Acc::Mean) e = "(" + acc + " / " + literal(static_cast<double>(k.inner), at) + ")";
        if (cpu && (a == Acc::Max || a == Acc::Min)) {
          std::string nan_seen = index_name('n', n.outputs[0]);  // appended: GCC 12 warns wrongly of "(" + s
          e = std::string("(");
          e += nan_seen;
          e += " ? (";
          e += c_type(at);
          e += ")TS_NAN : " + acc + ")";
        }
        const DType od = g.values[n.outputs[0]].meta.dtype;
        const char* ot = c_type(compute_type_of(od));
        e = std::string("((") + ot + ")" + e + ")";
        if (od == kBFloat16) e = "ts_round_bf16(" + e + ")";
        if (od == kFloat16) e = "ts_round_f16(" + e + ")";
        os << ind << "const " << ot << " " << kernel_var(n.outputs[0]) << " = " << e << ";  // " << op_name(n.op) << "\n";
      }
      row_nodes(p + 1, ind);
    }
    // The row-shaped outputs.
    std::string store_ind = ind;
    if (!cpu) {
      os << ind << "if (lane == 0) {\n";
      store_ind += "  ";
    }
    for (size_t o = 0; o < O; ++o)
      if (k.operands[o].output && !is_full[o])
        os << store_ind << "ts_store(p" << o << " + b" << o << ", " << kernel_var(k.operands[o].value) << ");\n";
    if (!cpu) os << ind << "}\n";
  };
  if (pk > 0) {
    os << ind << "if (aligned) {  // Note [Persistent rows]: " << pk << " chunk" << (pk > 1 ? "s" : "") << " of " << pv
       << " per thread\n";
    emit_passes(ind + "  ", true);
    os << ind << "} else {\n";
    emit_passes(ind + "  ", false);
    os << ind << "}\n";
  } else {
    emit_passes(ind, false);
  }
  os << "  }\n}\n";
  k.function = os.str();
  return k;
}

}  // namespace tessera::compiler
