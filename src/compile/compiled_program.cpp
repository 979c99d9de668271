// The compiled function's core (include/tessera/compile.h): variants, guards, captures, the
// recompile limit and the warnings.
#include <algorithm>
#include <chrono>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>

#include "compile/capture.h"
#include "compile/codegen/compiled_kernels.h"
#include "compile/codegen/kernel_cache.h"
#include "compile/compiled_backward.h"
#include "compile/executor.h"
#include "compile/fusion.h"
#include "compile/graphed_steps.h"
#include "tessera/cuda_graph.h"
#include "compile/guards.h"
#include "compile/partition.h"
#include "compile/passes.h"
#include "compile/recompute_rules.h"
#include "compile/symbolic_batch.h"
#include "compile/verify.h"
#include "runtime/grad_mode.h"
#include "tessera/autograd.h"
#include "ops/dispatch_depth.h"
#include "tessera/compile/compiled_program.h"

namespace tessera {
namespace {

std::mutex g_warn_mu;
std::function<void(const std::string&)>& warning_handler() {
  static std::function<void(const std::string&)> h = [](const std::string& m) {
    std::cerr << "tessera: warning: " << m << std::endl;
  };
  return h;
}
void warn(const std::string& m) {
  std::lock_guard<std::mutex> g(g_warn_mu);
  warning_handler()(m);
}

}  // namespace

void set_compile_warning_handler(std::function<void(const std::string&)> handler) {
  std::lock_guard<std::mutex> g(g_warn_mu);
  warning_handler() = handler ? std::move(handler) : [](const std::string& m) {
    std::cerr << "tessera: warning: " << m << std::endl;
  };
}

struct Variant {
  compiler::Guards guards;
  bool eager = false;         // the capture stopped: this variant runs the program
  std::string stop_reason;
  compiler::Graph graph;
  compiler::ExecutionPlan plan;        // every node through its op: the plan autograd can record
  // Backend codegen: the plan with the fusion groups as generated kernels, for the calls that autograd
  // does not record (no_grad, no input that requires grad, or a joint graph's forward).
  std::optional<compiler::ExecutionPlan> fused;
  compiler::Graph fused_graph;         // the graph `fused` runs: `graph` after the decompositions
  bool inputs_require_grad = false;
  compiler::VerifyReport verified;
  // Note [Joint graph]: with a backward, the forward runs without autograd and one node runs this.
  std::shared_ptr<const compiler::BackwardProgram> backward;
  bool joint = false;                  // the capture has a backward graph
  bool fake_backward = false;          // traced over fake data (Note [Fake data])
  compiler::Graph backward_graph;      // it, after the partition and before the codegen passes
  std::vector<bool> grad_defined;
  int64_t batch = -1;                  // the call's batch size (Note [Symbolic batch])
  int num_outputs = 0;                // the program's outputs (the forward graph returns the saved after)
  std::vector<int> diff_outputs, diff_inputs;
  std::string backward_note;          // why there is no backward graph, when there is none
  // Note [Min-cut partition]: the bytes the forward keeps for the backward, and eager's figure.
  int64_t saved_bytes = 0, eager_saved_bytes = 0;
  int recomputed_nodes = 0;
};

// Note [Symbolic batch] (compile/symbolic_batch.h): two variants whose calls differed only in their
// batch size, made one; each batch size it answers gets an instance, planned from its graphs at that
// size.
struct SymbolicVariant {
  compiler::Guards guards;
  int from_a = 0, from_b = 0;  // the variants it was made from
  int64_t batch_a = 0, batch_b = 0;
  compiler::SymbolicGraph forward;
  std::optional<compiler::SymbolicGraph> backward;
  int num_outputs = 0;
  std::vector<int> diff_outputs, diff_inputs;
  std::vector<bool> grad_defined;
  std::string backward_note;
  std::map<int64_t, std::unique_ptr<Variant>> instances;
  std::deque<int64_t> order;  // instances' batch sizes, oldest first
};

namespace {

// Runs a variant's graph for one call; with a backward graph, makes its outputs those of one
// autograd node.
// skipped: null where the parameter cache must not be used (mode ReduceOverhead: a CUDA graph captured
// on a call that reused cached values would never see an in-place update of a parameter); else it
// receives how many steps the call reused from the cache (0 on a miss).
std::vector<Tensor> run_variant(const Variant& v, const compiler::CallState& call, int* skipped) {
  const bool records = is_grad_enabled() && v.inputs_require_grad && !v.backward;
  const bool fused = v.fused && !records;
  const compiler::ExecutionPlan& plan = fused ? *v.fused : v.plan;
  const compiler::Graph& graph = fused ? v.fused_graph : v.graph;
  // Note [Parameter-derived steps]: where nothing takes a gradient (inference), not while training,
  // and not into a CUDA graph being captured (its replays would never recompute them).
  const bool use_cache = skipped && !(is_grad_enabled() && v.inputs_require_grad) && !cuda::is_current_stream_capturing();
  if (!v.backward || !is_grad_enabled()) {
    bool hit = false;
    std::vector<Tensor> out = compiler::execute(graph, plan, call.args, call.params, {}, use_cache, &hit);
    if (skipped) *skipped = hit ? static_cast<int>(std::count(plan.parameter_step.begin(), plan.parameter_step.end(), 1)) : 0;
    return out;
  }
  std::vector<Tensor> all;
  {
    NoGradGuard no_grad;
    all = compiler::execute(graph, plan, call.args, call.params);
  }
  std::vector<Tensor> outs(all.begin(), all.begin() + v.num_outputs);
  std::vector<Tensor> saved(all.begin() + v.num_outputs, all.end());
  std::vector<Tensor> diff_out, diff_in;
  for (int j : v.diff_outputs) diff_out.push_back(outs[j]);
  for (int i : v.diff_inputs) {
    const compiler::GraphInput& in = v.graph.inputs[i];
    switch (in.kind) {
      case compiler::InputKind::Argument: diff_in.push_back(call.args.at(in.index)); break;
      case compiler::InputKind::Parameter: diff_in.push_back(call.params.at(in.index).second); break;
      default: diff_in.push_back(in.constant); break;
    }
  }
  compiler::attach_backward(v.backward, diff_out, diff_in, std::move(saved));
  return outs;
}

}  // namespace

struct CompiledProgramState {
  CompileOptions options;
  std::string name;
  CompiledProgram::StateFn state;
  std::mutex mu;
  std::deque<Variant> variants;  // a deque: `last` points into it
  std::deque<SymbolicVariant> symbolic;
  CompileStats stats;
  bool over_limit = false;
  bool warned_symbolic = false;
  const Variant* last = nullptr;  // the variant or instance that answered the last call
  compiler::GraphedSteps graphed;  // mode ReduceOverhead
};

namespace {

// A variant's execution plans from its graphs (after the partition); its backward program.
void plan_variant(Variant& v) {
  v.plan = compiler::plan_execution(v.graph);
  v.inputs_require_grad = false;
  for (const compiler::GraphInput& in : v.graph.inputs)
    v.inputs_require_grad = v.inputs_require_grad || v.graph.values[in.value].meta.requires_grad;
  v.backward = nullptr;
  if (!v.joint) return;
  auto b = std::make_shared<compiler::BackwardProgram>();
  b->plan = compiler::plan_execution(v.backward_graph);
  b->graph = v.backward_graph;
  b->grad_defined = v.grad_defined;
  v.backward = std::move(b);
}

// Backend codegen: the fused plans of a planned variant. Outside the verification's fallback: a
// kernel that fails to build raises (with the compiler's log and the source's path), as a failing
// backend does in PyTorch.
void generate_kernels(Variant& v, CompiledProgramState& s) {
  const auto t0 = std::chrono::steady_clock::now();
  const compiler::KernelCacheStats cache0 = compiler::kernel_cache_stats();
  v.fused_graph = v.graph;
  compiler::run_codegen_passes(v.fused_graph, v.num_outputs);
  const compiler::FusionPlan f = compiler::plan_fusion(v.fused_graph);
  v.fused = compiler::plan_execution(v.fused_graph, &f, s.name + "-forward", &v.graph);
  s.stats.kernels += static_cast<int>(f.groups.size());
  s.stats.fused_nodes += v.fused->fused_nodes;
  if (v.backward) {  // a backward runs without autograd recording (create_graph is refused)
    auto b = std::make_shared<compiler::BackwardProgram>(*v.backward);
    compiler::run_codegen_passes(b->graph);
    const compiler::FusionPlan fb = compiler::plan_fusion(b->graph);
    b->plan = compiler::plan_execution(b->graph, &fb, s.name + "-backward", &v.backward->graph);
    s.stats.kernels += static_cast<int>(fb.groups.size());
    s.stats.fused_nodes += b->plan.fused_nodes;
    v.backward = std::move(b);
  }
  s.stats.launches = v.fused->launches + (v.backward ? v.backward->plan.launches : 0);
  const compiler::KernelCacheStats cache1 = compiler::kernel_cache_stats();
  s.stats.builds += static_cast<int>(cache1.compiled - cache0.compiled);
  s.stats.cache_hits +=
      static_cast<int>(cache1.disk_hits - cache0.disk_hits + cache1.memory_hits - cache0.memory_hits);
  s.stats.codegen_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Note [Symbolic batch]: the new variant `k` with each earlier one whose call differed only in its
// batch size. Warns once when the guards agree but the graphs do not.
void try_unify(CompiledProgramState& s, int k) {
  const Variant& v = s.variants[k];
  if (v.eager || v.batch < 2) return;
  for (int i = 0; i < k; ++i) {
    const Variant& u = s.variants[i];
    if (u.eager || u.batch < 2 || u.batch == v.batch) continue;
    std::string why;
    std::optional<compiler::Guards> g = compiler::Guards::unify_batch(u.guards, u.batch, v.guards, v.batch, &why);
    if (!g) continue;  // the calls differ in more than the batch size: not one function of it
    std::optional<compiler::SymbolicGraph> fwd, bwd;
    if (u.joint != v.joint || u.num_outputs != v.num_outputs || u.diff_outputs != v.diff_outputs ||
        u.diff_inputs != v.diff_inputs || u.grad_defined != v.grad_defined) {
      why = "one capture has a backward graph the other lacks, or their differentiable outputs differ";
    } else if (!(fwd = compiler::unify_graphs(u.graph, u.batch, v.graph, v.batch, &why))) {
      why = "the forward graphs: " + why;
    } else if (u.joint && !(bwd = compiler::unify_graphs(u.backward_graph, u.batch, v.backward_graph, v.batch, &why))) {
      why = "the backward graphs: " + why;
    } else {
      SymbolicVariant sv{std::move(*g)};
      sv.from_a = i;
      sv.from_b = k;
      sv.batch_a = u.batch;
      sv.batch_b = v.batch;
      sv.forward = std::move(*fwd);
      sv.backward = std::move(bwd);
      sv.num_outputs = v.num_outputs;
      sv.diff_outputs = v.diff_outputs;
      sv.diff_inputs = v.diff_inputs;
      sv.grad_defined = v.grad_defined;
      sv.backward_note = v.backward_note;
      s.symbolic.push_back(std::move(sv));
      s.stats.symbolic_variants = static_cast<int>(s.symbolic.size());
      return;
    }
    if (!s.warned_symbolic) {
      s.warned_symbolic = true;
      warn("compile(" + s.name + ", dynamic=true): the captures at batch sizes " + std::to_string(u.batch) + " and " +
           std::to_string(v.batch) + " differ in more than the batch size (" + why +
           "); each batch size stays a variant of its own");
    }
  }
}

// The instance of `sv` at batch size `batch`, planned on first use; null (with a warning) when its
// graphs at that size fail verification or planning, and that call is captured instead.
Variant* instance_at(CompiledProgramState& s, SymbolicVariant& sv, int64_t batch) {
  auto it = sv.instances.find(batch);
  if (it != sv.instances.end()) return it->second.get();
  auto inst = std::make_unique<Variant>(Variant{sv.guards});
  Variant& v = *inst;
  v.batch = batch;
  v.num_outputs = sv.num_outputs;
  v.diff_outputs = sv.diff_outputs;
  v.diff_inputs = sv.diff_inputs;
  v.grad_defined = sv.grad_defined;
  v.backward_note = sv.backward_note;
  v.joint = sv.backward.has_value();
  try {
    v.graph = sv.forward.at(batch);
    v.verified = compiler::verify_graph(v.graph);
    if (v.joint) {
      v.backward_graph = sv.backward->at(batch);
      compiler::verify_graph(v.backward_graph);
      const std::vector<int> saved(v.graph.outputs.begin() + v.num_outputs, v.graph.outputs.end());
      v.saved_bytes = compiler::saved_storage_bytes(v.graph, saved);
    }
    plan_variant(v);
  } catch (const Error& e) {
    warn("compile(" + s.name + ", dynamic=true): the symbolic graph of batch sizes " + std::to_string(sv.batch_a) +
         " and " + std::to_string(sv.batch_b) + " does not hold at batch size " + std::to_string(batch) + " (" +
         e.what() + "); this call is captured");
    return nullptr;
  }
  s.stats.eager_launches = v.plan.launches + (v.backward ? v.backward->plan.launches : 0);
  s.stats.launches = s.stats.eager_launches;
  if (s.options.backend == "codegen") generate_kernels(v, s);
  if (static_cast<int>(sv.instances.size()) >= compiler::kMaxBatchInstances) {
    auto old = sv.instances.find(sv.order.front());
    if (s.last == old->second.get()) s.last = nullptr;
    sv.instances.erase(old);
    sv.order.pop_front();
  }
  ++s.stats.batch_instances;
  sv.order.push_back(batch);
  return sv.instances.emplace(batch, std::move(inst)).first->second.get();
}

}  // namespace

CompiledProgram::CompiledProgram(CompileOptions options, std::string name, StateFn state)
    : s_(std::make_shared<CompiledProgramState>()) {
  TS_CHECK(options.backend == "eager" || options.backend == "codegen", ValueError, "compile: unknown backend '",
           options.backend, "' (this build has: eager, codegen)");
  TS_CHECK(options.recompile_limit >= 1, ValueError, "compile: recompile_limit must be at least 1, got ",
           options.recompile_limit);
  s_->options = std::move(options);
  s_->name = std::move(name);
  s_->state = std::move(state);
}

std::vector<Tensor> CompiledProgram::run(const std::vector<Tensor>& args, const std::vector<std::string>& scalars,
                                         const Program& program, const ProgramOn& program_on) {
  CompiledProgramState& s = *s_;
  if (s.options.mode != CompileMode::ReduceOverhead || !program_on || detail::t_capturing)
    return run_default(args, scalars, program);
  compiler::CallState call;
  call.args = args;
  call.scalars = scalars;
  if (s.state) s.state(call.params, call.training);
  auto run_on = [&](const std::vector<Tensor>& in) { return run_default(in, scalars, [&] { return program_on(in); }); };
  return s.graphed.call(call, run_on, [&](const std::string& m) { warn("compile(" + s.name + "): " + m); },
                        s.options.recompile_limit);
}

std::vector<Tensor> CompiledProgram::run_default(const std::vector<Tensor>& args,
                                                 const std::vector<std::string>& scalars, const Program& program) {
  CompiledProgramState& s = *s_;
  // A compiled function called by a program being captured is part of that program.
  if (detail::t_capturing) return program();
  std::unique_lock<std::mutex> lock(s.mu);
  compiler::CallState call;
  call.args = args;
  call.scalars = scalars;
  if (s.state) s.state(call.params, call.training);
  s.last = nullptr;
  if (s.over_limit) {
    ++s.stats.eager_calls;
    lock.unlock();
    return program();
  }
  auto run_graph = [&](const Variant& v, const compiler::CallState& c) {
    ++s.stats.graph_calls;
    s.last = &v;
    int skipped = 0;
    std::vector<Tensor> out = run_variant(v, c, s.options.mode == CompileMode::ReduceOverhead ? nullptr : &skipped);
    if (skipped > 0) {
      ++s.stats.parameter_cache_hits;
      s.stats.parameter_steps = skipped;
    }
    return out;
  };
  std::optional<std::string> last_failure;
  for (size_t i = 0; i < s.variants.size(); ++i) {
    std::optional<std::string> failed = s.variants[i].guards.check(call);
    if (failed) {  // each variant's first failing guard, "variant 0: ...; variant 1: ..."
      last_failure = (last_failure ? *last_failure + "; " : std::string()) + "variant " + std::to_string(i) + ": " + *failed;
      continue;
    }
    Variant& v = s.variants[i];
    if (v.eager) {
      ++s.stats.eager_calls;
      lock.unlock();
      return program();
    }
    return run_graph(v, call);
  }
  // Note [Symbolic batch]: a symbolic variant answers any batch size its lines predict.
  for (SymbolicVariant& sv : s.symbolic) {
    if (sv.guards.check(call)) continue;
    if (Variant* inst = instance_at(s, sv, compiler::batch_size_of(call.args))) return run_graph(*inst, call);
  }
  if (last_failure) s.stats.recompile_reasons.push_back(*last_failure);
  if (static_cast<int>(s.variants.size()) >= s.options.recompile_limit) {
    s.over_limit = true;
    ++s.stats.eager_calls;
    warn("compile(" + s.name + "): hit the recompile limit (" + std::to_string(s.options.recompile_limit) +
         " variants); this function runs eagerly from now on. The guards that failed: " + last_failure.value_or("?"));
    lock.unlock();
    return program();
  }
  Variant v{compiler::Guards::of(call)};
  v.batch = compiler::batch_size_of(call.args);
  compiler::CaptureResult r = compiler::capture_program(call.args, call.params, program, /*derive_backward=*/true);
  ++s.stats.captures;
  if (r.complete) {
    try {
      v.verified = compiler::verify_graph(r.graph);
      v.graph = std::move(r.graph);
      v.num_outputs = r.num_program_outputs;
      if (r.has_backward) {
        compiler::verify_graph(r.backward);
        // Note [Min-cut partition]: what the backward reads; both rewritten graphs verified again.
        compiler::PartitionDecision d;
        if (s.options.min_cut_partition) {
          d = compiler::partition_joint_graph(v.graph, v.num_outputs, r.backward);
          if (d.changed) {
            v.verified = compiler::verify_graph(v.graph);
            compiler::verify_graph(r.backward);
          }
        } else {
          const std::vector<int> saved(v.graph.outputs.begin() + v.num_outputs, v.graph.outputs.end());
          d.saved_bytes = d.eager_saved_bytes = compiler::saved_storage_bytes(v.graph, saved);
        }
        s.stats.saved_bytes = d.saved_bytes;
        s.stats.eager_saved_bytes = d.eager_saved_bytes;
        s.stats.saved_values = static_cast<int>(v.graph.outputs.size()) - v.num_outputs;
        s.stats.recomputed_nodes = static_cast<int>(d.recomputed.size() + d.remade.size());
        s.stats.partition_declined = d.declined;
        v.saved_bytes = d.saved_bytes;
        v.eager_saved_bytes = d.eager_saved_bytes;
        v.recomputed_nodes = s.stats.recomputed_nodes;
        v.joint = true;
        v.fake_backward = r.backward_over_fake_data;
        s.stats.fake_backward_traces += r.backward_over_fake_data;
        v.backward_graph = std::move(r.backward);
        v.grad_defined = r.grad_defined;
        v.diff_outputs = r.diff_outputs;
        v.diff_inputs = r.diff_inputs;
        ++s.stats.joint_variants;
      } else {
        v.backward_note = r.backward_stop_reason;
        if (!v.backward_note.empty()) s.stats.no_backward_reasons.push_back(v.backward_note);
      }
      plan_variant(v);
      s.stats.eager_launches = v.plan.launches + (v.backward ? v.backward->plan.launches : 0);
      s.stats.launches = s.stats.eager_launches;
    } catch (const Error& e) {
      r.complete = false;
      r.stop_reason = std::string("the captured graph failed verification: ") + e.what();
    }
  }
  if (r.complete && s.options.backend == "codegen") generate_kernels(v, s);
  if (!r.complete) {
    if (s.options.fullgraph)
      TS_THROW(NotImplementedError, "compile(", s.name, ", fullgraph=true): ", r.stop_reason);
    v.eager = true;
    v.stop_reason = r.stop_reason;
    warn("compile(" + s.name + "): " + r.stop_reason + "; this variant runs eagerly");
  }
  s.variants.push_back(std::move(v));
  if (r.complete) s.last = &s.variants.back();
  s.stats.variants = static_cast<int>(s.variants.size());
  if (s.options.dynamic) try_unify(s, static_cast<int>(s.variants.size()) - 1);
  return r.outputs;
}

std::string CompiledProgram::explain(const std::vector<Tensor>& args, const std::vector<std::string>& scalars,
                                     const Program& program) {
  run(args, scalars, program);
  CompiledProgramState& s = *s_;
  std::lock_guard<std::mutex> lock(s.mu);
  std::ostringstream os;
  os << "compile(" << s.name << "): " << s.variants.size() << " variant(s), " << s.stats.captures << " capture(s), "
     << s.stats.graph_calls << " graph call(s), " << s.stats.eager_calls << " eager call(s)\n";
  for (size_t i = 0; i < s.stats.recompile_reasons.size(); ++i)
    os << "recompile " << i + 1 << ": " << s.stats.recompile_reasons[i] << "\n";
  for (size_t i = 0; i < s.variants.size(); ++i) {
    const Variant& v = s.variants[i];
    os << "variant " << i << ":\n guards:\n" << v.guards.to_text();
    if (v.eager) {
      os << " runs eagerly: " << v.stop_reason << "\n";
      continue;
    }
    os << " " << v.graph.nodes.size() << " nodes (" << v.verified.reinferred << " re-inferred by the meta functions), "
       << "intermediates: " << v.plan.memory.buffers << " buffers, peak " << v.plan.memory.peak_bytes << " bytes of "
       << v.plan.memory.total_bytes << ", " << v.plan.memory.planned << " of them in a planned arena of "
       << v.plan.memory.arena_bytes << " bytes\n"
       << v.graph.to_text();
    if (v.fused) {
      if (v.fused_graph.nodes.size() != v.graph.nodes.size())
        os << " after the decompositions (Note [Decompositions]):\n" << v.fused_graph.to_text();
      os << " generated kernels: " << v.fused->kernels->size() << " (" << v.fused->fused_nodes << " nodes)\n";
    }
    if (v.backward) {
      os << " backward: " << v.backward->graph.nodes.size() << " nodes, one autograd node for the call; "
         << v.graph.outputs.size() - v.num_outputs << " saved values (" << v.saved_bytes
         << " bytes beyond the inputs; eager autograd keeps " << v.eager_saved_bytes << "), "
         << v.recomputed_nodes << " forward nodes recomputed; traced "
         << (v.fake_backward ? "over fake data (Note [Fake data])" : "for real (the pass over fake data could not finish)") << "\n"
         << v.backward->graph.to_text();
    } else if (!v.backward_note.empty()) {
      os << " no backward graph (autograd records the replayed forward): " << v.backward_note << "\n";
    }
  }
  for (size_t i = 0; i < s.symbolic.size(); ++i) {
    const SymbolicVariant& sv = s.symbolic[i];
    os << "symbolic variant " << i << " (Note [Symbolic batch]): variants " << sv.from_a << " and " << sv.from_b
       << " (batch sizes " << sv.batch_a << " and " << sv.batch_b << ") as one graph of the batch size B; "
       << sv.forward.symbolic << " forward" << (sv.backward ? " and " + std::to_string(sv.backward->symbolic) + " backward" : "")
       << " integers depend on B; instances at batch sizes";
    for (int64_t b : sv.order) os << " " << b;
    os << "\n guards:\n" << sv.guards.to_text() << " the forward's integers that depend on B:\n" << sv.forward.describe();
  }
  return os.str();
}

CompileStats CompiledProgram::stats() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  CompileStats st = s_->stats;
  st.cuda_graphs = s_->graphed.graphs();
  st.cuda_graph_replays = s_->graphed.replays();
  return st;
}

std::string CompiledProgram::last_graph() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->last ? s_->last->graph.to_text() : std::string();
}

void CompiledProgram::reset() {
  s_->graphed.reset();
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->variants.clear();
  s_->symbolic.clear();
  s_->stats = CompileStats{};
  s_->over_limit = false;
  s_->warned_symbolic = false;
  s_->last = nullptr;
}

std::string CompiledProgram::last_backward_graph() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->last && s_->last->backward ? s_->last->backward->graph.to_text() : std::string();
}

const CompileOptions& CompiledProgram::options() const { return s_->options; }

}  // namespace tessera
