// The executor and its plan (executor.h).
#include "compile/executor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <queue>

#include "compile/codegen/compiled_kernels.h"
#include "compile/fusion.h"
#include "compile/node_runner.h"
#include "ops/dispatch_depth.h"
#include "runtime/grad_mode.h"
#include "runtime/storage.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

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

// The steps with each group contracted: a topological order that takes, among the steps whose inputs
// are ready, the one that came first in the program (a group stands where its last node stood), and
// keeps the side-effecting nodes in their order.
std::vector<Step> schedule(const Graph& g, const FusionPlan& f) {
  const int n = static_cast<int>(g.nodes.size());
  // Units: one per group, then one per node that runs on its own.
  std::vector<int> unit_of_node(n, -1), key;
  std::vector<Step> unit;
  for (size_t k = 0; k < f.groups.size(); ++k) {
    unit.push_back({-1, static_cast<int>(k)});
    key.push_back(f.groups[k].nodes.back());
    for (int i : f.groups[k].nodes) unit_of_node[i] = static_cast<int>(k);
  }
  for (int i = 0; i < n; ++i) {
    if (unit_of_node[i] >= 0 || f.absorbed[i]) continue;
    unit_of_node[i] = static_cast<int>(unit.size());
    unit.push_back({i, -1});
    key.push_back(i);
  }
  const size_t U = unit.size();
  std::vector<std::vector<int>> succ(U);
  std::vector<int> indeg(U, 0);
  auto edge = [&](int from, int to) {
    if (from == to || from < 0 || to < 0) return;
    succ[from].push_back(to);
    ++indeg[to];
  };
  int last_effect = -1;
  for (int i = 0; i < n; ++i) {
    const int u = unit_of_node[i];
    if (u < 0) continue;
    for (int v : g.nodes[i].inputs)
      if (v >= 0 && g.values[v].node >= 0) edge(unit_of_node[g.values[v].node], u);
    if (has_side_effects(g.nodes[i])) {
      edge(last_effect, u);
      last_effect = u;
    }
  }
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (size_t u = 0; u < U; ++u)
    if (indeg[u] == 0) ready.push({key[u], static_cast<int>(u)});
  std::vector<Step> steps;
  while (!ready.empty()) {
    const int u = ready.top().second;
    ready.pop();
    steps.push_back(unit[u]);
    for (int s : succ[u])
      if (--indeg[s] == 0) ready.push({key[s], s});
  }
  TS_CHECK(steps.size() == U, ValueError, "compile: the fusion groups of this graph form a cycle (", steps.size(),
           " of ", U, " steps scheduled); this is a bug of the fusion pass");
  return steps;
}

// TESSERA_DIRECT_CALLS=0: every node through its op (Note [Direct kernel calls]).
bool direct_calls_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TESSERA_DIRECT_CALLS");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// TESSERA_PLANNED_BUFFERS=0: every intermediate from the caching allocator (Note [Planned buffers]).
bool planned_buffers_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TESSERA_PLANNED_BUFFERS");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

constexpr int64_t kArenaAlignment = 256;

// Note [Planned buffers]: which intermediates go into the arena, and where. `made_by` is the step
// that writes each value (-1: an input or a value no step of the executor's own makes).
void plan_arena(const Graph& g, ExecutionPlan& p, const std::vector<int>& made_by, const std::vector<char>& own_reader_only) {
  MemoryPlan& m = p.memory;
  m.arena_offset.assign(g.values.size(), -1);
  if (!planned_buffers_enabled()) return;
  const int end = static_cast<int>(p.steps.size());
  std::vector<char> cached(g.values.size(), 0);
  for (int v : p.cached_values) cached[v] = 1;
  struct Item {
    int value;
    int64_t bytes;
    int first, last;
    int64_t offset = -1;
  };
  std::vector<Item> items;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (made_by[v] < 0 || !own_reader_only[v] || cached[v] || p.last_use[v] >= end) continue;
    const int64_t bytes = g.values[v].meta.span_bytes();
    if (bytes <= 0) continue;
    items.push_back({static_cast<int>(v), (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment, made_by[v],
                     std::max(p.last_use[v], made_by[v])});
  }
  if (items.empty()) return;
  // One arena, on the device with the most planned bytes (a graph's 0-dim CPU scalars stay apart).
  Device dev = g.values[items[0].value].meta.device;
  {
    std::vector<std::pair<Device, int64_t>> per;
    for (const Item& it : items) {
      const Device d = g.values[it.value].meta.device;
      auto f = std::find_if(per.begin(), per.end(), [&](const auto& e) { return e.first == d; });
      if (f == per.end()) per.emplace_back(d, it.bytes);
      else f->second += it.bytes;
    }
    dev = std::max_element(per.begin(), per.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  }
  items.erase(std::remove_if(items.begin(), items.end(), [&](const Item& it) { return g.values[it.value].meta.device != dev; }),
              items.end());
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
  std::vector<const Item*> placed, overlapping;
  for (Item& it : items) {
    overlapping.clear();
    for (const Item* q : placed)
      if (q->first <= it.last && it.first <= q->last) overlapping.push_back(q);
    std::sort(overlapping.begin(), overlapping.end(), [](const Item* a, const Item* b) { return a->offset < b->offset; });
    int64_t at = 0;
    for (const Item* q : overlapping) {
      if (q->offset >= at + it.bytes) break;  // the gap before q fits
      at = std::max(at, q->offset + q->bytes);
    }
    it.offset = at;
    placed.push_back(&it);
    m.arena_bytes = std::max(m.arena_bytes, at + it.bytes);
    m.arena_offset[it.value] = at;
    m.planned_bytes += it.bytes;
    ++m.planned;
  }
  m.arena_device = dev;
}

}  // namespace

ExecutionPlan plan_execution(const Graph& g, const FusionPlan* fusion, const std::string& label, const Graph* captured) {
  ExecutionPlan p;
  const int nodes = static_cast<int>(g.nodes.size());
  if (fusion && !fusion->groups.empty()) {
    // The kernels first: their debug output (Note [Compiler debug output]) then exists when the
    // schedule fails.
    p.kernels = std::make_shared<const std::vector<CompiledKernel>>(compile_groups(g, *fusion, label, captured));
    p.steps = schedule(g, *fusion);
    for (size_t k = 0; k < fusion->groups.size(); ++k) {
      std::vector<int> ops;  // the kernel's operands (a reduction kernel may read a value twice)
      for (const KernelOperand& op : (*p.kernels)[k].spec.operands) ops.push_back(op.value);
      p.kernel_operands.push_back(std::move(ops));
      p.fused_nodes += static_cast<int>(fusion->groups[k].nodes.size());
    }
  } else {
    for (int i = 0; i < nodes; ++i) p.steps.push_back({i, -1});
  }
  for (const Step& s : p.steps) {
    if (s.node < 0) {
      ++p.launches;
      continue;
    }
    const Node& n = g.nodes[s.node];
    const TensorMeta& out = g.values[n.outputs[0]].meta;
    const bool scalar_fill = n.op == OpId::fill_ && out.sizes.empty() && out.device == kCPU;
    if (op_info(n.op).kind != OpKind::View && !scalar_fill) ++p.launches;
  }
  const int end = static_cast<int>(p.steps.size());
  // What each step writes.
  std::vector<std::vector<int>> step_outputs(end);
  for (int i = 0; i < end; ++i) {
    const Step& s = p.steps[i];
    if (s.node >= 0) step_outputs[i] = g.nodes[s.node].outputs;
    else step_outputs[i] = fusion->groups[s.kernel].outputs;
  }
  p.last_use.assign(g.values.size(), -1);
  for (int i = 0; i < end; ++i) {
    const Step& s = p.steps[i];
    if (s.node >= 0) {
      for (int v : g.nodes[s.node].inputs)
        if (v >= 0) p.last_use[v] = std::max(p.last_use[v], i);
    } else {
      for (int v : fusion->groups[s.kernel].inputs) p.last_use[v] = std::max(p.last_use[v], i);
    }
  }
  for (int v : g.outputs) p.last_use[v] = end;
  // A view keeps its base's storage alive: the base lives as long as its longest-lived view.
  for (int i = end - 1; i >= 0; --i) {
    const Step& s = p.steps[i];
    if (s.node < 0) continue;
    const Node& n = g.nodes[s.node];
    const OpKind kind = op_info(n.op).kind;
    if ((kind == OpKind::View || kind == OpKind::InPlace) && !n.inputs.empty() && n.inputs[0] >= 0)
      for (int o : n.outputs) p.last_use[n.inputs[0]] = std::max(p.last_use[n.inputs[0]], p.last_use[o]);
  }
  std::vector<int64_t> delta(end + 2, 0);
  for (int i = 0; i < end; ++i) {
    const Step& s = p.steps[i];
    for (size_t k = 0; k < step_outputs[i].size(); ++k) {
      if (s.node >= 0 && !owns_storage(g.nodes[s.node], k)) continue;
      const int v = step_outputs[i][k];
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
  // Note [Parameter-derived steps].
  {
    std::vector<char> derived(g.values.size(), 0), returned(g.values.size(), 0);
    // Parameters only: a tensor the program closes over (a Constant) is data, as an argument is; a
    // program of constants alone would otherwise run once for good.
    for (const GraphInput& in : g.inputs)
      if (in.kind == InputKind::Parameter) {
        derived[in.value] = 1;
        p.parameter_inputs.push_back(in.value);
      }
    for (int v : g.outputs) returned[v] = 1;
    bool writes_derived = false;
    p.parameter_step.assign(end, 0);
    for (int i = 0; i < end; ++i) {
      const Step& s = p.steps[i];
      std::vector<const Node*> members;
      if (s.node >= 0) members.push_back(&g.nodes[s.node]);
      else
        for (int n : fusion->groups[s.kernel].nodes) members.push_back(&g.nodes[n]);
      const std::vector<int>& in = s.node >= 0 ? g.nodes[s.node].inputs : fusion->groups[s.kernel].inputs;
      // Pure: no side effect (a random draw, an out= write, an in-place write to an existing tensor;
      // the fill of a fresh buffer, a Scalar operand's, is pure).
      bool pure = true, reads_derived_only = true;
      for (const Node* n : members) {
        if (!has_side_effects(*n)) continue;
        pure = false;
        const OpKind kind = op_info(n->op).kind;
        if ((kind == OpKind::InPlace || kind == OpKind::Out) && !n->inputs.empty() && n->inputs[0] >= 0 &&
            derived[n->inputs[0]])
          writes_derived = true;
      }
      for (int v : in) reads_derived_only = reads_derived_only && (v < 0 || derived[v]);
      bool ok = pure && reads_derived_only;
      for (int v : step_outputs[i]) ok = ok && !returned[v];
      if (!ok) continue;
      p.parameter_step[i] = 1;
      for (int v : step_outputs[i]) derived[v] = 1;
    }
    if (writes_derived || p.parameter_inputs.empty()) {
      p.parameter_step.assign(end, 0);
    } else {
      // Kept: what a parameter-derived step makes and a step of another kind reads.
      std::vector<char> kept(g.values.size(), 0);
      for (int i = 0; i < end; ++i) {
        if (p.parameter_step[i]) continue;
        const Step& s = p.steps[i];
        const std::vector<int>& in = s.node >= 0 ? g.nodes[s.node].inputs : fusion->groups[s.kernel].inputs;
        for (int v : in)
          if (v >= 0 && g.values[v].node >= 0 && derived[v] && !kept[v]) {
            kept[v] = 1;
            p.cached_values.push_back(v);
          }
      }
      if (p.cached_values.empty()) p.parameter_step.assign(end, 0);
      else p.cache = std::make_shared<ParameterCache>();
    }
  }
  p.replay.assign(nodes, nullptr);
  p.direct.assign(nodes, DirectCall{});
  p.output_meta.resize(nodes);
  p.release_after.resize(end);
  for (int i = 0; i < end; ++i) {
    const Step& s = p.steps[i];
    if (s.node >= 0) {
      const Node& n = g.nodes[s.node];
      p.replay[s.node] = op_replay(n.op);
      TS_CHECK(p.replay[s.node] != nullptr, NotImplementedError, "compile: the graph holds ", op_name(n.op),
               ", which the executor cannot run");
      for (int v : n.outputs) p.output_meta[s.node].push_back(g.values[v].meta);
      if (direct_calls_enabled()) p.direct[s.node] = plan_direct_call(g, n);
    }
    // Graph inputs too (Note [Saved inputs released at their last use]): the executor drops its own
    // reference; the caller's stays unless it moved the tensor in.
    const std::vector<int>& in = s.node >= 0 ? g.nodes[s.node].inputs : fusion->groups[s.kernel].inputs;
    for (int v : in)
      if (v >= 0 && p.last_use[v] == i &&
          std::find(p.release_after[i].begin(), p.release_after[i].end(), v) == p.release_after[i].end())
        p.release_after[i].push_back(v);
  }
  // Note [Planned buffers]: the values a generated kernel or a direct call writes, and whether every
  // step that reads them is one too.
  {
    std::vector<int> made_by(g.values.size(), -1);
    std::vector<char> own_reader_only(g.values.size(), 1);
    for (int i = 0; i < end; ++i) {
      const Step& s = p.steps[i];
      if (s.node >= 0) {
        const Node& n = g.nodes[s.node];
        const bool own = p.direct[s.node].kind != DirectCall::Kind::None;
        if (own && n.outputs.size() == 1) made_by[n.outputs[0]] = i;
        if (!own)
          for (int v : n.inputs)
            if (v >= 0) own_reader_only[v] = 0;
      } else {
        const std::vector<KernelOperand>& ops = (*p.kernels)[s.kernel].spec.operands;
        for (size_t o = 0; o < ops.size(); ++o)
          if (ops[o].output) made_by[p.kernel_operands[s.kernel][o]] = i;
      }
    }
    plan_arena(g, p, made_by, own_reader_only);
  }
  return p;
}

std::vector<Tensor> execute(const Graph& g, const ExecutionPlan& plan, std::vector<Tensor> args,
                            const NamedTensors& params, std::vector<Tensor> saved, bool use_cache,
                            bool* cache_hit) {
  if (cache_hit) *cache_hit = false;
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
  // Note [Saved inputs released at their last use]: from here on `vals` holds the only references the
  // executor has.
  args.clear();
  saved.clear();
  // Note [Parameter-derived steps]: the parameters' identity now, against the cache's.
  ParameterCache* cache = use_cache ? plan.cache.get() : nullptr;
  bool hit = false;
  std::vector<std::pair<const void*, uint64_t>> key;
  if (cache) {
    for (int v : plan.parameter_inputs)
      key.emplace_back(vals[v].defined() ? vals[v].data_ptr() : nullptr, vals[v].defined() ? vals[v].version() : 0);
    hit = cache->valid && cache->key == key;
    if (hit) {
      for (size_t c = 0; c < plan.cached_values.size(); ++c) vals[plan.cached_values[c]] = cache->values[c];
      ++cache->hits;
    } else {
      cache->valid = false;
      cache->values.assign(plan.cached_values.size(), Tensor());
    }
    if (cache_hit) *cache_hit = hit;
  }
  std::vector<int> cached_index;  // per value: its place in the cache, -1 if none
  if (cache && !hit) {
    cached_index.assign(g.values.size(), -1);
    for (size_t c = 0; c < plan.cached_values.size(); ++c) cached_index[plan.cached_values[c]] = static_cast<int>(c);
  }
  // Note [Direct kernel calls]: not while a stage (the profiler, a tracer) watches the ops.
  const bool direct = !detail::op_stages_installed();
  const bool grad_on = is_grad_enabled();
  // Note [Planned buffers]: only where autograd records nothing.
  std::shared_ptr<Storage> arena;
  if (plan.memory.arena_bytes > 0 && direct) {
    bool records = false;
    if (grad_on)
      for (const GraphInput& in : g.inputs) records = records || (vals[in.value].defined() && vals[in.value].requires_grad());
    if (!records) arena = std::make_shared<Storage>(static_cast<size_t>(plan.memory.arena_bytes), plan.memory.arena_device);
  }
  auto planned = [&](int v) -> Tensor {
    if (!arena || plan.memory.arena_offset[v] < 0) return Tensor();
    const TensorMeta& m = g.values[v].meta;
    return Tensor(std::make_shared<TensorImpl>(arena, m.dtype, m.sizes, m.strides,
                                               plan.memory.arena_offset[v] / static_cast<int64_t>(element_size(m.dtype))));
  };
  std::vector<Tensor> ins;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (hit && plan.parameter_step[i]) {
      for (int v : plan.release_after[i]) vals[v] = Tensor();
      continue;
    }
    ins.clear();
    if (s.node >= 0) {
      const Node& n = g.nodes[s.node];
      for (int v : n.inputs) ins.push_back(v >= 0 ? vals[v] : Tensor());
      const DirectCall& d = plan.direct[s.node];
      Tensor t;
      if (direct && d.kind != DirectCall::Kind::None)
        t = run_direct_call(d, n, ins, plan.output_meta[s.node][0], grad_on, planned(n.outputs[0]));
      if (t.defined()) {
        vals[n.outputs[0]] = std::move(t);
      } else {
        std::vector<Tensor> outs = plan.replay[s.node]->run(n.op, ins, n.attrs, plan.output_meta[s.node]);
        TS_CHECK(outs.size() == n.outputs.size(), ValueError, "compile: ", op_name(n.op), " returned ", outs.size(),
                 " outputs, the graph expects ", n.outputs.size());
        if (arena)  // Note [Planned buffers]: an op never hands back the arena
          for (const Tensor& o : outs)
            TS_CHECK(!o.defined() || o.impl()->storage() != arena, ValueError, "compile: ", op_name(n.op),
                     " returned a view of the executor's planned buffers; this is a bug of the memory plan");
        for (size_t k = 0; k < outs.size(); ++k) vals[n.outputs[k]] = std::move(outs[k]);
      }
    } else {
      const CompiledKernel& k = (*plan.kernels)[s.kernel];
      const std::vector<int>& operands = plan.kernel_operands[s.kernel];
      for (size_t o = 0; o < operands.size(); ++o) {
        const int v = operands[o];
        if (k.spec.operands[o].output) {
          const TensorMeta& m = g.values[v].meta;
          vals[v] = planned(v);
          if (!vals[v].defined()) vals[v] = empty_strided(m.sizes, m.strides, TensorOptions(m.dtype, m.device));
        }
        ins.push_back(vals[v]);
      }
      run_kernel(k, ins);
    }
    if (!cached_index.empty() && plan.parameter_step[i]) {
      const std::vector<int>& made = s.node >= 0 ? g.nodes[s.node].outputs : plan.kernel_operands[s.kernel];
      for (int v : made)
        if (cached_index[v] >= 0) cache->values[cached_index[v]] = vals[v];
    }
    for (int v : plan.release_after[i]) vals[v] = Tensor();  // after their last reader
  }
  if (cache && !hit) {
    cache->key = std::move(key);
    cache->valid = true;
  }
  std::vector<Tensor> out;
  out.reserve(g.outputs.size());
  for (int v : g.outputs) out.push_back(vals[v]);
  return out;
}

}  // namespace tessera::compiler
