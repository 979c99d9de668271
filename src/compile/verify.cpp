// The verifier (verify.h).
#include "compile/verify.h"

#include <string>

#include "compile/node_runner.h"
#include "tessera/functions.h"

namespace tessera::compiler {
namespace {

std::string where(const Graph& g, size_t i) {
  return "node " + std::to_string(i) + " (" + op_name(g.nodes[i].op) + ")";
}

// Strides agree where they address anything: dims of size 1 (and empty tensors) may have any.
bool same_strides(const Tensor& got, const TensorMeta& want) {
  if (got.numel() == 0) return true;
  for (int64_t d = 0; d < got.dim(); ++d)
    if (got.size(d) > 1 && got.stride(d) != want.strides[d]) return false;
  return true;
}

}  // namespace

VerifyReport verify_graph(const Graph& g, bool reinfer) {
  VerifyReport r;
  const int nv = static_cast<int>(g.values.size());
  std::vector<char> defined(nv, 0);
  for (const GraphInput& in : g.inputs) {
    TS_CHECK(in.value >= 0 && in.value < nv, ValueError, "verify_graph: input names value %", in.value,
             ", which does not exist");
    TS_CHECK(!defined[in.value], ValueError, "verify_graph: value %", in.value, " is defined twice");
    TS_CHECK(g.values[in.value].node == -1, ValueError, "verify_graph: input value %", in.value,
             " claims to be defined by node ", g.values[in.value].node);
    defined[in.value] = 1;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const OpReplay* replay = op_replay(n.op);
    TS_CHECK(replay != nullptr, ValueError, "verify_graph: ", where(g, i), " is an op the executor cannot run");
    TS_CHECK(!n.outputs.empty(), ValueError, "verify_graph: ", where(g, i), " has no outputs");
    for (int v : n.inputs)
      TS_CHECK(v == -1 || (v >= 0 && v < nv && defined[v]), ValueError, "verify_graph: ", where(g, i),
               " reads %", v, ", which is not defined before it");
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const int v = n.outputs[k];
      TS_CHECK(v >= 0 && v < nv, ValueError, "verify_graph: ", where(g, i), " defines %", v, ", which does not exist");
      TS_CHECK(!defined[v], ValueError, "verify_graph: ", where(g, i), " defines %", v, ", defined already");
      TS_CHECK(g.values[v].node == static_cast<int>(i) && g.values[v].output_index == static_cast<int>(k),
               ValueError, "verify_graph: value %", v, " does not record ", where(g, i), " as its definition");
      defined[v] = 1;
    }
    ++r.nodes;
  }
  for (int v : g.outputs)
    TS_CHECK(v >= 0 && v < nv && defined[v], ValueError, "verify_graph: the graph returns %", v,
             ", which is not defined");
  if (!reinfer) return r;
  // What a node allocates (a fresh buffer, a factory's output) goes to the meta device too.
  Graph mg = g;
  for (Value& v : mg.values) v.meta.device = kMeta;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<Tensor> ins;
    for (int v : n.inputs) ins.push_back(v >= 0 ? meta_tensor(g.values[v].meta) : Tensor());
    std::vector<Tensor> outs;
    try {
      outs = run_node(mg, n, ins);
    } catch (const NotImplementedError&) {
      ++r.skipped;  // the op needs values to know its output
      continue;
    } catch (const Error& e) {
      TS_THROW(ValueError, "verify_graph: ", where(g, i), " raises on its recorded inputs: ", e.what());
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      const TensorMeta& want = g.values[n.outputs[k]].meta;
      const Tensor& got = outs[k];
      TS_CHECK(got.sizes() == want.sizes && got.dtype() == want.dtype, ValueError, "verify_graph: ", where(g, i),
               " output ", k, ": the meta function gives ", dtype_name(got.dtype()), got.sizes(), ", the graph says ",
               to_string(want));
      TS_CHECK(same_strides(got, want), ValueError, "verify_graph: ", where(g, i),
               " output ", k, ": the meta function gives strides ", got.strides(), ", the graph says ",
               to_string(want));
    }
    ++r.reinferred;
  }
  return r;
}

}  // namespace tessera::compiler
