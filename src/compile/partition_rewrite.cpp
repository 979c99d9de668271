// The min-cut partition's rewrite (partition.h, Note [Min-cut partition]): the forward returns the
// chosen values, and the backward reads them and recomputes the rest just before its first use.
#include <algorithm>
#include <utility>

#include "compile/partition.h"

namespace tessera::compiler {

void apply_partition(Graph& forward, int num_program_outputs, Graph& backward, const PartitionDecision& d) {
  if (!d.changed || !d.declined.empty()) return;
  const int nfv = static_cast<int>(forward.values.size());
  std::vector<char> recomputed(forward.nodes.size(), 0);
  for (int i : d.recomputed) recomputed.at(i) = 1;

  Graph b;
  std::vector<int> from_forward(nfv, -1);         // forward value -> its value in the new backward
  std::vector<int> old_to_new(backward.values.size(), -1);
  std::vector<int> saved_source(backward.values.size(), -1);  // old Saved input -> the forward value
  std::vector<const TensorMeta*> saved_meta(nfv, nullptr);    // as the backward captured it
  for (const GraphInput& in : backward.inputs) {
    if (in.kind == InputKind::Saved) {
      const int fv = forward.outputs.at(static_cast<size_t>(num_program_outputs) + static_cast<size_t>(in.index));
      saved_source[in.value] = fv;
      if (!saved_meta[fv]) saved_meta[fv] = &backward.values[in.value].meta;
      continue;
    }
    GraphInput copy = in;
    copy.value = b.add_value(backward.values[in.value].meta);
    old_to_new[in.value] = copy.value;
    b.inputs.push_back(std::move(copy));
  }
  for (size_t k = 0; k < d.saved.size(); ++k) {
    const int fv = d.saved[k];
    GraphInput in;
    in.kind = InputKind::Saved;
    in.index = static_cast<int64_t>(k);
    in.value = b.add_value(saved_meta[fv] ? *saved_meta[fv] : forward.values[fv].meta);
    from_forward[fv] = in.value;
    b.inputs.push_back(std::move(in));
  }

  // Copies into `b` what `fv` needs and `b` lacks: recomputed nodes and remade outputs (Note [Remade
  // outputs]), in forward order (a remade output right after the node it stands for).
  std::vector<int> remake_of(nfv, -1);
  for (size_t k = 0; k < d.remade.size(); ++k) remake_of.at(d.remade[k].value) = static_cast<int>(k);
  std::vector<char> emitted(forward.nodes.size(), 0), remade(d.remade.size(), 0);
  auto add_node = [&](OpId op, const OpAttrs& attrs, const std::vector<int>& forward_inputs,
                      const std::vector<int>& forward_outputs) {
    Node n;
    n.op = op;
    n.attrs = attrs;
    for (int u : forward_inputs) n.inputs.push_back(u >= 0 ? from_forward.at(u) : -1);
    const int at = static_cast<int>(b.nodes.size());
    for (size_t k = 0; k < forward_outputs.size(); ++k) {
      const int v = b.add_value(forward.values[forward_outputs[k]].meta, at, static_cast<int>(k));
      n.outputs.push_back(v);
      from_forward[forward_outputs[k]] = v;
    }
    b.nodes.push_back(std::move(n));
  };
  auto materialize = [&](int fv) {
    if (from_forward[fv] >= 0) return from_forward[fv];
    std::vector<std::pair<int, int>> pending;  // (forward node, -1) or (its node, remade index)
    std::vector<int> stack{fv};
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      if (from_forward[v] >= 0) continue;
      const int def = forward.values[v].node;
      if (const int k = remake_of[v]; k >= 0) {
        if (remade[k]) continue;
        remade[k] = 1;
        pending.emplace_back(def, k);
        stack.push_back(d.remade[k].from);
        continue;
      }
      TS_CHECK(def >= 0 && recomputed[def], ValueError, "partition: the backward reads forward value %", v,
               ", which is neither saved nor recomputed");
      if (emitted[def]) continue;
      emitted[def] = 1;
      pending.emplace_back(def, -1);
      for (int u : forward.nodes[def].inputs)
        if (u >= 0) stack.push_back(u);
    }
    std::sort(pending.begin(), pending.end());
    for (auto [node, k] : pending) {
      if (k < 0) {
        const Node& src = forward.nodes[node];
        add_node(src.op, src.attrs, src.inputs, src.outputs);
      } else {
        const RemadeOutput& r = d.remade[k];
        add_node(r.op, r.attrs, {r.from}, {r.value});
      }
    }
    TS_CHECK(from_forward[fv] >= 0, ValueError, "partition: forward value %", fv, " was not recomputed");
    return from_forward[fv];
  };
  auto value_of = [&](int old) {
    if (old < 0) return -1;
    if (saved_source[old] >= 0) return materialize(saved_source[old]);
    TS_CHECK(old_to_new[old] >= 0, ValueError, "partition: backward value %", old, " is read before it is made");
    return old_to_new[old];
  };
  for (const Node& src : backward.nodes) {
    Node n;
    n.op = src.op;
    n.attrs = src.attrs;
    for (int u : src.inputs) n.inputs.push_back(value_of(u));
    const int at = static_cast<int>(b.nodes.size());
    for (size_t k = 0; k < src.outputs.size(); ++k) {
      const int v = b.add_value(backward.values[src.outputs[k]].meta, at, static_cast<int>(k));
      n.outputs.push_back(v);
      old_to_new[src.outputs[k]] = v;
    }
    b.nodes.push_back(std::move(n));
  }
  for (int v : backward.outputs) b.outputs.push_back(value_of(v));
  eliminate_dead_code(b);
  backward = std::move(b);

  forward.outputs.resize(static_cast<size_t>(num_program_outputs));
  forward.outputs.insert(forward.outputs.end(), d.saved.begin(), d.saved.end());
  eliminate_dead_code(forward);
}

}  // namespace tessera::compiler
