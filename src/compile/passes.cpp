// The passes before fusion (passes.h).
//
// Note [Passes before fusion]
// Common subexpressions: two nodes are the same computation when their op, inputs (after the merges
// before them), attributes (OpAttrs: comparable and hashable, Note [Typed attributes]) and output
// layouts are equal. A node is merged only when
//   - it has no side effect (no in-place write to an existing tensor, no out= write, no random draw:
//     two dropout masks are two draws);
//   - nothing writes any of its outputs afterwards, directly or through a view: a buffer filled twice
//     and then written in place is two buffers;
//   - its outputs are not the program's outputs: the program returned distinct tensors, and a caller
//     that writes one must not see the other change (a backward graph's outputs are gradients of
//     distinct inputs, which autograd accumulates in place). A joint forward's saved values may merge.
// The joint graph's backward (Note [Joint graph]) recomputes what the forward had (the derivative of
// x * y reads x * y again); these merges remove that work.
// Constant folding: only scalars are folded. A graph constant (a tensor the program reached that
// existed before the capture) is read as it is at each call (Note [Capture provenance]), so a node
// reading one is not a constant; a scalar literal is, and a pointwise node of literals is computed
// now by its own eager kernel, which gives the value the call would have computed.
#include "compile/passes.h"

#include <unordered_map>

#include "compile/decompose.h"
#include "compile/fusion.h"
#include "compile/node_runner.h"
#include "compile/verify.h"
#include "tessera/functions.h"

namespace tessera::compiler {
namespace {

// Values written after they are made: input 0 of an in-place or out= node, and the bases of the views
// it is written through.
std::vector<char> written_values(const Graph& g) {
  std::vector<char> written(g.values.size(), 0);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    const OpKind kind = op_info(n.op).kind;
    if ((kind == OpKind::InPlace || kind == OpKind::Out) && !n.inputs.empty() && n.inputs[0] >= 0)
      written[n.inputs[0]] = 1;
    if (kind == OpKind::Out)
      for (int v : n.outputs) written[v] = 1;
    // A view of a written value: its base is written too (walked backwards, so chains of views pass).
    if (kind == OpKind::View && !n.inputs.empty() && n.inputs[0] >= 0)
      for (int v : n.outputs)
        if (written[v]) written[n.inputs[0]] = 1;
  }
  return written;
}

struct NodeKey {
  const Graph* g;
  const Node* n;
};
struct KeyHash {
  size_t operator()(const NodeKey& k) const {
    size_t h = static_cast<size_t>(k.n->op) * 1000003u;
    for (int v : k.n->inputs) h = h * 31u + static_cast<size_t>(v + 1);
    return h ^ (hash_value(k.n->attrs) << 1);
  }
};
struct KeyEq {
  bool operator()(const NodeKey& a, const NodeKey& b) const {
    if (a.n->op != b.n->op || a.n->inputs != b.n->inputs || a.n->outputs.size() != b.n->outputs.size()) return false;
    if (!(a.n->attrs == b.n->attrs)) return false;
    for (size_t k = 0; k < a.n->outputs.size(); ++k)
      if (!(a.g->values[a.n->outputs[k]].meta == b.g->values[b.n->outputs[k]].meta)) return false;
    return true;
  }
};

}  // namespace

int eliminate_common_subexpressions(Graph& g, int distinct_outputs) {
  const std::vector<char> written = written_values(g);
  std::vector<char> is_output(g.values.size(), 0);
  const size_t distinct = distinct_outputs < 0 ? g.outputs.size() : static_cast<size_t>(distinct_outputs);
  for (size_t k = 0; k < g.outputs.size() && k < distinct; ++k) is_output[g.outputs[k]] = 1;
  std::vector<int> same(g.values.size());
  for (size_t v = 0; v < same.size(); ++v) same[v] = static_cast<int>(v);
  std::unordered_map<NodeKey, int, KeyHash, KeyEq> seen;
  int merged = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (int& v : n.inputs)
      if (v >= 0) v = same[v];
    bool candidate = !has_side_effects(n);
    for (int v : n.outputs) candidate = candidate && !written[v] && !is_output[v];
    if (!candidate) continue;
    auto [it, inserted] = seen.emplace(NodeKey{&g, &n}, static_cast<int>(i));
    if (inserted) continue;
    const Node& first = g.nodes[it->second];
    for (size_t k = 0; k < n.outputs.size(); ++k) same[n.outputs[k]] = first.outputs[k];
    ++merged;
  }
  for (int& v : g.outputs) v = same[v];
  if (merged > 0) eliminate_dead_code(g);
  return merged;
}

// Note [Private writes]: ResNet's blocks write their ReLUs and the residual add in place (Note
// [In-place activations] in resnet.cpp), which saves memory in eager mode; in a graph an in-place
// node has a side effect, which no fusion group spans. Where the written value is private to the
// graph (made by a functional node, aliased by no view, read by nobody after the write and not
// returned), the write and a functional op into a fresh buffer cannot be told apart, and the node
// becomes the functional op: the buffer planner of the executor reuses memory as eager did.
int functionalize_private_writes(Graph& g) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> last_reader(g.values.size(), -1);
  std::vector<char> viewed(g.values.size(), 0), is_output(g.values.size(), 0);
  for (int i = 0; i < n; ++i)
    for (int v : g.nodes[i].inputs)
      if (v >= 0) {
        last_reader[v] = i;
        if (op_info(g.nodes[i].op).kind == OpKind::View) viewed[v] = 1;
      }
  for (int v : g.outputs) is_output[v] = 1;
  int rewritten = 0;
  for (int i = 0; i < n; ++i) {
    Node& w = g.nodes[i];
    OpId twin;
    switch (w.op) {
      case OpId::relu_: twin = OpId::relu; break;
      case OpId::add_: twin = OpId::add; break;
      case OpId::sub_: twin = OpId::sub; break;
      case OpId::mul_: twin = OpId::mul; break;
      default: continue;
    }
    if (w.inputs.size() < 2 || w.inputs[0] < 0 || w.inputs[1] != w.inputs[0] || w.outputs.size() != 1) continue;
    const int y = w.inputs[0];
    const int maker = g.values[y].node;
    if (maker < 0 || op_info(g.nodes[maker].op).kind != OpKind::Functional) continue;
    if (viewed[y] || is_output[y] || last_reader[y] != i) continue;
    Node f = w;
    f.op = twin;
    f.inputs.erase(f.inputs.begin());
    std::vector<Tensor> ins;
    for (int v : f.inputs) ins.push_back(v >= 0 ? meta_tensor(g.values[v].meta) : Tensor());
    std::vector<Tensor> out;
    try {
      out = run_node(g, f, ins);
    } catch (const Error&) {
      continue;
    }
    const TensorMeta& want = g.values[w.outputs[0]].meta;
    if (out.size() != 1 || out[0].sizes() != want.sizes || out[0].dtype() != want.dtype || out[0].strides() != want.strides)
      continue;
    w = std::move(f);
    ++rewritten;
  }
  return rewritten;
}

int fold_scalar_constants(Graph& g) {
  int folded = 0;
  for (Node& n : g.nodes) {
    if (n.outputs.size() != 1 || !is_fusible(g, n) || op_info(n.op).family != OpFamily::Pointwise) continue;
    const TensorMeta& out = g.values[n.outputs[0]].meta;
    if (!out.sizes.empty() || !(out.device == kCPU)) continue;
    std::vector<Tensor> ins;
    bool all_literals = true;
    for (int v : n.inputs) {
      double x = 0;
      if (v < 0) {
        ins.emplace_back();
        continue;
      }
      all_literals = all_literals && scalar_literal(g, v, &x);
      if (!all_literals) break;
      ins.push_back(full({}, x, TensorOptions(g.values[v].meta.dtype)));
    }
    if (!all_literals) continue;
    const Tensor value = run_node(g, n, ins).at(0);
    if (!value.is_floating_point() && value.dtype() != kBool) continue;
    Node fill;
    fill.op = OpId::fill_;
    fill.inputs = {-1};
    fill.outputs = n.outputs;
    fill.attrs.scalars = {Scalar(value.to(kFloat64).item<double>())};
    n = std::move(fill);
    ++folded;
  }
  if (folded > 0) eliminate_dead_code(g);
  return folded;
}

// Note [Unread saved outputs]: the fused MLP ops keep for their backward what it needs, the GELU's
// pre-activation (linear_gelu) and the GELU's output too (mlp_gelu), and on CUDA their GEMM writes the
// pre-activation from its epilogue (GELU_AUX: 2 bytes more per element of the wide layer, ~0.25 ms of
// GPT-2 124M's inference at 16 x 1024). A captured node lists them as outputs, so the joint graph's
// backward can read them. Where no node reads them and the graph does not return them (an inference
// graph), they are dropped from the node, and its replay (node_runner.cpp) runs the op without them.
int drop_unread_saved_outputs(Graph& g) {
  std::vector<char> read(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (int v : n.inputs)
      if (v >= 0) read[v] = 1;
  for (int v : g.outputs) read[v] = 1;
  int shrunk = 0;
  for (Node& n : g.nodes) {
    if ((n.op != OpId::linear_gelu && n.op != OpId::mlp_gelu) || n.outputs.size() < 2) continue;
    bool unread = true;
    for (size_t k = 1; k < n.outputs.size(); ++k) unread = unread && !read[n.outputs[k]];
    if (!unread) continue;
    n.outputs.resize(1);
    ++shrunk;
  }
  if (shrunk > 0) eliminate_dead_code(g);  // renumbers the values, the dropped ones gone
  return shrunk;
}

bool run_codegen_passes(Graph& g, int distinct_outputs) {
  int changed = drop_unread_saved_outputs(g);
  changed += fold_scalar_constants(g);
  changed += eliminate_common_subexpressions(g, distinct_outputs);
  changed += functionalize_private_writes(g);
  changed += decompose_for_fusion(g);
  changed += eliminate_common_subexpressions(g, distinct_outputs);
  if (changed > 0) verify_graph(g);
  return changed > 0;
}

}  // namespace tessera::compiler
