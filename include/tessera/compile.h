// ts::compile: a C++ program captured into a graph and run as one (DESIGN.md "The compiler").
//
//   ts::models::MLP model(784, {256}, 10);
//   auto fwd = ts::compile(model);                    // an nn::Module: forward(Tensor)
//   auto step = ts::compile([&](const ts::Tensor& x, const ts::Tensor& y) {
//     return ts::nn::functional::cross_entropy(model.forward(x), y);
//   });
//   ts::Tensor loss = step(x, y);                     // first call: captured (and run)
//   loss.backward();                                  // later calls: the graph runs
//   std::cout << ts::compile_explain(step, x, y);     // graphs, guards, breaks and why
//
// A callable takes tensors (Tensor, const Tensor&, std::vector<Tensor>) and numbers or strings, and
// returns a Tensor, a std::vector<Tensor>, or a std::tuple / std::pair of Tensors. The first call with
// a new combination of guards (compile/guards.h: shapes, strides, dtypes, devices, requires_grad,
// aliasing, the non-tensor arguments, grad mode, autocast, training mode, parameter identity) runs the
// program once while capturing it; later calls that pass the same guards run the graph instead of the
// program. Past `recompile_limit` variants the function runs eagerly and warns once, naming the guard
// that failed. Where the capture cannot see the whole program (a host read such as item(): a graph
// break; an op the compiler does not support yet) that variant runs eagerly and warns once, or with
// `fullgraph = true` the call raises NotImplementedError naming the reason.
//
// Tensors that the callable reaches other than through its arguments (globals, captured variables,
// a module's tensors when a lambda rather than the module is compiled) are constants of the graph:
// held by identity, read as they are at each call. Rebind such a variable and the graph keeps the old
// tensor: pass it as an argument instead, or call reset(). Likewise the C++ control flow of the first
// call is what the graph holds (as with torch.jit.trace): a branch on anything but the guarded
// properties of the arguments (a global flag, a counter in the closure) is baked in; pass what it
// depends on as an argument (numbers are guarded by value), or read it from a tensor on the host,
// which breaks the graph.
//
// Training: when the outputs take a gradient, the backward is captured too (Note [Joint graph] in
// src/compile/capture.h) and runs as one autograd node; a backward() inside the compiled callable
// breaks the graph (compile the forward and call backward() on its result). What the forward keeps
// for the backward is chosen by a minimum cut over bytes (Note [Min-cut partition] in
// src/compile/partition.h): matmul, convolution and attention outputs and random draws are saved,
// cheap ops (pointwise, views, normalizations) recomputed in the backward where that keeps fewer
// bytes; `min_cut_partition = false` keeps what eager autograd would save.
//
// Backends: "eager" (the default: the graph's nodes through tessera's kernels, intermediates released
// at their last use) and "codegen" (the graph after the passes of src/compile/passes.h: scalar
// constants, common subexpressions, private in-place writes made functional, softmax, layer norm, RMS
// norm and eval-mode batch norm decomposed, conv + batch norm folded where nothing fuses with the
// norm; then pointwise chains and reductions with their prologues and epilogues fused into generated
// kernels, C++ on the CPU and CUDA through NVRTC, cached on disk; matmuls and convolutions stay
// library calls). Set TESSERA_COMPILE_DEBUG_DIR to read the graphs, groups and sources. The codegen
// plan runs where autograd records nothing (no_grad, inputs that need no gradient, or a captured
// joint backward).
//
// Mode ReduceOverhead replays each variant's whole call as one CUDA graph from its third call on
// (Note [ReduceOverhead] in src/compile/graphed_steps.h): compile a whole training step, forward,
// backward and optimizer step, and each call is one launch. The call's tensor arguments are copied
// into the graph's static inputs; the outputs are the graph's static outputs, overwritten by the next
// call (as PyTorch's CUDA graphs: clone what must be kept). Host numbers the step reads (a learning
// rate) are baked in: pass them as arguments. Calls that cannot be graphed (CPU tensors, arguments
// that require grad, outputs that take a gradient, a synchronization or Adam's host step count in the
// step) run as the Default mode's, with a warning naming the reason.
//
//   auto step = ts::compile([&](const ts::Tensor& x, const ts::Tensor& y) {
//     opt.zero_grad();
//     ts::Tensor loss = F::cross_entropy(model.forward(x), y);
//     loss.backward();
//     opt.step();
//     return loss.detach();
//   }, {.mode = ts::CompileMode::ReduceOverhead});
//
// `dynamic = true` makes the batch size (dim 0 of the first tensor argument) symbolic: the first two
// batch sizes are captured, and when their graphs differ only in integers that are whole-number lines
// in the batch size (reshape's sizes, shapes, strides), every later batch size of at least 2 runs
// that graph instantiated at its size, without running the program or counting as a recompile (Note
// [Symbolic batch] in src/compile/symbolic_batch.h). Sizes 0 and 1 are specialized; a graph that
// depends on the batch size otherwise (a host-computed 1.0 / B) stays one variant per size, with a
// warning naming the difference. MaxAutotune acts as Default until autotuning lands.
#pragma once
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/compile/compiled_program.h"
#include "tessera/nn/module.h"
#include "tessera/tensor.h"

namespace tessera {

namespace compile_detail {

inline void collect(std::vector<Tensor>& ts, std::vector<std::string>& ss, const Tensor& t) { ts.push_back(t); }
inline void collect(std::vector<Tensor>& ts, std::vector<std::string>& ss, const std::vector<Tensor>& v) {
  ss.push_back("list of " + std::to_string(v.size()) + " tensors");
  ts.insert(ts.end(), v.begin(), v.end());
}
inline void collect(std::vector<Tensor>&, std::vector<std::string>& ss, const std::string& s) { ss.push_back('"' + s + '"'); }
inline void collect(std::vector<Tensor>&, std::vector<std::string>& ss, const char* s) { ss.push_back('"' + std::string(s) + '"'); }
template <class T>
  requires std::is_arithmetic_v<std::remove_cvref_t<T>>
void collect(std::vector<Tensor>&, std::vector<std::string>& ss, const T& v) {  // guarded by value
  std::ostringstream os;
  os.precision(17);
  os << v;
  ss.push_back(os.str());
}

template <class T>
struct is_tensor_tuple : std::false_type {};
template <class... Ts>
struct is_tensor_tuple<std::tuple<Ts...>> : std::bool_constant<(std::is_same_v<std::remove_cvref_t<Ts>, Tensor> && ...)> {};
template <class A, class B>
struct is_tensor_tuple<std::pair<A, B>>
    : std::bool_constant<std::is_same_v<std::remove_cvref_t<A>, Tensor> && std::is_same_v<std::remove_cvref_t<B>, Tensor>> {};

template <class R>
std::vector<Tensor> flatten(R&& r) {
  using T = std::remove_cvref_t<R>;
  static_assert(std::is_same_v<T, Tensor> || std::is_same_v<T, std::vector<Tensor>> || is_tensor_tuple<T>::value,
                "ts::compile: the callable must return a Tensor, a std::vector<Tensor>, or a std::tuple / std::pair "
                "of Tensors");
  if constexpr (std::is_same_v<T, Tensor>) {
    return {r};
  } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
    return r;
  } else {
    std::vector<Tensor> out;
    std::apply([&](const auto&... t) { (out.push_back(t), ...); }, r);
    return out;
  }
}

// An argument as the callable receives it when ReduceOverhead runs it on its static inputs: a tensor
// (or a vector of them) taken from `in` at `i` onwards, anything else as given.
template <class A>
decltype(auto) substitute(A& a, const std::vector<Tensor>& in, size_t& i) {
  using T = std::remove_cvref_t<A>;
  if constexpr (std::is_same_v<T, Tensor>) {
    return Tensor(in.at(i++));
  } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
    std::vector<Tensor> v(in.begin() + static_cast<std::ptrdiff_t>(i),
                          in.begin() + static_cast<std::ptrdiff_t>(i + a.size()));
    i += a.size();
    return v;
  } else {
    return (a);
  }
}

template <class R>
R unflatten(std::vector<Tensor>&& out) {
  if constexpr (std::is_same_v<R, Tensor>) {
    return out.at(0);
  } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
    return std::move(out);
  } else {
    return [&]<size_t... I>(std::index_sequence<I...>) { return R{out.at(I)...}; }(
        std::make_index_sequence<std::tuple_size_v<R>>{});
  }
}

}  // namespace compile_detail

// A compiled callable (ts::compile's result).
template <class F>
class Compiled {
 public:
  Compiled(F fn, CompileOptions options, std::string name, CompiledProgram::StateFn state = {})
      : fn_(std::move(fn)), core_(std::move(options), std::move(name), std::move(state)) {}

  template <class... Args>
  auto operator()(Args&&... args) {
    using R = std::remove_cvref_t<std::invoke_result_t<F&, Args&...>>;
    std::vector<Tensor> ts;
    std::vector<std::string> ss;
    (compile_detail::collect(ts, ss, args), ...);
    auto program = [&] { return compile_detail::flatten(std::invoke(fn_, args...)); };
    // The same call on other tensors (ReduceOverhead's static inputs). Braces: the arguments are
    // substituted left to right.
    auto program_on = [&](const std::vector<Tensor>& in) {
      size_t i = 0;
      std::tuple<decltype(compile_detail::substitute(args, in, i))...> subst{compile_detail::substitute(args, in, i)...};
      return compile_detail::flatten(std::apply([&](auto&... a) { return std::invoke(fn_, a...); }, subst));
    };
    std::vector<Tensor> out = core_.run(ts, ss, program, program_on);
    return compile_detail::unflatten<R>(std::move(out));
  }

  template <class... Args>
  std::string explain(Args&&... args) {
    std::vector<Tensor> ts;
    std::vector<std::string> ss;
    (compile_detail::collect(ts, ss, args), ...);
    return core_.explain(ts, ss, [&] { return compile_detail::flatten(std::invoke(fn_, args...)); });
  }

  CompileStats stats() const { return core_.stats(); }
  std::string last_graph() const { return core_.last_graph(); }
  std::string last_backward_graph() const { return core_.last_backward_graph(); }
  void reset() { core_.reset(); }

 private:
  F fn_;
  CompiledProgram core_;
};

template <class F>
  requires(!std::is_base_of_v<nn::Module, std::remove_cvref_t<F>>)
auto compile(F fn, CompileOptions options = {}) {
  return Compiled<F>(std::move(fn), std::move(options), "function");
}

// An nn::Module: its forward(Tensor), with its parameters and buffers guarded by identity and every
// submodule's training mode guarded. The module must outlive the compiled function.
template <class M>
  requires std::is_base_of_v<nn::Module, M>
auto compile(M& module, CompileOptions options = {}) {
  auto fn = [&module](const Tensor& x) { return module.forward(x); };
  auto state = [&module](std::vector<std::pair<std::string, Tensor>>& params, std::vector<bool>& training) {
    params = module.named_parameters();
    for (auto& b : module.named_buffers()) params.push_back(b);
    for (nn::Module* m : module.modules()) training.push_back(m->is_training());
  };
  return Compiled<decltype(fn)>(std::move(fn), std::move(options), "Module", std::move(state));
}

// Runs a call of `compiled` and describes what the compiler made of it (every variant's graph, its
// guards, each graph break and its reason).
template <class C, class... Args>
std::string compile_explain(C& compiled, Args&&... args) {
  return compiled.explain(std::forward<Args>(args)...);
}

}  // namespace tessera
