// nn::Module: the base of every layer. A module names its parameters (tensors an optimizer updates),
// its buffers (state that is saved but not trained, e.g. BatchNorm's running statistics) and its
// child modules, so that parameters(), state_dict() and to() can walk the whole tree with PyTorch's
// dotted names ("fc1.weight", "0.bias", "layers.1.running_mean").
//
// Note [Module registration]: members are plain values, registered by name in the constructor:
//     struct Net : nn::Module {
//       nn::Linear fc1{4, 8}, fc2{8, 2};
//       Tensor scale = ts::ones({2});
//       Net() { register_modules({{"fc1", fc1}, {"fc2", fc2}}); register_parameter("scale", scale); }
//       Tensor forward(Tensor x) override { return fc2(fc1(x).relu()) * scale; }
//     };
// A registered lvalue must be a data member of the registering module: the module records its
// offset from itself, not its address, so a copied or moved module finds its own members and the
// member stays the single source of truth (assigning `fc1.weight = other` ties the weight, as in
// Python). An rvalue (a temporary, std::move, or a std::shared_ptr) is owned by the module instead;
// containers hold their children that way. Copying a module is shallow, as Python's copy.copy:
// tensors are shared handles, owned children are shared, members are copied.
//
// Note [Tensor slots]: named_tensor_slots() hands out every parameter and buffer slot of the tree
// by reference, for code that computes with a module's structure but other tensors in its place:
// nn::DataParallel binds each replica's slots to that device's copies of the module's tensors.
// Assigning to a slot rebinds the member (or the owned tensor) the module reads in forward; nothing
// is registered, checked or converted, and the tensor need not be a leaf (a replica's parameters
// are differentiable copies, as in PyTorch). Unlike parameters() and buffers(), the list is not
// deduplicated: a tied tensor appears under each of its names, a submodule registered twice under
// each of its paths, and a slot registered with no value (PyTorch's None) with an undefined tensor,
// so that two modules of the same structure list their slots in the same order.
//
// Note [Module.to]: to(device, dtype) converts every parameter and buffer in place: the TensorImpl
// that all handles share gets the converted storage, so the handles an optimizer already holds stay
// valid. Gradients are converted with them; requires_grad and hooks are kept. As in PyTorch, a dtype
// applies to floating-point tensors only (num_batches_tracked stays int64).
#pragma once
#include <concepts>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tessera/tensor.h"

namespace tessera::nn {

class Module;

// One entry of register_modules({{"conv1", conv1}, ...}): a data member of the registering module.
struct NamedModule {
  std::string name;
  Module& module;
};

// What load_state_dict(dict, /*strict=*/false) did not match.
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;     // in the module, not in the dict
  std::vector<std::string> unexpected_keys;  // in the dict, not in the module
};

using StateDict = std::map<std::string, Tensor>;

// Module hooks (src/nn/module_hooks.cpp), as PyTorch's. A call's positional tensor arguments are
// `args` (one for forward(Tensor); input1, input2 for Bilinear; query, key, value for
// MultiheadAttention; input, target for a loss; whatever a module passes to call_with_hooks) and its
// tensor results `output` (undefined where the module returns none, as MultiheadAttention's weights
// without need_weights). Non-tensor arguments (options, masks passed by name) are not seen, as
// PyTorch's hooks without with_kwargs.
//   forward pre-hook  hook(module, args) -> replacement args (as many), or nullopt to keep them;
//   forward hook      hook(module, args, output) -> a replacement output (as many), or nullopt;
//   full backward pre-hook  hook(module, grad_output) -> a replacement grad_output, or nullopt;
//   full backward hook      hook(module, grad_input, grad_output) -> a replacement grad_input, or
//                           nullopt. grad_input has one entry per argument: undefined for every
//                           argument when none requires grad, else zeros for an argument that does
//                           not (PyTorch 1.13's values); grad_output one per output, undefined for an
//                           output that received no gradient.
// For modules called with one tensor and returning one, the hooks may take and return Tensor instead
// of vectors (ForwardPreHook, ForwardHook); such a hook on a module called with several arguments
// raises ValueError naming the module.
using ForwardPreHook = std::function<std::optional<Tensor>(Module& module, const Tensor& input)>;
using ForwardHook = std::function<std::optional<Tensor>(Module& module, const Tensor& input, const Tensor& output)>;
using ForwardPreHookArgs =
    std::function<std::optional<std::vector<Tensor>>(Module& module, const std::vector<Tensor>& args)>;
using ForwardHookArgs = std::function<std::optional<std::vector<Tensor>>(
    Module& module, const std::vector<Tensor>& args, const std::vector<Tensor>& output)>;
using BackwardPreHook =
    std::function<std::optional<std::vector<Tensor>>(Module& module, const std::vector<Tensor>& grad_output)>;
using BackwardHook = std::function<std::optional<std::vector<Tensor>>(
    Module& module, const std::vector<Tensor>& grad_input, const std::vector<Tensor>& grad_output)>;

struct ModuleHookRegistry;  // src/nn/module_hooks.cpp

// What a register_*_hook returns: remove() takes the hook off (a no-op once done, or when the module
// is gone), as torch.utils.hooks.RemovableHandle.
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<ModuleHookRegistry> hooks, uint64_t id) : hooks_(std::move(hooks)), id_(id) {}
  void remove();
  uint64_t id() const { return id_; }

 private:
  std::weak_ptr<ModuleHookRegistry> hooks_;
  uint64_t id_ = 0;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;

  // The computation. Modules whose forward takes other arguments (Bilinear, MultiheadAttention,
  // losses) define their own overloads; this one then raises NotImplementedError.
  virtual Tensor forward(Tensor input);
  // forward() with the module's hooks around it (Module hooks, above).
  Tensor operator()(Tensor input);
  // `forward` on `args` with the module's hooks around it: the call path of a module whose forward
  // takes several tensors, e.g. in a module of one's own:
  //   Tensor operator()(const Tensor& x, const Tensor& y) {
  //     return call_with_hooks({x, y}, [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{forward(a[0], a[1])}; })[0];
  //   }
  std::vector<Tensor> call_with_hooks(std::vector<Tensor> args,
                                      const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& forward);

  // ---- hooks (Module hooks, above) ----------------------------------------------------------------
  // prepend: run before the hooks already registered instead of after them.
  RemovableHandle register_forward_pre_hook(ForwardPreHook hook, bool prepend = false);
  RemovableHandle register_forward_pre_hook(ForwardPreHookArgs hook, bool prepend = false);
  RemovableHandle register_forward_hook(ForwardHook hook, bool prepend = false);
  RemovableHandle register_forward_hook(ForwardHookArgs hook, bool prepend = false);
  RemovableHandle register_full_backward_pre_hook(BackwardPreHook hook, bool prepend = false);
  RemovableHandle register_full_backward_hook(BackwardHook hook, bool prepend = false);

  // ---- registration (Note [Module registration]) ----------------------------------------------
  // A parameter requires grad (when floating point and `requires_grad`). An undefined tensor
  // registers the name with no value (PyTorch's None): skipped by parameters() and state_dict().
  Tensor& register_parameter(const std::string& name, Tensor& member, bool requires_grad = true);
  Tensor& register_parameter(const std::string& name, Tensor&& value, bool requires_grad = true);
  // A non-persistent buffer moves with to() but is left out of state_dict().
  Tensor& register_buffer(const std::string& name, Tensor& member, bool persistent = true);
  Tensor& register_buffer(const std::string& name, Tensor&& value, bool persistent = true);
  template <class M>
    requires std::derived_from<M, Module>
  M& register_module(const std::string& name, M& member) {
    add_member_module(name, member);
    return member;
  }
  template <class M>
    requires(std::derived_from<std::remove_cvref_t<M>, Module> && !std::is_lvalue_reference_v<M>)
  std::remove_cvref_t<M>& register_module(const std::string& name, M&& value) {
    auto owned = std::make_shared<std::remove_cvref_t<M>>(std::forward<M>(value));
    add_owned_module(name, owned);
    return *owned;
  }
  template <class M>
    requires std::derived_from<M, Module>
  M& register_module(const std::string& name, std::shared_ptr<M> owned) {
    add_owned_module(name, owned);
    return *owned;
  }
  void register_modules(std::initializer_list<NamedModule> members);

  // ---- traversal (registration order, depth first, as PyTorch) ----------------------------------
  // Shared tensors (tied weights) and modules are listed once, under their first name.
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(const std::string& prefix = "", bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(const std::string& prefix = "", bool recurse = true) const;
  std::vector<Module*> children() const;
  std::vector<std::pair<std::string, Module*>> named_children() const;
  std::vector<Module*> modules();  // this module first
  std::vector<std::pair<std::string, Module*>> named_modules(const std::string& prefix = "");
  // Applies fn to every submodule (children first), then to this one, as Module.apply.
  Module& apply(const std::function<void(Module&)>& fn);
  // Every parameter and buffer slot, by reference (Note [Tensor slots]): this module's in registration
  // order, then each submodule's, depth first.
  struct NamedTensorSlot {
    std::string name;   // dotted, as named_parameters() and named_buffers() spell it
    bool is_parameter;  // else a buffer
    Tensor& tensor;     // the slot itself
  };
  std::vector<NamedTensorSlot> named_tensor_slots(const std::string& prefix = "");
  // A parameter, buffer or submodule by dotted name ("encoder.0.weight"); IndexError if absent.
  Tensor get_parameter(const std::string& target) const;
  Tensor get_buffer(const std::string& target) const;
  Module& get_submodule(const std::string& target) const;
  // dynamic_cast with an error naming both types, e.g. `seq[0].as<nn::Linear>().weight`.
  template <class M> M& as() {
    M* p = dynamic_cast<M*>(this);
    if (!p) throw_bad_cast(typeid(M).name());
    return *p;
  }

  // ---- mode, device, gradients ------------------------------------------------------------------
  Module& train(bool mode = true);  // this module and every submodule
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  Module& to(Device device);
  Module& to(DType dtype);
  Module& to(Device device, DType dtype);
  Module& to(const char* device) { return to(Device(device)); }
  Module& requires_grad_(bool requires_grad = true);
  void zero_grad(bool set_to_none = true);

  // ---- state --------------------------------------------------------------------------------------
  // Parameters and persistent buffers by dotted name, detached (sharing storage with the module).
  StateDict state_dict(const std::string& prefix = "") const;
  // Copies values into the module's tensors (converting dtype and device). strict: every key must
  // match (ValueError listing the missing and unexpected keys). Shapes must match (ShapeError).
  LoadStateDictResult load_state_dict(const StateDict& state, bool strict = true);

  // ---- printing, as PyTorch's repr ------------------------------------------------------------------
  virtual std::string name() const;        // "Linear": the class name without namespaces
  virtual std::string extra_repr() const;  // "in_features=4, out_features=8, bias=True"
  std::string repr() const;

 protected:
  // Copies are shallow (Note [Module registration]); protected so that a Module is never sliced.
  Module(const Module&) = default;
  Module(Module&&) = default;
  Module& operator=(const Module&) = default;
  Module& operator=(Module&&) = default;

  void add_member_module(const std::string& name, Module& member);
  void add_owned_module(const std::string& name, std::shared_ptr<Module> owned);

 private:
  enum class Kind { Parameter, Buffer };
  struct TensorSlot {
    std::string name;
    Kind kind;
    bool persistent = true;
    std::optional<std::ptrdiff_t> offset;  // a data member, at this offset from `this`
    Tensor owned;                          // otherwise owned here
  };
  struct ModuleSlot {
    std::string name;
    std::optional<std::ptrdiff_t> offset;
    std::shared_ptr<Module> owned;
  };

  Tensor& add_tensor(const std::string& name, Kind kind, Tensor* member, Tensor&& value, bool persistent);
  std::ptrdiff_t member_offset(const std::string& name, const void* member) const;
  void check_new_name(const std::string& name, const char* what) const;
  Tensor& slot_tensor(const TensorSlot& s) const;
  Module* slot_module(const ModuleSlot& s) const;
  void collect_tensors(Kind kind, const std::string& prefix, bool recurse, bool persistent_only, bool dedup,
                       std::vector<std::pair<std::string, Tensor>>& out, std::vector<const void*>& seen) const;
  void collect_slots(const std::string& prefix, std::vector<NamedTensorSlot>& out);
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out,
                       std::vector<const Module*>& seen);
  void repr_into(std::ostream& os, int indent) const;
  [[noreturn]] void throw_bad_cast(const char* target_type) const;

  ModuleHookRegistry& hooks();

  std::vector<TensorSlot> tensors_;
  std::vector<ModuleSlot> modules_;
  bool training_ = true;
  std::shared_ptr<ModuleHookRegistry> hooks_;  // null until a hook is registered; shared by copies
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace tessera::nn
