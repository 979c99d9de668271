// The backward engine: from root gradients, runs every node that leads to a wanted gradient, in
// reverse order of creation (highest sequence number first) once all of its incoming gradients have
// arrived, summing gradients that meet at a node. Single-threaded and deterministic. Callbacks queued
// during a pass (queue_callback) run once its last node has run (Note [Final callbacks]).
#include <atomic>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "autograd/apply_context.h"
#include "autograd/engine_state.h"
#include "autograd/graph.h"
#include "ops/autocast_hook.h"
#include "ops/trace_hook.h"
#include "tessera/autograd/callbacks.h"
#include "tessera/functions.h"

namespace tessera::autograd {

namespace {
thread_local bool t_releases_after_apply = false;  // apply_context.h
}  // namespace

bool releases_saved_after_apply() { return t_releases_after_apply; }

namespace {
std::atomic<uint64_t> g_user_code_epoch{0};  // apply_context.h
}  // namespace
uint64_t user_code_epoch() { return g_user_code_epoch.load(std::memory_order_relaxed); }
void note_user_code() { g_user_code_epoch.fetch_add(1, std::memory_order_relaxed); }
namespace {

thread_local bool t_anomaly = false;
thread_local bool t_grad_call = false;  // in_grad_call()
thread_local int64_t t_graph_task = -1;  // current_graph_task_id()
thread_local bool t_batched = false;     // in_batched_backward()
std::atomic<int64_t> g_graph_tasks{0};

// Note [Final callbacks]: each backward pass running on this thread (a pass may start another one
// inside a node: activation checkpointing's recomputation) owns a list of callbacks; queue_callback
// appends to the innermost pass's list. When the pass has run its last node, its callbacks run in
// the order they were queued, and a callback may queue more (they run too). A pass that raises
// drops its callbacks, as PyTorch's engine does. Data parallel waits for its bucket reductions here.
thread_local std::vector<std::vector<std::function<void()>>*> t_callbacks;

class CallbackScope {
 public:
  explicit CallbackScope(std::vector<std::function<void()>>* list) { t_callbacks.push_back(list); }
  ~CallbackScope() { t_callbacks.pop_back(); }
};

class GradCallScope {
 public:
  explicit GradCallScope(bool grad_call) : prev_(t_grad_call) { t_grad_call = grad_call; }
  ~GradCallScope() { t_grad_call = prev_; }

 private:
  bool prev_;
};

// Each pass has an id of its own, for the duration of its run (a pass inside a node is another one).
class GraphTaskScope {
 public:
  explicit GraphTaskScope(bool batched) : prev_(t_graph_task), prev_batched_(t_batched) {
    t_graph_task = g_graph_tasks.fetch_add(1, std::memory_order_relaxed);
    t_batched = batched;
  }
  ~GraphTaskScope() {
    t_graph_task = prev_;
    t_batched = prev_batched_;
  }

 private:
  int64_t prev_;
  bool prev_batched_;
};

struct Capture {
  GraphNode* fn;
  uint32_t slot;
  size_t index;
};

class GradModeGuardSetter {
 public:
  explicit GradModeGuardSetter(bool enabled) : prev_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuardSetter() { set_grad_enabled(prev_); }

 private:
  bool prev_;
};

struct ByOrder {
  bool operator()(const GraphNode* a, const GraphNode* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

void add_into(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  slot = slot.defined() ? add(slot, g) : g;
}

// Reduces a gradient to the slot's shape (undoing broadcasting) and casts it to the slot's dtype and
// device (the gradient of a copy between devices arrives on the copy's device). `batch` >= 0: the
// gradient is batched (Note [Batched gradients]), its dim 0 the samples.
Tensor conform(const Tensor& g, const SlotMeta& m, const std::string& producer, int64_t batch = -1) {
  Tensor r = g;
  if (batch >= 0) {
    TS_CHECK(r.dim() >= 1 && r.size(0) == batch, ValueError, "autograd: ", producer, " returned a gradient of shape ",
             g.sizes(), " in a batched backward of ", batch, " samples; expected the samples along dim 0 of a "
             "gradient for an input of shape ", m.sizes);
    try {
      r = sum_to_batched(r, m.sizes);
    } catch (const ShapeError&) {
      TS_THROW(ShapeError, "autograd: ", producer, " returned a batched gradient of shape ", g.sizes(),
               " for an input of shape ", m.sizes, " (", batch, " samples)");
    }
  } else if (r.sizes() != m.sizes) {
    try {
      r = sum_to(r, m.sizes);
    } catch (const ShapeError&) {
      TS_THROW(ShapeError, "autograd: ", producer, " returned a gradient of shape ", g.sizes(),
               " for an input of shape ", m.sizes);
    }
  }
  if (r.dtype() != m.dtype || r.device() != m.device) r = r.to(m.device, m.dtype);
  return r;
}

void check_anomaly(const GraphNode& node, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined() || !is_floating_point(g.dtype()) || g.is_meta()) continue;
    if (any(isnan(g)).item<bool>())
      TS_THROW(ValueError, "Function '", node.name(), "' returned nan values in its ", i, "th output.");
    if (any(isinf(g)).item<bool>())
      TS_THROW(ValueError, "Function '", node.name(), "' returned inf values in its ", i, "th output.");
  }
}

// Runs the graph below `roots`. With `captures` empty, gradients reach the leaves' AccumulateGrad
// nodes; otherwise only the nodes leading to a capture run, and captured gradients are returned.
// `batch` >= 0: every gradient carries `batch` samples along a leading dim (Note [Batched gradients]).
std::vector<Tensor> run(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, bool keep_graph,
                        bool create_graph, const std::vector<Edge>& capture_edges, int64_t batch = -1) {
  const bool capturing = !capture_edges.empty();
  const bool batched = batch >= 0;
  GradCallScope grad_call(capturing);
  GraphTaskScope task(batched);
  std::vector<Capture> captures;
  std::unordered_set<GraphNode*> capture_nodes;
  for (size_t i = 0; i < capture_edges.size(); ++i) {
    if (!capture_edges[i].valid()) continue;
    captures.push_back({capture_edges[i].fn.get(), capture_edges[i].input_nr, i});
    capture_nodes.insert(capture_edges[i].fn.get());
  }

  // Which nodes must run: all reachable ones, or (capturing) those from which a capture is reachable.
  std::unordered_map<GraphNode*, bool> needed;
  std::function<bool(GraphNode*)> visit = [&](GraphNode* n) -> bool {
    auto it = needed.find(n);
    if (it != needed.end()) return it->second;
    needed[n] = false;  // guards against revisiting while in progress (graphs are acyclic)
    bool need = !capturing || capture_nodes.count(n) > 0;
    for (const Edge& e : n->next_edges)
      if (e.valid() && visit(e.fn.get())) need = true;
    needed[n] = need;
    return need;
  };
  for (const Edge& r : roots) visit(r.fn.get());

  std::unordered_map<GraphNode*, int> deps;
  std::unordered_set<GraphNode*> seen;
  std::vector<GraphNode*> stack;
  for (const Edge& r : roots)
    if (needed[r.fn.get()] && seen.insert(r.fn.get()).second) stack.push_back(r.fn.get());
  while (!stack.empty()) {
    GraphNode* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid() || !needed[e.fn.get()]) continue;
      ++deps[e.fn.get()];
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }

  std::unordered_map<GraphNode*, std::vector<Tensor>> buffers;
  std::unordered_map<GraphNode*, std::shared_ptr<GraphNode>> keep_alive;
  auto buffer_of = [&](const std::shared_ptr<GraphNode>& n) -> std::vector<Tensor>& {
    auto& b = buffers[n.get()];
    if (b.empty()) b.resize(n->slots.size());
    keep_alive[n.get()] = n;
    return b;
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    const SlotMeta& m = roots[i].fn->slots[roots[i].input_nr];
    add_into(buffer_of(roots[i].fn)[roots[i].input_nr], conform(root_grads[i], m, "the root gradient", batch));
  }

  std::priority_queue<GraphNode*, std::vector<GraphNode*>, ByOrder> ready;
  std::unordered_set<GraphNode*> pushed;
  for (const Edge& r : roots)
    if (needed[r.fn.get()] && deps[r.fn.get()] == 0 && pushed.insert(r.fn.get()).second) ready.push(r.fn.get());

  std::vector<Tensor> captured(capture_edges.size());
  std::vector<std::function<void()>> callbacks;
  CallbackScope callback_scope(&callbacks);
  GradModeGuardSetter grad_mode(create_graph);
  // Derivatives run in the dtypes the forward chose; autocast (if a scope is open) does not re-cast
  // them (Note [Autocast stage]).
  AutocastExcludeGuard no_autocast;
  while (!ready.empty()) {
    GraphNode* node = ready.top();
    ready.pop();
    std::shared_ptr<GraphNode> hold = keep_alive[node];
    std::vector<Tensor> grads = std::move(buffer_of(hold));
    buffers.erase(node);
    for (auto& [slot, hooks] : node->pre_hooks) {
      if (slot >= grads.size() || !grads[slot].defined()) continue;
      for (auto& [id, hook] : hooks) {
        if (batched) {  // a hook sees one sample's gradient, as under PyTorch's vmap
          std::vector<std::vector<Tensor>> samples;
          for (int64_t b = 0; b < batch; ++b) {
            Tensor gb = grads[slot].select(0, b);
            Tensor r = hook(gb);
            samples.push_back({r.defined() ? r : gb});
          }
          if (batch > 0) grads[slot] = stack_samples(samples)[0];
          continue;
        }
        Tensor r = hook(grads[slot]);
        if (r.defined()) grads[slot] = r;
      }
    }
    for (const Capture& c : captures)
      if (c.fn == node) add_into(captured[c.index], grads[c.slot]);
    const bool is_accumulator = dynamic_cast<AccumulateGrad*>(node) != nullptr;
    if (capturing && is_accumulator) continue;  // autograd::grad never writes .grad
    bool any_grad = false;
    for (size_t s = 0; s < grads.size(); ++s) {
      if (grads[s].defined()) { any_grad = true; continue; }
      if (!is_accumulator && node->materialize_grads()) {
        Shape sizes = node->slots[s].sizes;
        if (batched) sizes.insert(sizes.begin(), batch);
        grads[s] = zeros(sizes, TensorOptions(node->slots[s].dtype, node->slots[s].device));
      }
    }
    std::vector<Tensor> outs;
    if (any_grad) {
      const bool outer = t_releases_after_apply;
      t_releases_after_apply = !keep_graph && !batched;
      try {
        outs = batched ? node->apply_batched(std::move(grads), batch) : node->apply(std::move(grads));
      } catch (...) {
        t_releases_after_apply = outer;
        throw;
      }
      t_releases_after_apply = outer;
    }
    if (t_anomaly) check_anomaly(*node, outs);
    if (!keep_graph) node->release_saved();
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid() || !needed[e.fn.get()]) continue;
      if (i < outs.size() && outs[i].defined())
        add_into(buffer_of(e.fn)[e.input_nr], conform(outs[i], e.fn->slots[e.input_nr], node->name(), batch));
      else
        keep_alive[e.fn.get()] = e.fn;
      if (--deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
  }
  for (size_t i = 0; i < callbacks.size(); ++i) {  // by index: a callback may queue another
    std::function<void()> cb = std::move(callbacks[i]);
    cb();
  }
  return captured;
}

// The batched form (Note [Batched gradients]): every root has its grad_output, of the root's shape
// after a leading dim of samples that all share; returns that number.
int64_t batched_root_grads(const std::vector<Tensor>& roots, const std::vector<Tensor>& given, const char* op) {
  TS_CHECK(given.size() == roots.size(), ValueError, op, ": is_grads_batched=true needs one grad_output per output, "
           "got ", given.size(), " for ", roots.size(), " outputs");
  int64_t batch = -1;
  for (size_t i = 0; i < roots.size(); ++i) {
    TS_CHECK(given[i].defined(), ValueError, op, ": is_grads_batched=true needs a grad_output for every output; "
             "grad_output[", i, "] is undefined");
    Shape rest = given[i].dim() > 0 ? Shape(given[i].sizes().begin() + 1, given[i].sizes().end()) : Shape{};
    TS_CHECK(given[i].dim() >= 1 && rest == roots[i].sizes(), ShapeError, op, ": If `is_grads_batched=True`, we "
             "interpret the first dimension of each grad_output as the batch dimension. The sizes of the remaining "
             "dimensions are expected to match the shape of corresponding output, but a mismatch was detected: "
             "grad_output[", i, "] has a shape of ", given[i].sizes(), " and output[", i, "] has a shape of ",
             roots[i].sizes(), ".");
    TS_CHECK(batch < 0 || given[i].size(0) == batch, ShapeError, op, ": is_grads_batched=true: grad_output[", i,
             "] has ", given[i].size(0), " samples along dim 0, but grad_output[0] has ", batch,
             "; every grad_output must have the same batch size");
    batch = given[i].size(0);
  }
  return batch;
}

std::vector<Tensor> default_root_grads(const std::vector<Tensor>& roots, const std::vector<Tensor>& given, const char* op) {
  TS_CHECK(given.empty() || given.size() == roots.size(), ValueError, op, ": got ", given.size(),
           " gradients for ", roots.size(), " tensors");
  std::vector<Tensor> out;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!given.empty() && given[i].defined()) {
      TS_CHECK(given[i].sizes() == roots[i].sizes(), ShapeError, op, ": mismatch in shape: grad_output[", i,
               "] has a shape of ", given[i].sizes(), " and output[", i, "] has a shape of ", roots[i].sizes());
      out.push_back(given[i]);
      continue;
    }
    TS_CHECK(roots[i].numel() == 1, ValueError, op, ": grad can be implicitly created only for scalar outputs (output ",
             i, " has shape ", roots[i].sizes(), ")");
    out.push_back(ones_like(roots[i]));
  }
  return out;
}

std::vector<Edge> root_edges(const std::vector<Tensor>& roots, const char* op) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge e = gradient_edge(roots[i]);
    TS_CHECK(e.valid(), ValueError, op, ": element ", i, " of tensors does not require grad and does not have a grad_fn");
    edges.push_back(e);
  }
  return edges;
}

}  // namespace

void queue_callback(std::function<void()> callback) {
  TS_CHECK(!t_callbacks.empty(), ValueError,
           "queue_callback: Final callbacks can only be installed during backward pass.");
  t_callbacks.back()->push_back(std::move(callback));
}
bool in_backward_pass() { return !t_callbacks.empty(); }

void set_detect_anomaly(bool enabled) { t_anomaly = enabled; }
bool in_grad_call() { return t_grad_call; }
int64_t current_graph_task_id() { return t_graph_task; }
bool in_batched_backward() { return t_graph_task >= 0 && t_batched; }
bool is_anomaly_enabled() { return t_anomaly; }

// A backward pass inside a program that the compiler captures ends its graph: gradients reach .grad
// by assignment, which no trace record shows (the compiled forward is differentiated instead).
static void break_capture(const char* what) {
  if (tessera::detail::t_capturing && tessera::detail::t_op_depth == 0) tessera::detail::trace_host_read(what);
}

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph) {
  break_capture("backward(): the backward pass is not captured yet; compile the forward and call backward() on its result");
  std::vector<Edge> roots = root_edges(tensors, "backward");
  std::vector<Tensor> grads = default_root_grads(tensors, grad_tensors, "backward");
  run(roots, grads, retain_graph.value_or(create_graph), create_graph, {});
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused, bool is_grads_batched) {
  break_capture("autograd::grad(): the backward pass is not captured yet; compile the forward instead");
  std::vector<Edge> roots = root_edges(outputs, "grad");
  const int64_t batch = is_grads_batched ? batched_root_grads(outputs, grad_outputs, "grad") : -1;
  std::vector<Tensor> grads = is_grads_batched ? grad_outputs : default_root_grads(outputs, grad_outputs, "grad");
  std::vector<Edge> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    TS_CHECK(e.valid(), ValueError, "grad: input ", i, " does not require grad");
    targets.push_back(e);
  }
  std::vector<Tensor> result = run(roots, grads, retain_graph.value_or(create_graph), create_graph, targets, batch);
  for (size_t i = 0; i < result.size(); ++i)
    TS_CHECK(result[i].defined() || allow_unused, ValueError, "grad: one of the differentiated tensors (input ", i,
             ") appears to not have been used in the graph. Set allow_unused=true if this is the desired behavior.");
  return result;
}

}  // namespace tessera::autograd
