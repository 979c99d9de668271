// The recomputation rules and saved-value costs of the min-cut partition (recompute_rules.h).
#include "compile/recompute_rules.h"

#include <algorithm>

namespace tessera::compiler {
namespace {

// Whether node n's output k shares the storage of its input 0: a view's outputs, and an in-place
// write's result where the write went to an existing tensor.
bool shares_input_storage(const Node& n) {
  const OpKind kind = op_info(n.op).kind;
  if (n.inputs.empty() || n.inputs[0] < 0) return false;
  return kind == OpKind::View || kind == OpKind::InPlace;
}

bool writes_input(const Node& n) {
  const OpKind kind = op_info(n.op).kind;
  return (kind == OpKind::InPlace || kind == OpKind::Out) && !n.inputs.empty() && n.inputs[0] >= 0;
}

// The ops saved whatever they cost (their results need data to know their shape, or they are the
// compute the partition exists to avoid repeating).
RecomputeRule rule_of_op(OpId op) {
  switch (op) {
    case OpId::nonzero:
    case OpId::masked_select:
    case OpId::unique:
    case OpId::repeat_interleave:
    case OpId::repeat_interleave_map:
      return RecomputeRule::DataDependent;
    case OpId::sort:
    case OpId::topk:
      return RecomputeRule::Expensive;
    case OpId::gelu_tanh_backward:  // a fused op, but pointwise
      return RecomputeRule::Cheap;
    default:
      break;
  }
  switch (op_info(op).family) {
    case OpFamily::Linalg:
    case OpFamily::Conv:
    case OpFamily::Attention:
    case OpFamily::Fused:      // linear + gelu, the fused MLP, linear + cross-entropy: matmuls inside
    case OpFamily::BatchNorm:  // statistics over the whole batch, and the running statistics it updates
    case OpFamily::Foreach:
      return RecomputeRule::Expensive;
    case OpFamily::Random:
      return RecomputeRule::Random;
    case OpFamily::Reduce:
    case OpFamily::Softmax:
    case OpFamily::Norm:
    case OpFamily::Pool:
    case OpFamily::Loss:
      return RecomputeRule::Reduction;  // refined by bytes
    default:
      return RecomputeRule::Cheap;  // Copy, View, Pointwise, Shape, Index, Factory
  }
}

}  // namespace

const char* recompute_rule_name(RecomputeRule r) {
  switch (r) {
    case RecomputeRule::Cheap: return "cheap";
    case RecomputeRule::Reduction: return "reduction";
    case RecomputeRule::Expensive: return "expensive";
    case RecomputeRule::SmallReduction: return "small reduction";
    case RecomputeRule::Random: return "random";
    case RecomputeRule::SideEffect: return "side effect";
    case RecomputeRule::Mutated: return "mutated";
    case RecomputeRule::DataDependent: return "data-dependent";
  }
  return "?";
}

AliasInfo alias_info(const Graph& g) {
  AliasInfo a;
  a.root.resize(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) a.root[v] = static_cast<int>(v);
  a.mutated.assign(g.values.size(), 0);
  std::vector<char> root_written(g.values.size(), 0);
  for (const Node& n : g.nodes) {
    if (shares_input_storage(n))
      for (int v : n.outputs) a.root[v] = a.root[n.inputs[0]];
    if (writes_input(n)) {
      root_written[a.root[n.inputs[0]]] = 1;
      if (op_info(n.op).kind == OpKind::Out)
        for (int v : n.outputs) root_written[a.root[v]] = 1;
    }
  }
  for (size_t v = 0; v < g.values.size(); ++v) a.mutated[v] = root_written[a.root[v]];
  return a;
}

std::vector<RecomputeRule> recompute_rules(const Graph& g, const AliasInfo& alias) {
  std::vector<RecomputeRule> rules(g.nodes.size(), RecomputeRule::Cheap);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    RecomputeRule r = rule_of_op(n.op);
    if (r == RecomputeRule::Random) {
      rules[i] = r;
      continue;
    }
    if (has_side_effects(n)) {
      rules[i] = RecomputeRule::SideEffect;
      continue;
    }
    bool mutated = false;
    for (int v : n.inputs) mutated = mutated || (v >= 0 && alias.mutated[v]);
    for (int v : n.outputs) mutated = mutated || alias.mutated[v];
    if (mutated) {
      rules[i] = RecomputeRule::Mutated;
      continue;
    }
    if (r == RecomputeRule::Reduction) {
      int64_t in = 0, out = 0;
      for (int v : n.inputs)
        if (v >= 0) in += g.values[v].meta.span_bytes();
      for (int v : n.outputs) out += g.values[v].meta.span_bytes();
      if (out * 4 < in) r = RecomputeRule::SmallReduction;
    }
    rules[i] = r;
  }
  return rules;
}

std::vector<RemadeOutput> remade_outputs(const Graph& g, const std::vector<RecomputeRule>& rules) {
  std::vector<RemadeOutput> out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != OpId::mlp_gelu || n.outputs.size() != 3 || rules[i] == RecomputeRule::Mutated) continue;
    RemadeOutput r;
    r.value = n.outputs[2];
    r.from = n.outputs[1];
    r.op = OpId::gelu;
    r.attrs.str = "tanh";
    const TensorMeta &h = g.values[r.value].meta, &pre = g.values[r.from].meta;
    if (h.sizes != pre.sizes || h.strides != pre.strides || h.dtype != pre.dtype) continue;
    out.push_back(std::move(r));
  }
  return out;
}

int64_t storage_bytes(const Graph& g, const AliasInfo& alias, int value) {
  const int root = alias.root[value];
  if (g.values[root].node < 0) return 0;  // an input's storage, or a view of one
  return g.values[root].meta.span_bytes();
}

int64_t saved_storage_bytes(const Graph& g, const std::vector<int>& values) {
  const AliasInfo alias = alias_info(g);
  std::vector<int> roots;
  for (int v : values)
    if (g.values[alias.root[v]].node >= 0) roots.push_back(alias.root[v]);
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  int64_t bytes = 0;
  for (int r : roots) bytes += g.values[r].meta.span_bytes();
  return bytes;
}

}  // namespace tessera::compiler
