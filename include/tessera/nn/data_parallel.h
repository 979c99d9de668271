// nn::DataParallel, as torch.nn.DataParallel: one process drives several devices. Each forward
// scatters the inputs along `dim` over device_ids, replicates the module onto each device, runs the
// replicas in parallel (one host thread each) and gathers their outputs onto output_device; backward
// sums the replicas' gradients into the module's parameters. It is the single-process baseline that
// DistributedDataParallel (one process per device, tessera/distributed/ddp.h) is measured against: it
// copies every parameter to every device and gathers every output on one device each step.
//
//   Net net;                                              // data members: nn::Linear fc1, fc2; ...
//   net.to("cuda:0");                                     // parameters and buffers on device_ids[0]
//   ts::nn::DataParallel dp(net, {"cuda:0", "cuda:1"});   // replicas: copies of net, each forward
//   ts::optim::SGD opt(dp.parameters(), {.lr = 0.1});
//   for (...) { opt.zero_grad(); F::cross_entropy(dp(x), y).backward(); opt.step(); }
//
//   auto resnet = ts::models::resnet50();                 // children owned by Sequentials: a factory
//   ts::nn::DataParallel dp(resnet, [] { return ts::models::resnet50(); }, {"cuda:0", "cuda:1"});
//
// Note [DataParallel replicas]: a replica is a module of the module's structure whose parameter and
// buffer slots (Note [Tensor slots]) are bound, each forward, to one device's copies of the module's
// tensors, as PyTorch's replicate():
//  - tensors that require grad (with grad mode on) go through one Broadcast autograd function: the
//    outputs for device_ids[0] alias the module's parameters, the others are copies. Its backward
//    (PyTorch's ReduceAddCoalesced) sums each parameter's replica gradients on device_ids[0] in
//    replica order, so the module's .grad is the sum over the replicas, added in a fixed order.
//  - other parameters and every buffer are copied without history, and device_ids[0]'s replica gets
//    the module's own tensors. So replica 0 shares the module's buffers: its in-place updates
//    (BatchNorm's running statistics, num_batches_tracked) land in the module, and the other
//    replicas' updates are lost, as PyTorch documents.
// Where replicas come from (a libtorch user would call clone(); tessera's C++ copy is the clone):
//  - By default replica r is a copy of the module, made each forward by M's copy constructor: a
//    shallow copy (Note [Module registration]) that takes the module's current settings, training
//    mode and hooks, as PyTorch's replicas copy the module's __dict__. A copy is independent of the
//    module only when every submodule is a data member: an owned child (what a Sequential,
//    ModuleList or ModuleDict holds, or a module registered as an rvalue or a std::shared_ptr) is
//    shared between copies, and binding the copy's slots would rebind the module's own. DataParallel
//    checks that the copy shares no submodule, at construction and each forward, and raises
//    otherwise, asking for a replica factory.
//  - With a replica factory (a callable returning an M), one replica per device is built at
//    construction. The default generators are restored afterwards, so that building them draws no
//    random numbers as far as the program can tell; their own tensors are dropped at once. Their
//    slots must match the module's (names, kinds and shapes: checked at construction; the names again
//    each forward; dtypes and devices need not, since the slots are rebound). Each forward copies the
//    module's training flags to them; other settings (a Dropout's p, a BatchNorm's momentum) are what
//    the factory made, and the module's hooks are not theirs.
//  - After a forward the replicas' slots are emptied. The copies made for a forward that recorded a
//    graph live as long as that graph (Broadcast's context holds them), since a module's full
//    backward hook is called with the replica it ran on.
//
// Note [DataParallel threads]: replica r runs on a host thread of its own (the caller's thread when
// there is one replica) with device_ids[r] current, the caller's current stream of that device, and
// the caller's grad mode and autocast state (CPU and CUDA), as PyTorch's parallel_apply. An exception
// in a replica is raised again in the caller as "DataParallel: Caught ValueError in replica 1 on
// device cuda:1.\nOriginal error: ..." (the first failing replica in replica order, after every thread
// has finished): of the same class for tessera's errors, a tessera::Error naming the class otherwise.
// Random ops in replicas draw from the shared default generators in whatever order the threads reach
// them, so dropout under DataParallel is not reproducible run to run (PyTorch's per-device generators
// are not either). Backward runs on the caller's thread.
//
// Scatter and gather: each input is split along dim as torch.chunk splits it into len(device_ids)
// chunks, so a batch that is not divisible, or smaller than the device count, runs fewer replicas
// (5 samples on 4 devices: chunks of 2, 2 and 1 on the first three), as PyTorch's scatter. Inputs
// must agree in that dim's size (PyTorch zips their chunks and silently drops the surplus; here it is
// an error). The replicas' outputs (a Tensor, a std::tuple of Tensors or a std::vector<Tensor>) are
// concatenated along dim on output_device; 0-dim outputs with dim 0 are gathered into a vector, as
// PyTorch's gather does (which warns). Scatter and gather are differentiable.
//
// Devices: CUDA devices, distinct, or the CPU. The CPU may be listed several times ({"cpu", "cpu"}):
// the entries name one memory, yet each is a replica of its own, with copied tensors and a thread of
// its own, which is how the scatter, replicate, parallel-apply and gather logic runs without a GPU
// (its tests do). Lists mixing CPU and CUDA, or naming the meta device, are refused. Without
// device_ids, every visible GPU is used; with none visible the module is called as it is (PyTorch's
// behaviour without CUDA). With one device id the inputs are moved there and the module itself is
// called (no replica), and the constructor moves the module there, both as PyTorch's.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/nn/module.h"
#include "tessera/profiler.h"

namespace tessera::nn {

namespace detail {

// What DataParallel does that does not depend on the module's type (src/nn/data_parallel.cpp).
class DataParallelBase : public Module {
 public:
  ~DataParallelBase() override;
  DataParallelBase(const DataParallelBase&) = delete;
  DataParallelBase& operator=(const DataParallelBase&) = delete;

  // Empty when no GPU is visible and none was named (the module is then called as it is).
  const std::vector<Device>& device_ids() const { return device_ids_; }
  Device output_device() const { return output_device_; }
  int64_t dim() const { return dim_; }
  std::string name() const override { return "DataParallel"; }

 protected:
  // device_ids: nullopt for every visible GPU. Registers `module` as the child "module" (not owned).
  DataParallelBase(Module& module, std::optional<std::vector<Device>> device_ids, std::optional<Device> output_device,
                   int64_t dim);

  // The module's parameters and buffers must be on device_ids[0] (PyTorch's check, each forward).
  void check_module_device() const;
  // Replica r's part of every input: chunks along dim, moved to device_ids[r]; as many replicas as
  // chunks (fewer than the devices for a small batch).
  std::vector<std::vector<Tensor>> scatter(const std::vector<Tensor>& inputs) const;
  // A copy of the module made by the default path must share no submodule with it.
  void check_independent_copy(Module& copy) const;
  // A factory's replica for device_ids[r]: its slots must match the module's; its tensors are dropped.
  void adopt_replica(Module& replica, size_t r) const;
  // Binds replicas[r]'s slots to device_ids[r]'s copies of the module's tensors (Note [DataParallel
  // replicas]); `keep_alive` is held by the backward graph. copy_training: also copy the module's
  // training flags (factory replicas).
  void bind_replicas(const std::vector<Module*>& replicas, std::shared_ptr<void> keep_alive, bool copy_training) const;
  // Empties every slot of the replicas.
  static void release_replicas(const std::vector<Module*>& replicas);
  // run(r) for r in [0, n), each on its own thread (Note [DataParallel threads]).
  void parallel_apply(size_t n, const std::function<void(size_t)>& run) const;
  // Concatenates one output of every replica along dim on output_device.
  Tensor gather(std::vector<Tensor> outputs, size_t output_index) const;

  // Makes the default generators' state at construction come back at destruction.
  class GeneratorsRestore {
   public:
    GeneratorsRestore();
    ~GeneratorsRestore();
    GeneratorsRestore(const GeneratorsRestore&) = delete;
    GeneratorsRestore& operator=(const GeneratorsRestore&) = delete;

   private:
    uint64_t cpu_seed_, cpu_offset_, cuda_seed_, cuda_offset_;
  };

  template <class T> friend struct GatherOutputs;

  Module& module_base_;

 private:
  std::vector<Device> device_ids_;
  Device output_device_;
  int64_t dim_ = 0;
};

// The gather of a forward's result: a Tensor, a std::tuple of Tensors or a std::vector<Tensor>.
template <class T> struct GatherOutputs {
  static_assert(sizeof(T) == 0, "DataParallel: the module's forward must return a Tensor, a std::tuple of Tensors or a "
                                "std::vector<Tensor> to be gathered");
};
template <> struct GatherOutputs<Tensor> {
  static Tensor gather(const DataParallelBase& dp, std::vector<Tensor> outs) { return dp.gather(std::move(outs), 0); }
};
template <> struct GatherOutputs<std::vector<Tensor>> {
  // Every replica must return as many tensors (ValueError otherwise).
  static std::vector<Tensor> gather(const DataParallelBase& dp, std::vector<std::vector<Tensor>> outs);
};
template <class... T> struct GatherOutputs<std::tuple<T...>> {
  static_assert((std::is_same_v<T, Tensor> && ...), "DataParallel: a tuple output must hold Tensors only");
  static std::tuple<T...> gather(const DataParallelBase& dp, std::vector<std::tuple<T...>> outs) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return std::tuple<T...>{dp.gather(column<I>(outs), I)...};
    }(std::index_sequence_for<T...>{});
  }
  template <size_t I> static std::vector<Tensor> column(std::vector<std::tuple<T...>>& outs) {
    std::vector<Tensor> c;
    c.reserve(outs.size());
    for (auto& o : outs) c.push_back(std::move(std::get<I>(o)));
    return c;
  }
};

}  // namespace detail

template <class M>
  requires std::derived_from<M, Module>
class DataParallel : public detail::DataParallelBase {
 public:
  using ReplicaFactory = std::function<M()>;

  // Every visible GPU; replicas are copies of `module` (Note [DataParallel replicas]).
  explicit DataParallel(M& module)
    requires std::copy_constructible<M>
      : DataParallelBase(module, std::nullopt, std::nullopt, 0), module_(module) {
    check_copies();
  }
  // `module` is not owned: it must outlive the wrapper. output_device defaults to device_ids[0].
  DataParallel(M& module, std::vector<Device> device_ids, std::optional<Device> output_device = std::nullopt,
               int64_t dim = 0)
    requires std::copy_constructible<M>
      : DataParallelBase(module, std::move(device_ids), output_device, dim), module_(module) {
    check_copies();
  }
  // Replicas built once by `make_replica` (Note [DataParallel replicas]).
  DataParallel(M& module, std::type_identity_t<ReplicaFactory> make_replica)
      : DataParallelBase(module, std::nullopt, std::nullopt, 0), module_(module) {
    build_replicas(make_replica);
  }
  DataParallel(M& module, std::type_identity_t<ReplicaFactory> make_replica, std::vector<Device> device_ids,
               std::optional<Device> output_device = std::nullopt, int64_t dim = 0)
      : DataParallelBase(module, std::move(device_ids), output_device, dim), module_(module) {
    build_replicas(make_replica);
  }

  M& module() { return module_; }
  const M& module() const { return module_; }

  // One input: calls each replica with its hooks (Module::operator(), which M may hide).
  Tensor forward(Tensor input) override {
    return run<Tensor>({std::move(input)},
                       [](M& m, std::vector<Tensor>& in) { return static_cast<Module&>(m)(std::move(in[0])); });
  }
  // Several inputs, each scattered along dim: M::forward(Tensor, Tensor, ...) on each replica; its
  // result (a Tensor, a std::tuple of Tensors or a std::vector<Tensor>) is gathered.
  template <class... Ts>
    requires(sizeof...(Ts) >= 2 && (std::same_as<std::remove_cvref_t<Ts>, Tensor> && ...))
  auto forward(Ts&&... inputs) {
    using R = std::remove_cvref_t<decltype(std::declval<M&>().forward(std::declval<Ts>()...))>;
    return run<R>({Tensor(std::forward<Ts>(inputs))...}, [](M& m, std::vector<Tensor>& in) {
      return [&]<size_t... I>(std::index_sequence<I...>) { return m.forward(std::move(in[I])...); }(
          std::index_sequence_for<Ts...>{});
    });
  }
  using Module::operator();
  template <class... Ts>
    requires(sizeof...(Ts) >= 2 && (std::same_as<std::remove_cvref_t<Ts>, Tensor> && ...))
  auto operator()(Ts&&... inputs) {
    return forward(std::forward<Ts>(inputs)...);
  }

 private:
  template <class R, class Call>
  R run(std::vector<Tensor> inputs, Call call) {
    profiler::record_function scope("DataParallel.forward");
    if (device_ids().empty()) return call(module_, inputs);
    check_module_device();
    std::vector<std::vector<Tensor>> chunks = scatter(inputs);
    if (device_ids().size() == 1) return call(module_, chunks[0]);
    const size_t n = chunks.size();

    // The replicas of this forward: fresh copies, or the factory's first n.
    auto copies = std::make_shared<std::vector<std::shared_ptr<M>>>();
    std::vector<Module*> bases;
    std::vector<M*> replicas;
    for (size_t r = 0; r < n; ++r) {
      M* m = nullptr;
      if (factory_replicas_.empty()) {
        copies->push_back(std::make_shared<M>(module_));
        m = copies->back().get();
        if (r == 0) check_independent_copy(*m);
      } else {
        m = factory_replicas_[r].get();
      }
      replicas.push_back(m);
      bases.push_back(m);
    }
    struct Release {
      const std::vector<Module*>& replicas;
      ~Release() { release_replicas(replicas); }
    } release{bases};
    const bool factory = !factory_replicas_.empty();
    bind_replicas(bases, factory ? nullptr : copies, /*copy_training=*/factory);

    std::vector<std::optional<R>> outputs(n);
    parallel_apply(n, [&](size_t r) { outputs[r].emplace(call(*replicas[r], chunks[r])); });
    std::vector<R> results;
    results.reserve(n);
    for (auto& o : outputs) results.push_back(std::move(*o));
    return detail::GatherOutputs<R>::gather(*this, std::move(results));
  }

  void check_copies() {
    if (device_ids().size() < 2) return;
    M copy(module_);
    check_independent_copy(copy);
  }

  void build_replicas(const ReplicaFactory& make_replica) {
    if (device_ids().size() < 2) return;
    {
      GeneratorsRestore restore;
      for (size_t r = 0; r < device_ids().size(); ++r) factory_replicas_.push_back(std::make_shared<M>(make_replica()));
    }
    for (size_t r = 0; r < factory_replicas_.size(); ++r) adopt_replica(*factory_replicas_[r], r);
  }

  M& module_;
  std::vector<std::shared_ptr<M>> factory_replicas_;  // one per device, when built by a factory
};

}  // namespace tessera::nn
