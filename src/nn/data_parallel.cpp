// nn::DataParallel's part that does not depend on the module's type (tessera/nn/data_parallel.h): the
// device checks, scatter, the Broadcast autograd function that binds the replicas' slots (Note
// [DataParallel replicas]), the threads of parallel_apply (Note [DataParallel threads]) and gather.
// Invariant: the module's own slots are never written; only replicas' are, and each forward empties
// them again.
#include "tessera/nn/data_parallel.h"

#include <cxxabi.h>

#include <any>
#include <cstdlib>
#include <exception>
#include <thread>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#include "tessera/amp.h"
#include "tessera/autograd.h"
#include "tessera/cuda.h"
#include "tessera/functions.h"
#include "tessera/generator.h"

namespace tessera::nn::detail {

using ::tessera::detail::str_cat;

namespace {

std::string device_list(const std::vector<Device>& devices) {
  std::string s = "[";
  for (size_t i = 0; i < devices.size(); ++i) s += (i ? ", " : "") + devices[i].str();
  return s + "]";
}

std::string demangle(const char* mangled) {
  int status = 0;
  char* s = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && s ? s : mangled;
  std::free(s);
  return out;
}

// ---- Broadcast (PyTorch's Broadcast / ReduceAddCoalesced) ----------------------------------------
// inputs: the module's tensors that take gradients, on devices[0]. Outputs: for each device r in
// order, one tensor per input: the input itself for devices[0] (which apply_custom_function turns
// into an alias with this node's history), a copy for the others.
std::vector<Tensor> broadcast_backward(autograd::FunctionContext& ctx, const std::vector<Tensor>& grads) {
  const auto count = static_cast<size_t>(ctx.scalars.at("count"));
  const Device source = std::any_cast<Device>(ctx.values.at("source"));
  std::vector<Tensor> sums(count);
  // In replica order, on the source device: the module's .grad is the same sum each run.
  for (size_t r = 0; r * count < grads.size(); ++r) {
    for (size_t j = 0; j < count; ++j) {
      const Tensor& g = grads[r * count + j];
      if (!g.defined()) continue;  // that replica's output took no gradient
      Tensor here = g.to(source);
      sums[j] = sums[j].defined() ? add(sums[j], here) : here;
    }
  }
  return sums;
}

std::vector<Tensor> broadcast(const std::vector<Tensor>& tensors, const std::vector<Device>& devices,
                              const std::shared_ptr<void>& keep_alive) {
  return autograd::detail::apply_custom_function(
      "BroadcastBackward", tensors,
      [&](autograd::FunctionContext& ctx) {
        ctx.set_materialize_grads(false);
        ctx.scalars["count"] = static_cast<double>(tensors.size());
        ctx.values["source"] = devices[0];
        ctx.values["replicas"] = keep_alive;  // Note [DataParallel replicas]: a backward hook's module
        std::vector<Tensor> out;
        out.reserve(tensors.size() * devices.size());
        for (size_t r = 0; r < devices.size(); ++r) {
          for (const Tensor& t : tensors)
            out.push_back(r == 0 ? t : t.to(devices[r], /*non_blocking=*/false, /*copy=*/true));
        }
        return out;
      },
      &broadcast_backward, /*once_differentiable=*/false);
}

// ---- threads ---------------------------------------------------------------------------------------
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

// The caller's thread-local state that a replica's thread takes over (Note [DataParallel threads]).
struct ThreadState {
  bool grad_enabled = true;
  bool autocast_cpu = false, autocast_cuda = false;
  DType autocast_cpu_dtype = kBFloat16, autocast_cuda_dtype = kFloat16;
  bool autocast_cache = true;

  static ThreadState of_caller() {
    ThreadState s;
    s.grad_enabled = is_grad_enabled();
    s.autocast_cpu = amp::is_autocast_enabled(DeviceType::CPU);
    s.autocast_cuda = amp::is_autocast_enabled(DeviceType::CUDA);
    if (s.autocast_cpu) s.autocast_cpu_dtype = amp::get_autocast_dtype(DeviceType::CPU);
    if (s.autocast_cuda) s.autocast_cuda_dtype = amp::get_autocast_dtype(DeviceType::CUDA);
    s.autocast_cache = amp::is_autocast_cache_enabled();
    return s;
  }
};

// Raises a replica's exception again in the caller: the same class for tessera's errors, with the
// replica and its device in front (PyTorch's ExceptionWrapper.reraise).
[[noreturn]] void reraise(const std::exception_ptr& error, size_t replica, Device device) {
  auto message = [&](const std::string& cls, const char* what) {
    return str_cat("DataParallel: Caught ", cls, " in replica ", replica, " on device ", device.str(),
                   ".\nOriginal error: ", what);
  };
  try {
    std::rethrow_exception(error);
  } catch (const ShapeError& e) {
    throw ShapeError(message("ShapeError", e.what()));
  } catch (const DTypeError& e) {
    throw DTypeError(message("DTypeError", e.what()));
  } catch (const DeviceError& e) {
    throw DeviceError(message("DeviceError", e.what()));
  } catch (const IndexError& e) {
    throw IndexError(message("IndexError", e.what()));
  } catch (const ValueError& e) {
    throw ValueError(message("ValueError", e.what()));
  } catch (const IOError& e) {
    throw IOError(message("IOError", e.what()));
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(message("OutOfMemoryError", e.what()));
  } catch (const NotImplementedError& e) {
    throw NotImplementedError(message("NotImplementedError", e.what()));
  } catch (const Error& e) {
    throw Error(message("Error", e.what()));
  } catch (const std::exception& e) {
    throw Error(message(demangle(typeid(e).name()), e.what()));
  } catch (...) {
    throw Error(message("an exception of unknown type", "(not a std::exception)"));
  }
}

}  // namespace

// ---- construction ------------------------------------------------------------------------------------

DataParallelBase::DataParallelBase(Module& module, std::optional<std::vector<Device>> device_ids,
                                   std::optional<Device> output_device, int64_t dim)
    : module_base_(module), dim_(dim) {
  register_module("module", std::shared_ptr<Module>(std::shared_ptr<Module>(), &module));  // not owned
  if (!device_ids) {
    for (int i = 0; i < cuda::device_count(); ++i) device_ids_.push_back(Device::cuda(i));
    if (device_ids_.empty()) {  // no GPU: the module is called as it is
      output_device_ = output_device.value_or(kCPU);
      return;
    }
  } else {
    TS_CHECK(!device_ids->empty(), ValueError, "DataParallel: device_ids is empty; expected at least one device "
             "(leave device_ids out to use every visible GPU)");
    device_ids_ = std::move(*device_ids);
  }
  const std::string list = device_list(device_ids_);
  for (size_t i = 0; i < device_ids_.size(); ++i) {
    const Device d = device_ids_[i];
    TS_CHECK(!d.is_meta(), ValueError, "DataParallel: device_ids[", i, "] is meta, which holds no data (device_ids ",
             list, "); expected CUDA devices or the CPU");
    TS_CHECK(d.type() == device_ids_[0].type(), ValueError, "DataParallel: device_ids mixes ", device_ids_[0].str(),
             " and ", d.str(), " (", list, "); expected devices of one type: CUDA devices, or the CPU");
    for (size_t j = 0; j < i && d.is_cuda(); ++j)
      TS_CHECK(!(device_ids_[j] == d), ValueError, "DataParallel: device_ids lists ", d.str(), " twice (", list,
               "); expected distinct devices (only the CPU may be listed more than once)");
  }
  for (size_t i = 0; i < device_ids_.size() && device_ids_[0].is_cuda(); ++i) {
    const Device d = device_ids_[i];
    TS_CHECK(cuda::is_built(), DeviceError, "DataParallel: device_ids[", i, "] is ", d.str(),
             ", but tessera was built without CUDA");
    TS_CHECK(d.index() < cuda::device_count(), DeviceError, "DataParallel: device_ids[", i, "] is ", d.str(), ", but ",
             cuda::device_count(), " CUDA device(s) are visible");
  }
  output_device_ = output_device.value_or(device_ids_[0]);
  TS_CHECK(!output_device_.is_meta(), ValueError, "DataParallel: output_device is meta, which holds no data; expected "
           "a CUDA device or the CPU");
  if (output_device_.is_cuda()) {
    TS_CHECK(output_device_.index() < cuda::device_count(), DeviceError, "DataParallel: output_device is ",
             output_device_.str(), ", but ", cuda::device_count(), " CUDA device(s) are visible");
  }
  if (device_ids_.size() == 1) module.to(device_ids_[0]);  // as PyTorch's __init__
}

DataParallelBase::~DataParallelBase() = default;

DataParallelBase::GeneratorsRestore::GeneratorsRestore() {
  Generator& cpu = default_generator(kCPU);
  Generator& gpu = default_generator(Device::cuda());
  cpu_seed_ = cpu.seed();
  cpu_offset_ = cpu.offset();
  cuda_seed_ = gpu.seed();
  cuda_offset_ = gpu.offset();
}

DataParallelBase::GeneratorsRestore::~GeneratorsRestore() {
  Generator& cpu = default_generator(kCPU);
  Generator& gpu = default_generator(Device::cuda());
  cpu.manual_seed(cpu_seed_);
  cpu.set_offset(cpu_offset_);
  gpu.manual_seed(cuda_seed_);
  gpu.set_offset(cuda_offset_);
}

// ---- checks --------------------------------------------------------------------------------------------

void DataParallelBase::check_module_device() const {
  const Device source = device_ids_[0];
  auto check = [&](const std::pair<std::string, Tensor>& named) {
    TS_CHECK(named.second.device() == source, DeviceError, "DataParallel: module must have its parameters and buffers "
             "on device ", source.str(), " (device_ids[0]) but found one of them on device: ",
             named.second.device().str(), " (", named.first, ")");
  };
  for (const auto& p : module_base_.named_parameters()) check(p);
  for (const auto& b : module_base_.named_buffers()) check(b);
}

void DataParallelBase::check_independent_copy(Module& copy) const {
  std::unordered_set<const Module*> own;
  for (Module* m : module_base_.modules()) own.insert(m);
  for (const auto& [name, m] : copy.named_modules()) {
    TS_CHECK(!own.count(m), ValueError, "DataParallel: a copy of ", module_base_.name(), " shares its submodule '",
             name, "' (", m->name(), ") with the module, so copies cannot be its replicas: an owned child (the "
             "modules of a Sequential, ModuleList or ModuleDict, or one registered as an rvalue or a "
             "std::shared_ptr) is shared by copies (Note [Module registration]); pass a replica factory instead, "
             "DataParallel(module, [] { return ", module_base_.name(), "(...); }, device_ids)");
  }
}

void DataParallelBase::adopt_replica(Module& replica, size_t r) const {
  const std::string who = str_cat("DataParallel: the replica factory's module for device_ids[", r, "] (",
                                  device_ids_[r].str(), ")");
  TS_CHECK(&replica != &module_base_, ValueError, who, " is the module itself; expected a new module of its structure");
  std::vector<NamedTensorSlot> want = module_base_.named_tensor_slots();
  std::vector<NamedTensorSlot> got = replica.named_tensor_slots();
  TS_CHECK(got.size() == want.size(), ValueError, who, " has ", got.size(),
           " parameter and buffer slots, but the module (", module_base_.name(), ") has ", want.size(),
           "; expected a module of the same structure");
  auto kind = [](const NamedTensorSlot& s) { return s.is_parameter ? "parameter" : "buffer"; };
  for (size_t k = 0; k < want.size(); ++k) {
    const NamedTensorSlot &w = want[k], &g = got[k];
    TS_CHECK(g.name == w.name && g.is_parameter == w.is_parameter, ValueError, who, " has the ", kind(g), " '", g.name,
             "' where the module has the ", kind(w), " '", w.name, "'; expected a module of the same structure");
    TS_CHECK(g.tensor.defined() == w.tensor.defined(), ValueError, who, ": '", w.name, "' is ",
             g.tensor.defined() ? "a tensor" : "None", " but the module's is ",
             w.tensor.defined() ? "a tensor" : "None");
    if (!w.tensor.defined()) continue;
    TS_CHECK(g.tensor.sizes() == w.tensor.sizes(), ShapeError, who, ": '", w.name, "' has size ", g.tensor.sizes(),
             " but the module's has size ", w.tensor.sizes());
  }
  auto want_modules = module_base_.named_modules();
  auto got_modules = replica.named_modules();
  TS_CHECK(got_modules.size() == want_modules.size(), ValueError, who, " has ", got_modules.size(),
           " modules, but the module has ", want_modules.size(), "; expected a module of the same structure");
  for (size_t k = 0; k < want_modules.size(); ++k)
    TS_CHECK(got_modules[k].first == want_modules[k].first, ValueError, who, " has the submodule '",
             got_modules[k].first, "' where the module has '", want_modules[k].first, "'");
  for (NamedTensorSlot& s : got) s.tensor = Tensor();  // its own values are never used
}

// ---- scatter, replicate, parallel_apply, gather ---------------------------------------------------------

std::vector<std::vector<Tensor>> DataParallelBase::scatter(const std::vector<Tensor>& inputs) const {
  int64_t batch = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    TS_CHECK(x.defined(), ValueError, "DataParallel: input ", i,
             " is an undefined tensor; expected a tensor to scatter along dim ", dim_);
    TS_CHECK(!x.is_meta(), DeviceError, "DataParallel: input ", i, " is on the meta device, which holds no data; "
             "expected a tensor on the CPU or a CUDA device to scatter over device_ids ", device_list(device_ids_));
    TS_CHECK(x.dim() > 0, ShapeError, "DataParallel: input ", i, " is a 0-dim tensor; expected a tensor with a dim ",
             dim_, " to scatter along");
    TS_CHECK(dim_ >= -x.dim() && dim_ < x.dim(), IndexError, "DataParallel: Dimension out of range (expected to be in "
             "range of [", -x.dim(), ", ", x.dim() - 1, "], but got ", dim_, ") for input ", i, " of size ", x.sizes());
    const int64_t size = x.size(dim_ < 0 ? dim_ + x.dim() : dim_);
    TS_CHECK(size > 0, ValueError, "DataParallel: input ", i, " of size ", x.sizes(), " has size 0 along dim ", dim_,
             "; expected at least one sample to scatter over device_ids");
    if (i == 0) batch = size;
    TS_CHECK(size == batch, ShapeError, "DataParallel: input ", i, " has size ", size, " along dim ", dim_,
             " but input 0 has size ", batch, "; every input is scattered along dim ", dim_,
             " and must have the same size there");
  }
  std::vector<std::vector<Tensor>> pieces;  // [input][chunk]
  for (const Tensor& x : inputs) pieces.push_back(x.chunk(static_cast<int64_t>(device_ids_.size()), dim_));
  const size_t n = pieces.empty() ? 0 : pieces[0].size();  // as many for every input: same size along dim
  std::vector<std::vector<Tensor>> out(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& p : pieces) out[r].push_back(p[r].to(device_ids_[r]));
  return out;
}

void DataParallelBase::bind_replicas(const std::vector<Module*>& replicas, std::shared_ptr<void> keep_alive,
                                     bool copy_training) const {
  const size_t n = replicas.size();
  std::vector<NamedTensorSlot> source = module_base_.named_tensor_slots();
  // The distinct tensors, in slot order (a tied tensor is broadcast once and stays tied).
  std::vector<Tensor> tensors;
  std::vector<int64_t> slot_tensor(source.size(), -1);
  std::unordered_map<const void*, size_t> index;
  for (size_t k = 0; k < source.size(); ++k) {
    const Tensor& t = source[k].tensor;
    if (!t.defined()) continue;
    auto [it, added] = index.emplace(t.impl(), tensors.size());
    if (added) tensors.push_back(t);
    slot_tensor[k] = static_cast<int64_t>(it->second);
  }
  // Those that take gradients go through Broadcast; the others are copied without history.
  const bool grad = is_grad_enabled();
  std::vector<Tensor> differentiable;
  std::vector<int64_t> position(tensors.size(), -1);
  for (size_t u = 0; u < tensors.size(); ++u) {
    if (!grad || !tensors[u].requires_grad()) continue;
    position[u] = static_cast<int64_t>(differentiable.size());
    differentiable.push_back(tensors[u]);
  }
  const std::vector<Device> devices(device_ids_.begin(), device_ids_.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<Tensor> broadcasted;  // [r * differentiable.size() + j]
  if (!differentiable.empty()) broadcasted = broadcast(differentiable, devices, keep_alive);

  std::vector<Module*> module_tree;
  if (copy_training) module_tree = module_base_.modules();
  for (size_t r = 0; r < n; ++r) {
    std::vector<NamedTensorSlot> slots = replicas[r]->named_tensor_slots();
    TS_CHECK(slots.size() == source.size(), ValueError, "DataParallel: the replica for device_ids[", r, "] has ",
             slots.size(), " parameter and buffer slots, but the module has ", source.size(),
             "; the module's structure changed since the replicas were made");
    std::vector<Tensor> copies(tensors.size());
    for (size_t k = 0; k < slots.size(); ++k) {
      TS_CHECK(slots[k].name == source[k].name, ValueError, "DataParallel: the replica for device_ids[", r, "] has '",
               slots[k].name, "' where the module has '", source[k].name,
               "'; the module's structure changed since the replicas were made");
      const int64_t u = slot_tensor[k];
      if (u < 0) {
        slots[k].tensor = Tensor();
      } else if (position[u] >= 0) {
        slots[k].tensor = broadcasted[r * differentiable.size() + static_cast<size_t>(position[u])];
      } else if (r == 0) {
        slots[k].tensor = tensors[u];  // replica 0 shares the module's buffers
      } else {
        if (!copies[u].defined()) {
          NoGradGuard no_grad;
          copies[u] = tensors[u].to(devices[r], /*non_blocking=*/false, /*copy=*/true);
        }
        slots[k].tensor = copies[u];
      }
    }
    if (copy_training) {
      std::vector<Module*> tree = replicas[r]->modules();
      TS_CHECK(tree.size() == module_tree.size(), ValueError, "DataParallel: the replica for device_ids[", r, "] has ",
               tree.size(), " modules, but the module has ", module_tree.size(),
               "; the module's structure changed since the replicas were made");
      // Preorder: a module's own flag is set after its ancestors' train() reached it.
      for (size_t i = 0; i < tree.size(); ++i) tree[i]->train(module_tree[i]->is_training());
    }
  }
}

void DataParallelBase::release_replicas(const std::vector<Module*>& replicas) {
  for (Module* m : replicas)
    for (NamedTensorSlot& s : m->named_tensor_slots()) s.tensor = Tensor();
}

void DataParallelBase::parallel_apply(size_t n, const std::function<void(size_t)>& run) const {
  const ThreadState state = ThreadState::of_caller();
  std::vector<std::optional<cuda::Stream>> streams(n);
  for (size_t r = 0; r < n; ++r)
    if (device_ids_[r].is_cuda()) streams[r] = cuda::current_stream(device_ids_[r].index());
  std::vector<std::exception_ptr> errors(n);
  auto work = [&](size_t r) {
    try {
      GradModeGuard grad(state.grad_enabled);
      std::optional<cuda::StreamGuard> stream;  // makes the device current too
      if (streams[r]) stream.emplace(*streams[r]);
      std::optional<amp::autocast> autocast_cpu, autocast_cuda;
      if (state.autocast_cpu) autocast_cpu.emplace(kCPU, state.autocast_cpu_dtype, true, state.autocast_cache);
      if (state.autocast_cuda)
        autocast_cuda.emplace(Device::cuda(), state.autocast_cuda_dtype, true, state.autocast_cache);
      run(r);
    } catch (...) {
      errors[r] = std::current_exception();
    }
  };
  if (n == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(n);
    std::exception_ptr start_failure;
    for (size_t r = 0; r < n; ++r) {
      try {
        threads.emplace_back(work, r);
      } catch (...) {
        start_failure = std::current_exception();
        break;
      }
    }
    for (std::thread& t : threads) t.join();
    if (start_failure) std::rethrow_exception(start_failure);
  }
  for (size_t r = 0; r < n; ++r)
    if (errors[r]) reraise(errors[r], r, device_ids_[r]);
}

Tensor DataParallelBase::gather(std::vector<Tensor> outputs, size_t output_index) const {
  bool all_scalars = true;
  for (size_t r = 0; r < outputs.size(); ++r) {
    TS_CHECK(outputs[r].defined(), ValueError, "DataParallel: replica ", r, " returned an undefined tensor as output ",
             output_index, "; expected a tensor to gather");
    all_scalars = all_scalars && outputs[r].dim() == 0;
  }
  std::vector<Tensor> moved;
  moved.reserve(outputs.size());
  for (const Tensor& t : outputs) {
    // PyTorch's gather: 0-dim outputs along dim 0 become a vector of them.
    moved.push_back((all_scalars && dim_ == 0 ? t.unsqueeze(0) : t).to(output_device_));
  }
  try {
    return cat(moved, dim_);
  } catch (const Error& e) {
    std::string sizes;
    for (size_t r = 0; r < outputs.size(); ++r) sizes += str_cat(r ? ", " : "", outputs[r].sizes());
    throw ShapeError(str_cat("DataParallel: cannot gather output ", output_index, " of the replicas (sizes ", sizes,
                             ") along dim ", dim_, " on ", output_device_.str(), ": ", e.what()));
  }
}

std::vector<Tensor> GatherOutputs<std::vector<Tensor>>::gather(const DataParallelBase& dp,
                                                               std::vector<std::vector<Tensor>> outs) {
  for (size_t r = 1; r < outs.size(); ++r)
    TS_CHECK(outs[r].size() == outs[0].size(), ValueError, "DataParallel: replica ", r, " returned ", outs[r].size(),
             " tensors but replica 0 returned ", outs[0].size(), "; expected as many from every replica to gather");
  std::vector<Tensor> result;
  for (size_t i = 0; i < (outs.empty() ? 0 : outs[0].size()); ++i) {
    std::vector<Tensor> column;
    for (auto& o : outs) column.push_back(std::move(o[i]));
    result.push_back(dp.gather(std::move(column), i));
  }
  return result;
}

}  // namespace tessera::nn::detail
