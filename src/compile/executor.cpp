// The eager-backend executor and its plan (executor.h).
#include "compile/executor.h"

#include <algorithm>

#include "compile/node_runner.h"

namespace tessera::compiler {
namespace {

// Whether a node's output k has storage of its own (a view shares its input's; an in-place result is
// its input 0 unless that input was a fresh buffer).
bool owns_storage(const Node& n, size_t k) {
  const OpKind kind = op_info(n.op).kind;
  if (kind == OpKind::View) return false;
  if (kind == OpKind::InPlace) return k == 0 && !n.inputs.empty() && n.inputs[0] < 0;
  return true;
}

}  // namespace

ExecutionPlan plan_execution(const Graph& g) {
  ExecutionPlan p;
  const int end = static_cast<int>(g.nodes.size());
  p.last_use.assign(g.values.size(), -1);
  for (int i = 0; i < end; ++i)
    for (int v : g.nodes[i].inputs)
      if (v >= 0) p.last_use[v] = std::max(p.last_use[v], i);
  for (int v : g.outputs) p.last_use[v] = end;
  // A view keeps its base's storage alive: the base lives as long as its longest-lived view.
  for (int i = end - 1; i >= 0; --i) {
    const Node& n = g.nodes[i];
    const OpKind kind = op_info(n.op).kind;
    if ((kind == OpKind::View || kind == OpKind::InPlace) && !n.inputs.empty() && n.inputs[0] >= 0)
      for (int o : n.outputs) p.last_use[n.inputs[0]] = std::max(p.last_use[n.inputs[0]], p.last_use[o]);
  }
  std::vector<int64_t> delta(end + 2, 0);
  for (int i = 0; i < end; ++i) {
    const Node& n = g.nodes[i];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (!owns_storage(n, k)) continue;
      const int v = n.outputs[k];
      const int64_t bytes = g.values[v].meta.span_bytes();
      p.memory.total_bytes += bytes;
      ++p.memory.buffers;
      delta[i] += bytes;
      delta[std::max(p.last_use[v], i) + 1] -= bytes;
    }
  }
  int64_t live = 0;
  for (int i = 0; i <= end; ++i) {
    live += delta[i];
    p.memory.peak_bytes = std::max(p.memory.peak_bytes, live);
  }
  p.replay.resize(end);
  p.output_meta.resize(end);
  p.release_after.resize(end);
  for (int i = 0; i < end; ++i) {
    const Node& n = g.nodes[i];
    p.replay[i] = op_replay(n.op);
    TS_CHECK(p.replay[i] != nullptr, NotImplementedError, "compile: the graph holds ", op_name(n.op),
             ", which the executor cannot run");
    for (int v : n.outputs) p.output_meta[i].push_back(g.values[v].meta);
    // Intermediates only: the graph's inputs stay the caller's.
    for (int v : n.inputs)
      if (v >= 0 && p.last_use[v] == i && g.values[v].node >= 0 &&
          std::find(p.release_after[i].begin(), p.release_after[i].end(), v) == p.release_after[i].end())
        p.release_after[i].push_back(v);
  }
  return p;
}

std::vector<Tensor> execute(const Graph& g, const ExecutionPlan& plan, const std::vector<Tensor>& args,
                            const NamedTensors& params, const std::vector<Tensor>& saved) {
  std::vector<Tensor> vals(g.values.size());
  for (const GraphInput& in : g.inputs) {
    switch (in.kind) {
      case InputKind::Argument:
        vals[in.value] = args.at(static_cast<size_t>(in.index));
        break;
      case InputKind::Parameter:
        vals[in.value] = params.at(static_cast<size_t>(in.index)).second;
        break;
      case InputKind::Saved:
        vals[in.value] = saved.at(static_cast<size_t>(in.index));
        break;
      case InputKind::Constant:
        TS_CHECK(in.constant.defined(), ValueError, "compile: the graph's constant %", in.value,
                 " has no data (a parsed graph cannot run)");
        vals[in.value] = in.constant;
        break;
    }
  }
  std::vector<Tensor> ins;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    ins.clear();
    for (int v : n.inputs) ins.push_back(v >= 0 ? vals[v] : Tensor());
    std::vector<Tensor> outs = plan.replay[i]->run(n.op, ins, n.attrs, plan.output_meta[i]);
    TS_CHECK(outs.size() == n.outputs.size(), ValueError, "compile: ", op_name(n.op), " returned ", outs.size(),
             " outputs, the graph expects ", n.outputs.size());
    for (size_t k = 0; k < outs.size(); ++k) vals[n.outputs[k]] = std::move(outs[k]);
    for (int v : plan.release_after[i]) vals[v] = Tensor();  // after their last reader
  }
  std::vector<Tensor> out;
  out.reserve(g.outputs.size());
  for (int v : g.outputs) out.push_back(vals[v]);
  return out;
}

}  // namespace tessera::compiler
