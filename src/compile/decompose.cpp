// The decompositions (decompose.h).
//
// Note [Decompositions]
// A decomposition is a C++ function of tessera ops, like a derivative: it is captured (capture.h) on
// meta tensors with the node's input layouts, which records its primitives with the attributes the
// capture gives them and computes no data, and the captured nodes replace the node. The rewrite is
// kept only where it is exact in meaning and useful:
//   - each output of the captured function has the node's output's sizes, dtype and strides;
//   - every captured node is fusible (fusion.h): a reduction the fusion pass would leave to the eager
//     kernels (a few long rows, Note [Reduction groups]) keeps the node's tuned kernel instead.
// 16-bit inputs are computed in float32, as the eager kernels do: the cast to float32 and back are
// nodes of the decomposition (copy_ into a fresh buffer, which the kernels compute as a conversion).
// The statistics that layer norm saves for its backward (mean, rstd) stay outputs: the backward graph
// reads them.
#include "compile/decompose.h"

#include <functional>
#include <optional>

#include "compile/capture.h"
#include "compile/fusion.h"
#include "compile/node_runner.h"
#include "tessera/functions.h"

namespace tessera::compiler {
namespace {

bool is_16bit(DType d) { return d == kFloat16 || d == kBFloat16; }
Tensor compute(const Tensor& x) { return is_16bit(x.dtype()) ? x.to(kFloat32) : x; }

// The trailing `k` dims of a rank-`rank` tensor.
std::vector<int64_t> trailing(size_t k, int64_t rank) {
  std::vector<int64_t> d;
  for (int64_t i = rank - static_cast<int64_t>(k); i < rank; ++i) d.push_back(i);
  return d;
}

using Decomposition = std::function<std::vector<Tensor>(const std::vector<Tensor>& in)>;

// The decomposition of node n over its present inputs, if it has one.
std::optional<Decomposition> decomposition(const Graph& g, const Node& n) {
  const DType out = g.values[n.outputs[0]].meta.dtype;
  switch (n.op) {
    case OpId::softmax:
    case OpId::log_softmax: {
      if (n.attrs.ints.empty()) return std::nullopt;
      const int64_t dim = n.attrs.ints[0];
      const bool log = n.op == OpId::log_softmax;
      return [dim, log, out](const std::vector<Tensor>& in) {
        const Tensor x = compute(in[0]);
        const Tensor shifted = x - x.amax({dim}, true);
        const Tensor e = shifted.exp();
        const Tensor y = log ? shifted - e.sum({dim}, true).log() : e / e.sum({dim}, true);
        return std::vector<Tensor>{y.to(out)};
      };
    }
    case OpId::native_layer_norm: {
      const NormAttrs& a = n.attrs.as<NormAttrs>();
      const size_t k = a.normalized_shape.size();
      const double eps = a.eps;
      const bool has_w = n.inputs.size() > 1 && n.inputs[1] >= 0, has_b = n.inputs.size() > 2 && n.inputs[2] >= 0;
      return [k, eps, has_w, has_b, out](const std::vector<Tensor>& in) {
        const Tensor x = compute(in[0]);
        const std::vector<int64_t> dims = trailing(k, x.dim());
        const Tensor mean = x.mean(dims, true);
        const Tensor d = x - mean;
        const Tensor rstd = ((d * d).mean(dims, true) + eps).rsqrt();
        Tensor y = d * rstd;
        size_t next = 1;
        if (has_w) y = y * compute(in[next++]);
        if (has_b) y = y + compute(in[next++]);
        return std::vector<Tensor>{y.to(out), mean, rstd};
      };
    }
    case OpId::native_rms_norm: {
      const NormAttrs& a = n.attrs.as<NormAttrs>();
      const size_t k = a.normalized_shape.size();
      const double eps = a.eps;
      const bool has_w = n.inputs.size() > 1 && n.inputs[1] >= 0;
      return [k, eps, has_w, out](const std::vector<Tensor>& in) {
        const Tensor x = compute(in[0]);
        const Tensor rstd = ((x * x).mean(trailing(k, x.dim()), true) + eps).rsqrt();
        Tensor y = x * rstd;
        if (has_w) y = y * compute(in[1]);
        return std::vector<Tensor>{y.to(out), rstd};
      };
    }
    default:
      return std::nullopt;
  }
}

bool same_layout(const TensorMeta& a, const TensorMeta& b) {
  if (a.sizes != b.sizes || a.dtype != b.dtype) return false;
  for (size_t d = 0; d < a.sizes.size(); ++d)
    if (a.sizes[d] > 1 && a.strides[d] != b.strides[d]) return false;
  return true;
}

// Appends the decomposition of node n (of g) to h, its inputs read through `map`; false (and h as it
// was) where the rewrite is not kept.
bool splice(const Graph& g, const Node& n, const Decomposition& fn, Graph& h, std::vector<int>& map) {
  std::vector<int> present;
  std::vector<Tensor> args;
  for (int v : n.inputs)
    if (v >= 0) {
      present.push_back(map[v]);
      args.push_back(meta_tensor(g.values[v].meta));
    }
  CaptureResult r;
  try {
    r = capture_program(args, {}, [&] { return fn(args); });
  } catch (const Error&) {
    return false;
  }
  if (!r.complete || r.graph.outputs.size() != n.outputs.size()) return false;
  const Device device = g.values[n.outputs[0]].meta.device;
  const size_t nodes0 = h.nodes.size(), values0 = h.values.size();
  std::vector<int> sub(r.graph.values.size(), -1);
  for (const GraphInput& in : r.graph.inputs) {
    if (in.kind != InputKind::Argument) return false;  // a constant: not a function of the inputs
    sub[in.value] = present.at(static_cast<size_t>(in.index));
  }
  bool fusible = true;
  for (const Node& s : r.graph.nodes) {
    Node c = s;
    for (int& v : c.inputs)
      if (v >= 0) v = sub[v];
    c.outputs.clear();
    const int id = static_cast<int>(h.nodes.size());
    for (size_t k = 0; k < s.outputs.size(); ++k) {
      TensorMeta m = r.graph.values[s.outputs[k]].meta;
      if (m.device == kMeta) m.device = device;
      m.requires_grad = false;
      sub[s.outputs[k]] = h.add_value(m, id, static_cast<int>(k));
      c.outputs.push_back(sub[s.outputs[k]]);
    }
    h.nodes.push_back(std::move(c));
    fusible = fusible && (is_fusible(h, h.nodes.back()) || scalar_literal(h, h.nodes.back().outputs[0]));
  }
  bool ok = fusible;
  for (size_t k = 0; ok && k < n.outputs.size(); ++k) {
    const int v = sub[r.graph.outputs[k]];
    ok = v >= static_cast<int>(values0) && same_layout(h.values[v].meta, g.values[n.outputs[k]].meta);
  }
  if (!ok) {
    h.nodes.resize(nodes0);
    h.values.resize(values0);
    return false;
  }
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const int v = sub[r.graph.outputs[k]];
    h.values[v].meta.requires_grad = g.values[n.outputs[k]].meta.requires_grad;
    map[n.outputs[k]] = v;
  }
  return true;
}

}  // namespace

int decompose_for_fusion(Graph& g) {
  bool any = false;
  for (const Node& n : g.nodes) any = any || decomposition(g, n).has_value();
  if (!any) return 0;
  Graph h;
  std::vector<int> map(g.values.size(), -1);
  for (const GraphInput& in : g.inputs) {
    GraphInput c = in;
    c.value = h.add_value(g.values[in.value].meta);
    map[in.value] = c.value;
    h.inputs.push_back(std::move(c));
  }
  int rewritten = 0;
  for (const Node& n : g.nodes) {
    if (std::optional<Decomposition> fn = decomposition(g, n); fn && splice(g, n, *fn, h, map)) {
      ++rewritten;
      continue;
    }
    Node c = n;
    for (int& v : c.inputs)
      if (v >= 0) v = map[v];
    const int id = static_cast<int>(h.nodes.size());
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      c.outputs[k] = h.add_value(g.values[n.outputs[k]].meta, id, static_cast<int>(k));
      map[n.outputs[k]] = c.outputs[k];
    }
    h.nodes.push_back(std::move(c));
  }
  for (int v : g.outputs) h.outputs.push_back(map[v]);
  if (rewritten > 0) g = std::move(h);
  return rewritten;
}

}  // namespace tessera::compiler
