// The fusion pass (fusion.h).
//
// Note [Fusion by bytes saved]
// Every edge producer -> consumer between two fusible nodes of the same iteration space is a
// candidate; its score is the bytes eager moves for that value and a fused kernel does not (one write
// and one read of it, span_bytes() each). Candidates are merged best first (Inductor's scheduler and
// XLA's priority fusion score the same way), one union of two groups at a time, as long as
//   - the union stays within the size limits (FusionOptions),
//   - no path leaves the union and comes back into it (the kernel could not run at one point: the
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
  const OpInfo& info = op_info(n.op);
  if (info.family != OpFamily::Pointwise || info.kind != OpKind::Functional) return false;
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
  auto out_sizes = [&](int i) -> const Shape& { return g.values[g.nodes[i].outputs[0]].meta.sizes; };
  auto same_space = [&](int a, int b) {
    return out_sizes(a) == out_sizes(b) &&
           g.values[g.nodes[a].outputs[0]].meta.device == g.values[g.nodes[b].outputs[0]].meta.device;
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
  // Whether a path from the union leaves it and comes back (searched forward from the union's
  // outside users, up to the union's last node: a later node cannot lead back).
  auto creates_cycle = [&](const std::vector<int>& nodes) {
    std::vector<char> in(n, 0), seen(n, 0);
    int last = 0;
    for (int i : nodes) in[i] = 1, last = std::max(last, i);
    std::vector<int> stack;
    for (int i : nodes)
      for (int u : users[i])
        if (!in[u] && u < last && !seen[u]) seen[u] = 1, stack.push_back(u);
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      for (int u : users[x]) {
        if (in[u]) return true;
        if (u < last && !seen[u]) seen[u] = 1, stack.push_back(u);
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
    if (creates_cycle(u)) return false;
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
      if (fusible[p] && same_space(p, c)) edges.push_back({2 * g.values[v].meta.span_bytes(), p, c});
    }
  }
  std::stable_sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) { return x.bytes > y.bytes; });
  for (const Edge& e : edges) try_merge(e.producer, e.consumer);

  // Horizontal: groups reading one input (each non-literal value read by several fusible nodes).
  if (opt.horizontal) {
    std::vector<std::vector<int>> readers(g.values.size());
    for (int i = 0; i < n; ++i)
      if (fusible[i])
        for (int v : g.nodes[i].inputs)
          if (v >= 0 && !scalar_literal(g, v) && (readers[v].empty() || readers[v].back() != i)) readers[v].push_back(i);
    for (size_t v = 0; v < readers.size(); ++v)
      for (size_t k = 1; k < readers[v].size(); ++k)
        if (same_space(readers[v][0], readers[v][k])) try_merge(readers[v][0], readers[v][k]);
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
    const TensorMeta& m0 = g.values[g.nodes[grp.nodes[0]].outputs[0]].meta;
    grp.sizes = m0.sizes;
    grp.device = m0.device;
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
    os << "] " << grp.device.str() << ":";
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
