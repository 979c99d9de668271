// Guards (guards.h).
#include "compile/guards.h"

#include <sstream>

#include "runtime/grad_mode.h"
#include "tensor/tensor_impl.h"
#include "tessera/amp.h"

namespace tessera::compiler {
namespace {

int alias_of(const std::vector<Tensor>& args, size_t i) {
  if (!args[i].defined()) return -1;
  for (size_t j = 0; j < i; ++j)
    if (args[j].defined() && args[j].impl()->storage() == args[i].impl()->storage()) return static_cast<int>(j);
  return -1;
}

std::string meta_diff(const TensorMeta& want, const TensorMeta& got) {
  std::ostringstream os;
  if (got.sizes != want.sizes) os << "sizes " << got.sizes << " (the graph was captured for " << want.sizes << ")";
  else if (got.dtype != want.dtype) os << "dtype " << dtype_name(got.dtype) << " (captured for " << dtype_name(want.dtype) << ")";
  else if (got.device != want.device) os << "device " << got.device.str() << " (captured for " << want.device.str() << ")";
  else if (got.strides != want.strides) os << "strides " << got.strides << " (captured for " << want.strides << ")";
  else if (got.offset != want.offset) os << "storage offset " << got.offset << " (captured for " << want.offset << ")";
  else if (got.requires_grad != want.requires_grad)
    os << "requires_grad " << (got.requires_grad ? "true" : "false") << " (captured for "
       << (want.requires_grad ? "true" : "false") << ")";
  return os.str();
}

}  // namespace

Guards Guards::of(const CallState& call) {
  Guards g;
  for (size_t i = 0; i < call.args.size(); ++i) {
    TensorGuard t;
    t.defined = call.args[i].defined();
    if (t.defined) t.meta = TensorMeta::of(call.args[i]);
    t.alias_of = alias_of(call.args, i);
    g.args_.push_back(t);
  }
  g.scalars_ = call.scalars;
  for (const auto& [name, t] : call.params) {
    g.param_names_.push_back(name);
    g.param_impls_.push_back(t.defined() ? t.impl() : nullptr);
    g.param_metas_.push_back(t.defined() ? TensorMeta::of(t) : TensorMeta{});
  }
  g.training_ = call.training;
  g.grad_enabled_ = is_grad_enabled();
  g.autocast_cpu_ = amp::is_autocast_enabled(DeviceType::CPU);
  g.autocast_cuda_ = amp::is_autocast_enabled(DeviceType::CUDA);
  g.autocast_cpu_dtype_ = amp::get_autocast_dtype(DeviceType::CPU);
  g.autocast_cuda_dtype_ = amp::get_autocast_dtype(DeviceType::CUDA);
  return g;
}

std::optional<std::string> Guards::check(const CallState& call) const {
  if (call.args.size() != args_.size())
    return "the call passes " + std::to_string(call.args.size()) + " tensor arguments (captured with " +
           std::to_string(args_.size()) + ")";
  for (size_t i = 0; i < args_.size(); ++i) {
    const TensorGuard& want = args_[i];
    const Tensor& a = call.args[i];
    if (a.defined() != want.defined)
      return "argument " + std::to_string(i) + (a.defined() ? " is defined" : " is undefined") + " (captured otherwise)";
    if (!a.defined()) continue;
    const std::string d = meta_diff(want.meta, TensorMeta::of(a));
    if (!d.empty()) return "argument " + std::to_string(i) + ": " + d;
    if (alias_of(call.args, i) != want.alias_of)
      return "argument " + std::to_string(i) + " shares storage with argument " +
             std::to_string(alias_of(call.args, i)) + " (captured sharing with " + std::to_string(want.alias_of) +
             "; -1: none)";
  }
  if (call.scalars != scalars_) {
    for (size_t i = 0; i < std::min(call.scalars.size(), scalars_.size()); ++i)
      if (call.scalars[i] != scalars_[i])
        return "non-tensor argument " + std::to_string(i) + " is " + call.scalars[i] + " (captured for " + scalars_[i] + ")";
    return "the call passes " + std::to_string(call.scalars.size()) + " non-tensor arguments (captured with " +
           std::to_string(scalars_.size()) + ")";
  }
  if (is_grad_enabled() != grad_enabled_)
    return std::string("grad mode is ") + (is_grad_enabled() ? "on" : "off") + " (captured with it " +
           (grad_enabled_ ? "on" : "off") + ")";
  if (amp::is_autocast_enabled(DeviceType::CPU) != autocast_cpu_ || amp::is_autocast_enabled(DeviceType::CUDA) != autocast_cuda_)
    return "autocast is enabled or disabled differently than at capture";
  if ((autocast_cpu_ && amp::get_autocast_dtype(DeviceType::CPU) != autocast_cpu_dtype_) ||
      (autocast_cuda_ && amp::get_autocast_dtype(DeviceType::CUDA) != autocast_cuda_dtype_))
    return "autocast casts to another dtype than at capture";
  if (call.training != training_) return "the module's training mode differs from the capture's (train() / eval())";
  if (call.params.size() != param_names_.size())
    return "the module has " + std::to_string(call.params.size()) + " parameters and buffers (captured with " +
           std::to_string(param_names_.size()) + ")";
  for (size_t i = 0; i < param_names_.size(); ++i) {
    const auto& [name, t] = call.params[i];
    if (name != param_names_[i]) return "the module's parameter " + std::to_string(i) + " is " + name + " (captured: " + param_names_[i] + ")";
    if ((t.defined() ? t.impl() : nullptr) != param_impls_[i])
      return "the module's " + name + " is another tensor than at capture (identity)";
    if (t.defined()) {
      const std::string d = meta_diff(param_metas_[i], TensorMeta::of(t));
      if (!d.empty()) return "the module's " + name + ": " + d;
    }
  }
  return std::nullopt;
}

std::string Guards::to_text() const {
  std::ostringstream os;
  for (size_t i = 0; i < args_.size(); ++i) {
    os << "  argument " << i << ": " << (args_[i].defined ? to_string(args_[i].meta) : std::string("undefined"));
    if (args_[i].alias_of >= 0) os << " (shares storage with argument " << args_[i].alias_of << ")";
    os << "\n";
  }
  for (size_t i = 0; i < scalars_.size(); ++i) os << "  non-tensor argument " << i << " == " << scalars_[i] << "\n";
  os << "  grad mode " << (grad_enabled_ ? "on" : "off") << "\n";
  os << "  autocast cpu " << (autocast_cpu_ ? dtype_name(autocast_cpu_dtype_) : "off") << ", cuda "
     << (autocast_cuda_ ? dtype_name(autocast_cuda_dtype_) : "off") << "\n";
  if (!training_.empty()) {
    int on = 0;
    for (bool b : training_) on += b;
    os << "  training mode of " << training_.size() << " modules (" << on << " training)\n";
  }
  if (!param_names_.size()) return os.str();
  os << "  identity and metadata of " << param_names_.size() << " parameters and buffers\n";
  return os.str();
}

}  // namespace tessera::compiler
