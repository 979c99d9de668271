// The min-cut partition's decision (Note [Min-cut partition] in partition.h): the flow network of
// the forward graph, its cut, and the values and nodes the cut names.
#include "compile/partition.h"

#include <algorithm>

#include "compile/max_flow.h"
#include "compile/recompute_rules.h"

namespace tessera::compiler {
namespace {

// The forward value each Saved input of the backward reads, by the input's index.
int forward_value_of(const Graph& forward, int num_program_outputs, const GraphInput& in) {
  const size_t k = static_cast<size_t>(num_program_outputs) + static_cast<size_t>(in.index);
  TS_CHECK(in.index >= 0 && k < forward.outputs.size(), ValueError, "partition: the backward's saved input ",
           in.index, " has no forward output (", forward.outputs.size() - num_program_outputs, " saved)");
  return forward.outputs[k];
}

// Why the backward forbids recomputation: it writes in place a tensor it reads as saved (a
// recomputed node reading that tensor would see the write, wherever it ran).
std::string backward_writes_saved(const Graph& backward) {
  const AliasInfo alias = alias_info(backward);
  std::vector<char> saved(backward.values.size(), 0);
  for (const GraphInput& in : backward.inputs)
    if (in.kind == InputKind::Saved) saved[in.value] = 1;
  for (const Node& n : backward.nodes) {
    const OpKind kind = op_info(n.op).kind;
    if ((kind == OpKind::InPlace || kind == OpKind::Out) && !n.inputs.empty() && n.inputs[0] >= 0 &&
        saved[alias.root[n.inputs[0]]])
      return std::string("the backward writes a saved tensor in place (") + op_name(n.op) + ")";
  }
  return "";
}

}  // namespace

PartitionDecision choose_saved_values(const Graph& forward, int num_program_outputs, const Graph& backward) {
  PartitionDecision d;
  const int nv = static_cast<int>(forward.values.size());
  const int nn = static_cast<int>(forward.nodes.size());
  // What the backward reads of the forward: the Saved inputs that a node or an output uses.
  std::vector<char> used(backward.values.size(), 0);
  for (const Node& n : backward.nodes)
    for (int v : n.inputs)
      if (v >= 0) used[v] = 1;
  for (int v : backward.outputs) used[v] = 1;
  std::vector<int> captured, needed;
  for (const GraphInput& in : backward.inputs) {
    if (in.kind != InputKind::Saved) continue;
    const int fv = forward_value_of(forward, num_program_outputs, in);
    captured.push_back(fv);
    if (used[in.value]) needed.push_back(fv);
  }
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  d.eager_saved_bytes = saved_storage_bytes(forward, captured);
  auto keep_captured = [&](std::string why) {
    d.saved = captured;
    d.recomputed.clear();
    d.remade.clear();
    d.saved_bytes = d.eager_saved_bytes;
    d.changed = false;
    d.declined = std::move(why);
    return d;
  };
  if (std::string why = backward_writes_saved(backward); !why.empty()) return keep_captured(why);

  const AliasInfo alias = alias_info(forward);
  const std::vector<RecomputeRule> rules = recompute_rules(forward, alias);
  const std::vector<RemadeOutput> remakes = remade_outputs(forward, rules);
  std::vector<int> remake_of_value(nv, -1);
  for (size_t k = 0; k < remakes.size(); ++k) remake_of_value[remakes[k].value] = static_cast<int>(k);
  // Vertices: source, sink, then v_in, v_out per value, then N_n per node, then one per remade output.
  const int source = 0, sink = 1;
  auto in_of = [](int v) { return 2 + 2 * v; };
  auto out_of = [](int v) { return 3 + 2 * v; };
  auto node_of = [nv](int n) { return 2 + 2 * nv + n; };
  auto remake_vertex = [nv, nn](int k) { return 2 + 2 * nv + nn + k; };
  FlowNetwork net(2 + 2 * nv + nn + static_cast<int>(remakes.size()));
  const int64_t inf = FlowNetwork::kInfinite;
  for (int v = 0; v < nv; ++v) {
    const int def = forward.values[v].node;
    int64_t cap = storage_bytes(forward, alias, v);
    if (def >= 0 && is_view_op(forward.nodes[def].op) && recomputable(rules[def])) cap = inf;
    net.add_edge(in_of(v), out_of(v), cap);
  }
  for (const GraphInput& in : forward.inputs) net.add_edge(source, in_of(in.value), inf);
  for (int i = 0; i < nn; ++i) {
    const Node& n = forward.nodes[i];
    if (!recomputable(rules[i])) net.add_edge(source, node_of(i), inf);
    for (int u : n.inputs)
      if (u >= 0) net.add_edge(out_of(u), node_of(i), inf);
    for (int v : n.outputs)
      if (remake_of_value[v] < 0) net.add_edge(node_of(i), in_of(v), inf);
  }
  // Note [Remade outputs]: the remaking op, not the fused node, makes the value in the network.
  for (size_t k = 0; k < remakes.size(); ++k) {
    net.add_edge(out_of(remakes[k].from), remake_vertex(static_cast<int>(k)), inf);
    net.add_edge(remake_vertex(static_cast<int>(k)), in_of(remakes[k].value), inf);
  }
  for (int v : needed) net.add_edge(out_of(v), sink, inf);
  d.cut_bytes = net.max_flow(source, sink);
  if (d.cut_bytes >= inf) return keep_captured("no cut of finite bytes (a bug of the recomputation rules)");
  const std::vector<char> sink_side = net.reaching_sink();

  // The values the cut names, and the nodes that remake the others: from what the backward reads,
  // through the inputs of each recomputed node.
  std::vector<char> seen(nv, 0), recompute(nn, 0);
  std::vector<int> stack(needed.rbegin(), needed.rend());
  for (int v : needed) seen[v] = 1;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    TS_CHECK(sink_side[out_of(v)], ValueError, "partition: value %", v, " is needed but off the cut's sink side");
    if (!sink_side[in_of(v)]) {  // its edge is cut: saved
      d.saved.push_back(v);
      continue;
    }
    auto need = [&](int u) {
      if (u >= 0 && !seen[u]) {
        seen[u] = 1;
        stack.push_back(u);
      }
    };
    if (const int k = remake_of_value[v]; k >= 0) {
      TS_CHECK(sink_side[remake_vertex(k)], ValueError, "partition: value %", v, " is neither saved nor remade");
      d.remade.push_back(remakes[k]);
      need(remakes[k].from);
      continue;
    }
    const int def = forward.values[v].node;
    TS_CHECK(def >= 0 && sink_side[node_of(def)] && recomputable(rules[def]), ValueError, "partition: value %", v,
             " is neither saved nor recomputable by the cut");
    if (recompute[def]) continue;
    recompute[def] = 1;
    for (int u : forward.nodes[def].inputs) need(u);
  }
  std::sort(d.remade.begin(), d.remade.end(),
            [](const RemadeOutput& a, const RemadeOutput& b) { return a.value < b.value; });
  std::sort(d.saved.begin(), d.saved.end());
  for (int i = 0; i < nn; ++i)
    if (recompute[i]) d.recomputed.push_back(i);
  d.saved_bytes = saved_storage_bytes(forward, d.saved);
  if (d.saved_bytes > d.eager_saved_bytes) {
    const int64_t cut = d.saved_bytes;
    keep_captured("the cut keeps " + std::to_string(cut) + " bytes, more than the captured saved values' " +
                  std::to_string(d.eager_saved_bytes));
    return d;
  }
  std::vector<int> captured_set = captured;
  std::sort(captured_set.begin(), captured_set.end());
  captured_set.erase(std::unique(captured_set.begin(), captured_set.end()), captured_set.end());
  d.changed = !d.recomputed.empty() || !d.remade.empty() || d.saved != captured_set ||
              captured_set.size() != captured.size();
  return d;
}

PartitionDecision partition_joint_graph(Graph& forward, int num_program_outputs, Graph& backward) {
  PartitionDecision d = choose_saved_values(forward, num_program_outputs, backward);
  if (!d.changed) return d;
  apply_partition(forward, num_program_outputs, backward, d);
  return d;
}

}  // namespace tessera::compiler
