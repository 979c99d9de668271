// The schedule of a reduction group (reduction_schedule.h).
//
// Note [Reduction groups]
// A reduction fuses with the pointwise nodes before it (its prologue: what it reduces is computed
// in registers and never stored) and after it (its epilogue: nodes over the rows, and nodes over the
// full space that read the row's result, as softmax's `exp(x - max)` reads the max). Nothing in the
// rules knows softmax or layer norm: after decomposition (decompose.h) they are chains of the
// primitives below, and the fusion pass groups them by bytes saved as it groups pointwise chains.
//   - Reductions fused: sum, mean, amax, amin of a float tensor over any set of dims. A group holds
//     reductions of one full space over the same dims (layer norm's mean and variance, softmax's max
//     and sum), at most kMaxReductionPasses passes deep.
//   - Rows run in parallel, each row on one thread (CPU) or one warp or block (CUDA); a reduction
//     whose rows are few and long (fewer than kMinRows rows of more than kMaxInnerForFewRows
//     elements: a whole-tensor sum, batch-norm statistics of a small channel count at a large
//     resolution) would leave the machine idle in one row, so it stays an eager call, whose kernels
//     split a row over the whole device. So does a reduction of one-element rows (a copy), and on CUDA
//     a reduction that does not reduce the input's innermost dim (a column sum: a warp walking a
//     column reads one element per cache line; the eager kernels read it in tiles).
//   - Accumulation is in float for float32 and the 16-bit floats, double for float64, rounded to the
//     output's dtype at the end, as the eager kernels do; the order of the additions differs (lanes,
//     then a tree), within the dtype's tolerance. amax and amin propagate nan.
#include "compile/reduction_schedule.h"

#include <algorithm>

namespace tessera::compiler {
namespace {

constexpr int64_t kMinRows = 32;
constexpr int64_t kMaxInnerForFewRows = 8192;

bool is_float(DType d) { return d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16; }

}  // namespace

Shape row_sizes(const Shape& full, const std::vector<char>& mask, bool keepdim) {
  Shape r;
  for (size_t d = 0; d < full.size(); ++d) {
    if (!mask[d]) r.push_back(full[d]);
    else if (keepdim) r.push_back(1);
  }
  return r;
}

bool fusible_reduction(const Graph& g, const Node& n, Shape* full_out, std::vector<char>* mask_out) {
  if (n.op != OpId::sum && n.op != OpId::mean && n.op != OpId::amax && n.op != OpId::amin) return false;
  if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) return false;
  const ReduceAttrs* ra = std::get_if<ReduceAttrs>(&n.attrs.typed);
  if (!ra) return false;
  const TensorMeta& in = g.values[n.inputs[0]].meta;
  const TensorMeta& out = g.values[n.outputs[0]].meta;
  if (!is_float(in.dtype) || !is_float(out.dtype) || !(in.device == out.device) || in.numel() == 0) return false;
  const Shape& full = in.sizes;
  const int64_t rank = static_cast<int64_t>(full.size());
  if (rank == 0) return false;
  std::vector<char> mask(full.size(), ra->dims.empty() ? 1 : 0);
  for (int64_t d : ra->dims) {
    const int64_t w = d < 0 ? d + rank : d;
    if (w < 0 || w >= rank) return false;
    mask[w] = 1;
  }
  int64_t inner = 1;
  for (size_t d = 0; d < full.size(); ++d)
    if (mask[d]) inner *= full[d];
  const int64_t rows = in.numel() / inner;
  if (inner < 2 || (rows < kMinRows && inner > kMaxInnerForFewRows)) return false;
  if (in.device.is_cuda()) {
    // The threads of a row walk its elements: they read memory in order only where the reduced dims
    // hold the input's innermost one (a column sum would read one element per cache line).
    int64_t smallest = -1, at = -1;
    for (size_t d = 0; d < full.size(); ++d)
      if (full[d] > 1 && (smallest < 0 || in.strides[d] < smallest)) smallest = in.strides[d], at = static_cast<int64_t>(d);
    if (at >= 0 && !mask[at]) return false;
  }
  if (out.sizes != row_sizes(full, mask, ra->keepdim)) return false;
  if (full_out) *full_out = full;
  if (mask_out) *mask_out = std::move(mask);
  return true;
}

ReductionSchedule schedule_reduction(const Graph& g, const std::vector<int>& members, const Shape& full,
                                     const std::vector<char>& mask) {
  ReductionSchedule s;
  const Shape keep = row_sizes(full, mask, true), drop = row_sizes(full, mask, false);
  const size_t m = members.size();
  s.role.resize(m);
  s.level.assign(m, 0);
  std::vector<int> pos_of(g.nodes.size(), -1);
  for (size_t k = 0; k < m; ++k) pos_of[members[k]] = static_cast<int>(k);
  // The member defining value v, or -1 for a value from outside the group.
  auto member_of = [&](int v) { return g.values[v].node < 0 ? -1 : pos_of[g.values[v].node]; };
  // The pass from which a Row or Reduce member's value is available.
  auto available = [&](int k) { return s.role[k] == MemberRole::Reduce ? s.level[k] + 1 : s.level[k]; };
  bool any_reduce = false;
  int last = 0;
  for (size_t k = 0; k < m; ++k) {
    const Node& n = g.nodes[members[k]];
    Shape f;
    std::vector<char> mk;
    if (fusible_reduction(g, n, &f, &mk)) {
      if (f != full || mk != mask) {
        s.why = "reductions of different spaces";
        return s;
      }
      s.role[k] = MemberRole::Reduce;
      const int p = member_of(n.inputs[0]);
      if (p >= 0 && s.role[p] != MemberRole::Full) {
        s.why = "a reduction of a row value";
        return s;
      }
      s.level[k] = p >= 0 ? s.level[p] : 0;
      last = std::max(last, s.level[k]);
      any_reduce = true;
      continue;
    }
    const Shape& sizes = g.values[n.outputs[0]].meta.sizes;
    const bool is_full = sizes == full;
    if (!is_full && sizes != keep && sizes != drop) {
      s.why = "a node outside the group's space";
      return s;
    }
    s.role[k] = is_full ? MemberRole::Full : MemberRole::Row;
    int level = 0;
    for (int v : n.inputs) {
      if (v < 0) continue;
      const int p = member_of(v);
      if (p < 0) continue;
      if (s.role[p] == MemberRole::Full) {
        if (!is_full) {
          s.why = "a row node reading a full value";
          return s;
        }
        level = std::max(level, s.level[p]);
      } else {
        if (is_full && g.values[v].meta.sizes != keep) {
          s.why = "a full node reading a row value without its reduced dims";
          return s;
        }
        level = std::max(level, available(p));
      }
    }
    s.level[k] = level;
    if (is_full) last = std::max(last, level);
  }
  if (!any_reduce) {
    s.why = "no reduction";
    return s;
  }
  s.passes = last + 1;
  if (s.passes > kMaxReductionPasses) {
    s.why = "more than " + std::to_string(kMaxReductionPasses) + " passes";
    return s;
  }
  s.ok = true;
  return s;
}

}  // namespace tessera::compiler
