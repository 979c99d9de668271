// The fusion pass (fusion.h).
//
// Note [Fusion by bytes saved]
// Every edge producer -> consumer between two fusible nodes of the same iteration space is a
// candidate; its score is the bytes eager moves for that value and a fused kernel does not (one write
// and one read of it, span_bytes() each). Candidates are merged best first (Inductor's scheduler and
// XLA's priority fusion score the same way), one union of two groups at a time, as long as
//   - the union stays within the size limits (FusionOptions),
//   - no path leaves the union and comes back into it, through the groups formed so far contracted
//     to one step each (the kernel could not run at one point: the
//     path's outside node would need a value the kernel makes and make a value it needs),
//   - no side-effecting node (an in-place write, an out= write, a random draw) lies between the union's
//     first and last node in program order: the kernel runs where its last node stood, so a member
//     would otherwise read a tensor after a write that came after it in the program, or an outside
//     reader moved past the kernel would change the order of random draws.
// Horizontal fusion then merges groups that read one input, under the same rules, which saves a read.
// A group of one node saves nothing and stays an eager call (the eager kernels are tuned; a generated
// kernel for one op would only match them).
#include "compile/fusion.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "compile/codegen/pointwise_expr.h"
#include "compile/reduction_schedule.h"

namespace tessera::compiler {
namespace {

bool fusible_dtype(DType d) {
  return d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16 || d == kBool;
}
bool is_float(DType d) { return d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16; }

bool is_logic(OpId op) {
  switch (op) {
    case OpId::eq: case OpId::ne: case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge:
    case OpId::logical_and: case OpId::logical_or: case OpId::logical_xor: case OpId::logical_not:
    case OpId::isnan: case OpId::isinf: case OpId::isfinite: case OpId::where:
      return true;
    default:
      return false;
  }
}

// The iteration space of a node or a group: pointwise over `full`, or reducing `mask`'s dims of it.
struct Space {
  bool reduce = false;
  Shape full;
  std::vector<char> mask;
  Device device = kCPU;
};

// The space of the union of two, if they can share a kernel: pointwise spaces that are equal, or a
// reduction's space with a pointwise one over its full space or its rows (keepdim or not).
bool join(const Space& a, const Space& b, Space* out) {
  if (!(a.device == b.device)) return false;
  if (a.reduce && b.reduce) {
    if (a.full != b.full || a.mask != b.mask) return false;
    *out = a;
    return true;
  }
  if (!a.reduce && !b.reduce) {
    if (a.full != b.full) return false;
    *out = a;
    return true;
  }
  const Space& r = a.reduce ? a : b;
  const Shape& p = a.reduce ? b.full : a.full;
  if (p != r.full && p != row_sizes(r.full, r.mask, true) && p != row_sizes(r.full, r.mask, false)) return false;
  *out = r;
  return true;
}

struct Dsu {
  std::vector<int> parent;
  explicit Dsu(int n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); }
};

}  // namespace

bool scalar_literal(const Graph& g, int value, double* out) {
  if (value < 0) return false;
  const Value& v = g.values[value];
  if (v.node < 0) return false;
  const Node& n = g.nodes[v.node];
  if (n.op != OpId::fill_ || n.inputs.empty() || n.inputs[0] >= 0 || n.attrs.scalars.empty()) return false;
  if (!v.meta.sizes.empty() || !fusible_dtype(v.meta.dtype)) return false;
  if (out) *out = n.attrs.scalars[0].to_double();
  return true;
}

bool is_fusible(const Graph& g, const Node& n) {
  if (fusible_reduction(g, n)) return true;
  const OpInfo& info = op_info(n.op);
  // A copy into a fresh buffer is a conversion (x.to(dtype)).
  const bool conversion = n.op == OpId::copy_ && n.inputs.size() == 2 && n.inputs[0] < 0 && n.inputs[1] >= 0;
  if (!conversion && (info.family != OpFamily::Pointwise || info.kind != OpKind::Functional)) return false;
  if (n.outputs.size() != 1 || !has_pointwise_expr(n)) return false;
  const TensorMeta& out = g.values[n.outputs[0]].meta;
  if (!fusible_dtype(out.dtype) || out.numel() == 0) return false;
  if (!is_logic(n.op) && !is_float(out.dtype)) return false;
  bool any = false;
  for (int v : n.inputs) {
    if (v < 0) continue;
    const TensorMeta& m = g.values[v].meta;
    if (!fusible_dtype(m.dtype)) return false;
    // A 0-dim operand on another device (a Scalar's CPU tensor beside CUDA tensors) is fused only
    // as a literal.
    if (!(m.device == out.device) && !scalar_literal(g, v)) return false;
    if (m.sizes.size() > out.sizes.size()) return false;
    any = true;
  }
  return any;
}

FusionPlan plan_fusion(const Graph& g, const FusionOptions& opt) {
  const int n = static_cast<int>(g.nodes.size());
  FusionPlan plan;
  plan.group_of_node.assign(n, -1);
  plan.absorbed.assign(n, 0);
  std::vector<char> fusible(n, 0);
  for (int i = 0; i < n; ++i) fusible[i] = is_fusible(g, g.nodes[i]);
  // Consumers of each node (by value).
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i)
    for (int v : g.nodes[i].inputs)
      if (v >= 0 && g.values[v].node >= 0) users[g.values[v].node].push_back(i);
  // Side-effecting nodes, for the span rule: prefix counts over program order.
  std::vector<int> effects_before(n + 1, 0);
  for (int i = 0; i < n; ++i) effects_before[i + 1] = effects_before[i] + (has_side_effects(g.nodes[i]) ? 1 : 0);

  Dsu dsu(n);
  std::vector<std::vector<int>> members(n);
  for (int i = 0; i < n; ++i) members[i] = {i};
  // Each group's space, at its root; a node's own to begin with.
  std::vector<Space> space(n);
  for (int i = 0; i < n; ++i) {
    if (!fusible[i]) continue;
    const TensorMeta& out = g.values[g.nodes[i].outputs[0]].meta;
    space[i].device = out.device;
    space[i].reduce = fusible_reduction(g, g.nodes[i], &space[i].full, &space[i].mask);
    if (!space[i].reduce) space[i].full = out.sizes;
  }
  auto joinable = [&](int a, int b) {
    Space u;
    return join(space[a], space[b], &u);
  };
  // Distinct tensors the union of two groups would read or write.
  auto operand_count = [&](const std::vector<int>& nodes) {
    std::vector<char> in(n, 0);
    for (int i : nodes) in[i] = 1;
    std::vector<int> seen;
    for (int i : nodes) {
      for (int v : g.nodes[i].inputs)
        if (v >= 0 && !scalar_literal(g, v) && (g.values[v].node < 0 || !in[g.values[v].node])) seen.push_back(v);
      seen.push_back(g.nodes[i].outputs[0]);  // an upper bound: inner values may not be outputs
    }
    std::sort(seen.begin(), seen.end());
    return static_cast<int>(std::unique(seen.begin(), seen.end()) - seen.begin());
  };
  // Whether a path from the union leaves it and comes back. The path runs through the graph with the
  // groups formed so far contracted (a group runs as one step: a path that reaches one member leaves
  // from all of them), so two groups never wait for each other.
  std::vector<char> in_union(n, 0), seen(n, 0), expanded(n, 0);
  auto creates_cycle = [&](const std::vector<int>& nodes) {
    std::fill(in_union.begin(), in_union.end(), 0);
    std::fill(seen.begin(), seen.end(), 0);
    std::fill(expanded.begin(), expanded.end(), 0);
    for (int i : nodes) in_union[i] = 1;
    std::vector<int> stack;
    auto visit_users = [&](int x) {
      for (int u : users[x]) {
        if (in_union[u]) return true;
        if (!seen[u]) seen[u] = 1, stack.push_back(u);
      }
      return false;
    };
    for (int i : nodes)
      for (int u : users[i])
        if (!in_union[u] && !seen[u]) seen[u] = 1, stack.push_back(u);
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      const int r = dsu.find(x);
      if (members[r].size() > 1) {
        if (expanded[r]) continue;
        expanded[r] = 1;
        for (int m : members[r])
          if (visit_users(m)) return true;
      } else if (visit_users(x)) {
        return true;
      }
    }
    return false;
  };
  auto try_merge = [&](int a, int b) {
    int ra = dsu.find(a), rb = dsu.find(b);
    if (ra == rb) return false;
    std::vector<int> u = members[ra];
    u.insert(u.end(), members[rb].begin(), members[rb].end());
    std::sort(u.begin(), u.end());
    if (static_cast<int>(u.size()) > opt.max_nodes) return false;
    if (effects_before[u.back()] - effects_before[u.front() + 1] > 0) return false;
    if (operand_count(u) > opt.max_operands) return false;
    Space joined;
    if (!join(space[ra], space[rb], &joined)) return false;
    if (joined.reduce && !schedule_reduction(g, u, joined.full, joined.mask).ok) return false;
    if (creates_cycle(u)) return false;
    space[ra] = std::move(joined);
    dsu.parent[rb] = ra;
    members[ra] = std::move(u);
    members[rb].clear();
    return true;
  };

  // Vertical candidates, best first.
  struct Edge { int64_t bytes; int producer, consumer; };
  std::vector<Edge> edges;
  for (int c = 0; c < n; ++c) {
    if (!fusible[c]) continue;
    for (int v : g.nodes[c].inputs) {
      if (v < 0 || g.values[v].node < 0) continue;
      const int p = g.values[v].node;
      if (fusible[p] && joinable(p, c)) edges.push_back({2 * g.values[v].meta.span_bytes(), p, c});
    }
  }
  // Among equal savings, an edge into a reduction first: a producer that could join the group of
  // another space it feeds, or the reduction reading it, keeps the reduction's input in registers
  // (layer norm's backward: g * xhat joins the sum over the batch, not the rows' group).
  std::stable_sort(edges.begin(), edges.end(), [&](const Edge& x, const Edge& y) {
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    return space[x.consumer].reduce && !space[y.consumer].reduce;
  });
  for (const Edge& e : edges) try_merge(e.producer, e.consumer);

  // Horizontal: groups reading one input (each non-literal value read by several fusible nodes).
  if (opt.horizontal) {
    std::vector<std::vector<int>> readers(g.values.size());
    for (int i = 0; i < n; ++i)
      if (fusible[i])
        for (int v : g.nodes[i].inputs)
          if (v >= 0 && !scalar_literal(g, v) && (readers[v].empty() || readers[v].back() != i)) readers[v].push_back(i);
    // Each reader joins the first earlier reader it can (readers of other spaces skip each other).
    for (size_t v = 0; v < readers.size(); ++v)
      for (size_t k = 1; k < readers[v].size(); ++k)
        for (size_t j = 0; j < k; ++j)
          if (joinable(readers[v][j], readers[v][k]) && try_merge(readers[v][j], readers[v][k])) break;
  }

  // The groups of two or more nodes, in the order of their first node.
  std::vector<int> roots;
  for (int i = 0; i < n; ++i)
    if (dsu.find(i) == i && members[i].size() > 1) roots.push_back(i);
  std::sort(roots.begin(), roots.end(), [&](int a, int b) { return members[a].front() < members[b].front(); });
  std::vector<int> last_reader(g.values.size(), -1);
  for (int i = 0; i < n; ++i)
    for (int v : g.nodes[i].inputs)
      if (v >= 0) last_reader[v] = i;
  std::vector<char> is_output(g.values.size(), 0);
  for (int v : g.outputs) is_output[v] = 1;
  for (int r : roots) {
    FusionGroup grp;
    grp.nodes = members[r];
    const int id = static_cast<int>(plan.groups.size());
    for (int i : grp.nodes) plan.group_of_node[i] = id;
    grp.sizes = space[r].full;
    grp.device = space[r].device;
    if (space[r].reduce) grp.reduce_mask = space[r].mask;
    plan.groups.push_back(std::move(grp));
  }
  for (FusionGroup& grp : plan.groups) {
    const int id = plan.group_of_node[grp.nodes[0]];
    for (int i : grp.nodes) {
      for (int v : g.nodes[i].inputs) {
        if (v < 0) continue;
        const int d = g.values[v].node;
        if (d >= 0 && plan.group_of_node[d] == id) continue;
        auto& list = scalar_literal(g, v) ? grp.literals : grp.inputs;
        if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
      }
    }
    for (int i : grp.nodes) {
      const int v = g.nodes[i].outputs[0];
      bool outside = is_output[v] != 0;
      for (int u : users[i]) outside = outside || plan.group_of_node[u] != id;
      const int64_t bytes = g.values[v].meta.span_bytes();
      if (outside) {
        grp.outputs.push_back(v);
        for (int u : users[i]) grp.bytes_saved += plan.group_of_node[u] == id ? bytes : 0;
      } else {
        grp.bytes_saved += bytes;  // never written
        grp.bytes_saved += bytes * static_cast<int64_t>(users[i].size());  // never read back
      }
    }
    // Inputs read by several members are read once.
    for (int v : grp.inputs) {
      int reads = 0;
      for (int i : grp.nodes)
        for (int x : g.nodes[i].inputs) reads += x == v ? 1 : 0;
      grp.bytes_saved += (reads - 1) * g.values[v].meta.span_bytes();
    }
  }
  // A literal's fill_ that only groups read is not run at all.
  for (int i = 0; i < n; ++i) {
    const Node& nd = g.nodes[i];
    if (nd.outputs.size() != 1 || !scalar_literal(g, nd.outputs[0]) || is_output[nd.outputs[0]]) continue;
    bool only_groups = !users[i].empty();
    for (int u : users[i]) only_groups = only_groups && plan.group_of_node[u] >= 0;
    plan.absorbed[i] = only_groups;
  }
  return plan;
}

std::string fusion_text(const Graph& g, const FusionPlan& plan) {
  std::ostringstream os;
  for (size_t k = 0; k < plan.groups.size(); ++k) {
    const FusionGroup& grp = plan.groups[k];
    os << "group " << k << " [";
    for (size_t d = 0; d < grp.sizes.size(); ++d) os << (d ? "," : "") << grp.sizes[d];
    os << "]";
    if (grp.reduction()) {
      os << " reducing";
      for (size_t d = 0; d < grp.reduce_mask.size(); ++d)
        if (grp.reduce_mask[d]) os << " " << d;
    }
    os << " " << grp.device.str() << ":";
    for (size_t j = 0; j < grp.nodes.size(); ++j)
      os << (j ? ", " : " ") << op_name(g.nodes[grp.nodes[j]].op) << " %" << g.nodes[grp.nodes[j]].outputs[0];
    os << " <-";
    for (int v : grp.inputs) os << " %" << v;
    for (int v : grp.literals) {
      double x = 0;
      scalar_literal(g, v, &x);
      os << " %" << v << "=" << x;
    }
    os << " ->";
    for (int v : grp.outputs) os << " %" << v;
    os << " (saves " << grp.bytes_saved << " B)\n";
  }
  return os.str();
}

}  // namespace tessera::compiler
