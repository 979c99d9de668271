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
    case OpId::native_layer_norm_backward: {
      // inputs (grad, x, mean, rstd, weight?, bias?); outputs the defined of (dx, dweight, dbias), by
      // the mask in ints.
      const NormAttrs& a = n.attrs.as<NormAttrs>();
      if (n.attrs.ints.size() != 3 || n.inputs.size() != 6) return std::nullopt;
      const size_t k = a.normalized_shape.size();
      const bool has_w = n.inputs[4] >= 0;
      const std::vector<int64_t> mask = n.attrs.ints;
      std::vector<DType> dtypes;
      for (int v : n.outputs) dtypes.push_back(g.values[v].meta.dtype);
      return [k, has_w, mask, dtypes](const std::vector<Tensor>& in) {
        const Tensor gf = compute(in[0]), x = compute(in[1]), mean = in[2], rstd = in[3];
        const std::vector<int64_t> dims = trailing(k, x.dim()), batch = trailing(x.dim() - k, x.dim() - k);
        const Tensor xhat = (x - mean) * rstd;
        const Tensor gw = has_w ? gf * compute(in[4]) : gf;
        std::vector<Tensor> out;
        if (mask[0]) out.push_back(((gw - gw.mean(dims, true)) - xhat * (gw * xhat).mean(dims, true)) * rstd);
        // sum over no dims would be over all of them (ReduceAttrs): without batch dims there is nothing to add.
        if (mask[1]) out.push_back(batch.empty() ? gf * xhat : (gf * xhat).sum(batch));
        if (mask[2]) out.push_back(batch.empty() ? gf : gf.sum(batch));
        for (size_t j = 0; j < out.size(); ++j) out[j] = out[j].to(dtypes.at(j));
        return out;
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

// Appends `fn` captured over the values `inputs` of g (absent ones skipped) to h, the inputs read
// through `map`, its outputs standing for the values `targets` of g; false (and h as it was) where
// the rewrite is not kept. `fusible`: every captured node must be one code generation computes.
// `same_layouts`: the outputs keep the targets' strides (false only where nothing reads them but the
// caller: Note [Padded classifier products]).
bool splice(const Graph& g, const std::vector<int>& inputs, const std::vector<int>& targets, const Decomposition& fn,
            bool fusible_only, Graph& h, std::vector<int>& map, bool same_layouts = true) {
  std::vector<int> present;
  std::vector<Tensor> args;
  for (int v : inputs)
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
  if (!r.complete || r.graph.outputs.size() != targets.size()) return false;
  const Device device = g.values[targets[0]].meta.device;
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
    // Views are metadata (a kernel reads through their strides); scalar literals are inside kernels.
    fusible = fusible && (is_fusible(h, h.nodes.back()) || scalar_literal(h, h.nodes.back().outputs[0]) ||
                          op_info(h.nodes.back().op).kind == OpKind::View);
  }
  bool ok = fusible || !fusible_only;
  for (size_t k = 0; ok && k < targets.size(); ++k) {
    const int v = sub[r.graph.outputs[k]];
    const TensorMeta &got = h.values[v].meta, &want = g.values[targets[k]].meta;
    ok = v >= static_cast<int>(values0) &&
         (same_layouts ? same_layout(got, want) : got.sizes == want.sizes && got.dtype == want.dtype);
  }
  if (!ok) {
    h.nodes.resize(nodes0);
    h.values.resize(values0);
    return false;
  }
  for (size_t k = 0; k < targets.size(); ++k) {
    const int v = sub[r.graph.outputs[k]];
    h.values[v].meta.requires_grad = g.values[targets[k]].meta.requires_grad;
    map[targets[k]] = v;
  }
  return true;
}

// Note [Conv and batch norm folding]: in inference, batch norm after a convolution is an affine map
// per output channel with constants of the call (running statistics, weight, bias), so it folds into
// the convolution: w' = w * s, b' = (b - mean) * s + beta with s = gamma / sqrt(var + eps), computed
// at each call from the graph's inputs (a few thousand elements: the parameters may change between
// calls; the activations, read and written once less, dominate). The pair folds when the
// convolution's output is read by the batch norm only, in eval mode, and nothing reads the batch
// norm's (empty) saved statistics. The result differs from eager by the rounding of w * s.
struct ConvBn {
  const Node* bn = nullptr;
  size_t bn_index = 0;
};
std::optional<ConvBn> conv_bn_pair(const Graph& g, size_t i, const std::vector<std::vector<int>>& users,
                                   const std::vector<char>& is_output) {
  const Node& conv = g.nodes[i];
  if (conv.op != OpId::conv2d || conv.outputs.size() != 1 || is_output[conv.outputs[0]]) return std::nullopt;
  const std::vector<int>& u = users[conv.outputs[0]];
  if (u.size() != 1) return std::nullopt;
  const Node& bn = g.nodes[u[0]];
  if (bn.op != OpId::native_batch_norm || bn.inputs.size() != 5 || bn.inputs[0] != conv.outputs[0]) return std::nullopt;
  const BatchNormAttrs* a = std::get_if<BatchNormAttrs>(&bn.attrs.typed);
  if (!a || a->training || bn.inputs[3] < 0 || bn.inputs[4] < 0) return std::nullopt;
  for (size_t k = 1; k < bn.outputs.size(); ++k)
    if (!users[bn.outputs[k]].empty() || is_output[bn.outputs[k]]) return std::nullopt;
  // A batch norm that a fusible op reads (a ReLU, a residual add) is better decomposed: it then runs
  // inside that op's kernel, with no launch of its own, where folding would add two (the scale and
  // bias, and w * s) and leave the ReLU alone.
  for (int u2 : users[bn.outputs[0]])
    if (is_fusible(g, g.nodes[u2])) return std::nullopt;
  const DType d = g.values[conv.outputs[0]].meta.dtype;
  if (d != kFloat32 && d != kFloat64) return std::nullopt;  // 16-bit weights would round w * s coarsely
  return ConvBn{&bn, static_cast<size_t>(u[0])};
}

// Batch norm in eval mode, a pointwise affine map per channel (dim 1): the running statistics, weight
// and bias are viewed as [1, C, 1, ...] and expanded to x's sizes, so that every node is over x's
// space and the whole map is one group with what reads it (the scale is recomputed per element: the
// kernel is memory-bound). Only where the saved statistics (empty in eval) are unused.
bool batch_norm_eval(const Graph& g, const Node& n, const std::vector<std::vector<int>>& users,
                     const std::vector<char>& is_output) {
  if (n.op != OpId::native_batch_norm || n.inputs.size() != 5 || n.inputs[3] < 0 || n.inputs[4] < 0) return false;
  const BatchNormAttrs* a = std::get_if<BatchNormAttrs>(&n.attrs.typed);
  if (!a || a->training || g.values[n.inputs[0]].meta.sizes.size() < 2) return false;
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (!users[n.outputs[k]].empty() || is_output[n.outputs[k]]) return false;
  return true;
}

Decomposition batch_norm_eval_fn(const Graph& g, const Node& n) {
  const double eps = n.attrs.as<BatchNormAttrs>().eps;
  const bool has_w = n.inputs[1] >= 0, has_b = n.inputs[2] >= 0;
  const DType out = g.values[n.outputs[0]].meta.dtype;
  return [eps, has_w, has_b, out](const std::vector<Tensor>& in) {
    const Tensor x = compute(in[0]);
    auto channel = [&](const Tensor& t) {
      std::vector<int64_t> s(static_cast<size_t>(x.dim()), 1);
      s[1] = x.size(1);
      return compute(t).view(s).expand(x.sizes());
    };
    size_t k = 1;
    const Tensor w = has_w ? in[k++] : Tensor();
    const Tensor b = has_b ? in[k++] : Tensor();
    const Tensor mean = in[k++], var = in[k++];
    Tensor y = (x - channel(mean)) * (channel(var) + eps).rsqrt();
    if (has_w) y = y * channel(w);
    if (has_b) y = y + channel(b);
    return std::vector<Tensor>{y.to(out)};
  };
}

Decomposition fold_conv_bn(const Node& conv, const Node& bn) {
  const ConvAttrs c = conv.attrs.as<ConvAttrs>();
  const double eps = bn.attrs.as<BatchNormAttrs>().eps;
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
  const bool has_gamma = bn.inputs[1] >= 0, has_beta = bn.inputs[2] >= 0;
  return [c, eps, has_bias, has_gamma, has_beta](const std::vector<Tensor>& in) {
    size_t k = 0;
    const Tensor x = in[k++], w = in[k++];
    const Tensor b = has_bias ? in[k++] : Tensor();
    const Tensor gamma = has_gamma ? in[k++] : Tensor();
    const Tensor beta = has_beta ? in[k++] : Tensor();
    const Tensor mean = in[k++], var = in[k++];
    Tensor s = (var + eps).rsqrt();
    if (has_gamma) s = s * gamma;
    Tensor bias = ((has_bias ? b - mean : mean.neg()) * s);
    if (has_beta) bias = bias + beta;
    const Tensor wf = w * s.view({-1, 1, 1, 1});
    return std::vector<Tensor>{conv2d(x, wf, bias, {c.stride.h, c.stride.w}, {c.padding.h, c.padding.w},
                                      {c.dilation.h, c.dilation.w}, c.groups)};
  };
}

// Note [Padded classifier products]: a 16-bit product whose output has a ragged number of columns (GPT-2's
// 50257 classes) is one cuBLASLt runs on its fast kernels only if it is staged through padded buffers
// (Note [Aligned GEMM staging] in kernels/cuda/matmul_lt.cpp), and the staged result is copied back:
// for GPT-2's logits over 16 x 1024 tokens, 3.3 GB moved, 1.9 ms on an H200 beside a 1.8 ms product.
// Where the product's output is only returned (a graph output nothing else reads, outside autograd),
// the compiled graph instead multiplies by the weight padded with zero rows to a whole number of
// 16-byte vectors and returns the first N columns of the padded result: the same values, in a row
// stride of the padded width (Inductor's padded matmul outputs do the same), and no copy. On CUDA only,
// and where the product does enough work per byte for the staging to have been taken (K >= 512). The
// result is not contiguous: flattening it with view() raises as for any such tensor; reshape() and
// contiguous() make the copy that this skips.
std::optional<int64_t> padded_columns(const Graph& g, const Node& n, const std::vector<std::vector<int>>& users,
                                      const std::vector<char>& is_output) {
  if (n.op != OpId::linear || n.outputs.size() != 1 || n.inputs.size() < 2 || n.inputs[1] < 0) return std::nullopt;
  const int out = n.outputs[0];
  const TensorMeta& y = g.values[out].meta;
  if (!is_output[out] || !users[out].empty() || y.requires_grad || !y.device.is_cuda() || !is_16bit(y.dtype))
    return std::nullopt;
  const TensorMeta& w = g.values[n.inputs[1]].meta;
  if (w.sizes.size() != 2) return std::nullopt;
  const int64_t cols = w.sizes[0], k = w.sizes[1], step = 8;  // 16 bytes of a 16-bit type
  if (cols % step == 0 || k % step != 0 || k < 512) return std::nullopt;
  return (cols + step - 1) / step * step;
}

Decomposition padded_linear_fn(int64_t cols, int64_t padded, bool has_bias) {
  return [cols, padded, has_bias](const std::vector<Tensor>& in) {
    const Tensor& w = in[1];
    const TensorOptions o(w.dtype(), w.device());
    const Tensor wp = cat(std::vector<Tensor>{w, zeros({padded - cols, w.size(1)}, o)}, 0);
    std::optional<Tensor> bp;
    if (has_bias) bp = cat(std::vector<Tensor>{in[2], zeros({padded - cols}, o)}, 0);
    return std::vector<Tensor>{linear(in[0], wp, bp).narrow(-1, 0, cols)};
  };
}

}  // namespace

int decompose_for_fusion(Graph& g) {
  bool any = false;
  for (const Node& n : g.nodes)
    any = any || decomposition(g, n).has_value() || n.op == OpId::conv2d || n.op == OpId::native_batch_norm ||
          n.op == OpId::linear;
  if (!any) return 0;
  Graph h;
  std::vector<int> map(g.values.size(), -1);
  for (const GraphInput& in : g.inputs) {
    GraphInput c = in;
    c.value = h.add_value(g.values[in.value].meta);
    map[in.value] = c.value;
    h.inputs.push_back(std::move(c));
  }
  std::vector<std::vector<int>> users(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].inputs)
      if (v >= 0) users[v].push_back(static_cast<int>(i));
  std::vector<char> is_output(g.values.size(), 0), folded(g.nodes.size(), 0);
  for (int v : g.outputs) is_output[v] = 1;
  int rewritten = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (folded[i]) continue;  // a batch norm folded into its convolution
    if (std::optional<ConvBn> p = conv_bn_pair(g, i, users, is_output)) {
      std::vector<int> ins = n.inputs;
      ins.resize(3, -1);
      ins.insert(ins.end(), p->bn->inputs.begin() + 1, p->bn->inputs.end());
      if (splice(g, ins, {p->bn->outputs[0]}, fold_conv_bn(n, *p->bn), /*fusible_only=*/false, h, map)) {
        folded[p->bn_index] = 1;
        ++rewritten;
        continue;
      }
    }
    if (std::optional<int64_t> padded = padded_columns(g, n, users, is_output)) {
      const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
      const int64_t cols = g.values[n.inputs[1]].meta.sizes[0];
      if (splice(g, n.inputs, n.outputs, padded_linear_fn(cols, *padded, has_bias), /*fusible_only=*/false, h, map,
                 /*same_layouts=*/false)) {
        ++rewritten;
        continue;
      }
    }
    if (batch_norm_eval(g, n, users, is_output) &&
        splice(g, n.inputs, {n.outputs[0]}, batch_norm_eval_fn(g, n), /*fusible_only=*/true, h, map)) {
      ++rewritten;
      continue;
    }
    if (std::optional<Decomposition> fn = decomposition(g, n); fn && splice(g, n.inputs, n.outputs, *fn, true, h, map)) {
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
