// Graph basics (graph.h): tensor metadata, values, side effects and dead-code elimination.
#include "compile/graph.h"

#include <string>

namespace tessera::compiler {

TensorMeta TensorMeta::of(const Tensor& t) {
  TensorMeta m;
  m.sizes = t.sizes();
  m.strides = t.strides();
  m.offset = t.storage_offset();
  m.dtype = t.dtype();
  m.device = t.device();
  m.requires_grad = t.requires_grad();
  return m;
}

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t TensorMeta::span_bytes() const {
  if (numel() == 0) return 0;
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
  return (last + 1) * static_cast<int64_t>(element_size(dtype));
}

std::string to_string(const TensorMeta& m) {
  auto ints = [](const Shape& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
  };
  std::string s = std::string(dtype_name(m.dtype)) + "[" + ints(m.sizes) + "]{" + ints(m.strides) + "}+" +
                  std::to_string(m.offset) + "@" + m.device.str();
  if (m.requires_grad) s += ":grad";
  return s;
}

const char* input_kind_name(InputKind k) {
  switch (k) {
    case InputKind::Argument: return "arg";
    case InputKind::Parameter: return "param";
    case InputKind::Constant: return "const";
    case InputKind::Saved: return "saved";
  }
  return "?";
}

int Graph::add_value(const TensorMeta& meta, int node, int output_index) {
  values.push_back(Value{meta, node, output_index});
  return static_cast<int>(values.size()) - 1;
}

bool has_side_effects(const Node& n) {
  const OpInfo& info = op_info(n.op);
  if (info.family == OpFamily::Random || info.kind == OpKind::Out) return true;
  // An in-place op on a fresh buffer (input 0 absent: a scalar operand's fill_, say) writes only its
  // own output.
  return info.kind == OpKind::InPlace && !n.inputs.empty() && n.inputs[0] >= 0;
}

int eliminate_dead_code(Graph& g) {
  std::vector<char> used(g.values.size(), 0);
  for (int v : g.outputs) used[v] = 1;
  std::vector<char> keep(g.nodes.size(), 0);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool live = has_side_effects(n);
    for (int v : n.outputs) live = live || used[v];
    if (!live) continue;
    keep[i] = 1;
    for (int v : n.inputs)
      if (v >= 0) used[v] = 1;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
  const int removed = static_cast<int>(g.nodes.size() - kept.size());
  g.nodes = std::move(kept);
  // Renumber the values densely: inputs first, then each node's outputs in order.
  std::vector<int> renum(g.values.size(), -1);
  std::vector<Value> values;
  for (GraphInput& in : g.inputs) {
    renum[in.value] = static_cast<int>(values.size());
    values.push_back(Value{g.values[in.value].meta, -1, 0});
    in.value = renum[in.value];
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (int& v : n.inputs)
      if (v >= 0) v = renum[v];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const int old = n.outputs[k];
      renum[old] = static_cast<int>(values.size());
      values.push_back(Value{g.values[old].meta, static_cast<int>(i), static_cast<int>(k)});
      n.outputs[k] = renum[old];
    }
  }
  for (int& v : g.outputs) v = renum[v];
  g.values = std::move(values);
  return removed;
}

}  // namespace tessera::compiler
