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

// A symbolic guard's metadata at batch size `batch`.
TensorMeta meta_at(const TensorMeta& base, const std::vector<AffineInt>& lines, int64_t batch) {
  TensorMeta m = base;
  std::vector<int64_t> v(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) v[i] = lines[i].at(batch);
  set_batch_ints(m, v);
  return m;
}

// "[B,784]" or "[2*B+1,3]": a symbolic guard's sizes.
std::string sizes_text(const TensorMeta& base, const std::vector<AffineInt>& lines) {
  std::string s = "[";
  for (size_t i = 0; i < base.sizes.size(); ++i) {
    const AffineInt& a = lines[i];
    std::string d = a.a == 0 ? std::to_string(a.b) : (a.a == 1 ? std::string() : std::to_string(a.a) + "*") + "B";
    if (a.a != 0 && a.b) d += (a.b > 0 ? "+" : "-") + std::to_string(a.b > 0 ? a.b : -a.b);
    s += (i ? "," : "") + d;
  }
  return s + "]";
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

std::optional<Guards> Guards::unify_batch(const Guards& a, int64_t batch_a, const Guards& b, int64_t batch_b,
                                          std::string* why) {
  auto fail = [&](const std::string& m) -> std::optional<Guards> {
    if (why) *why = m;
    return std::nullopt;
  };
  if (a.symbolic() || b.symbolic()) return fail("one of the variants is symbolic already");
  if (batch_a < 2 || batch_b < 2 || batch_a == batch_b) return fail("the batch sizes are not two different sizes of at least 2");
  if (a.args_.size() != b.args_.size()) return fail("the calls pass different numbers of tensors");
  Guards g = a;
  g.arg_lines_.resize(a.args_.size());
  for (size_t i = 0; i < a.args_.size(); ++i) {
    const TensorGuard &x = a.args_[i], &y = b.args_[i];
    if (x.defined != y.defined || x.alias_of != y.alias_of) return fail("argument " + std::to_string(i) + " differs in more than its sizes");
    if (!x.defined) continue;
    if (x.meta.dtype != y.meta.dtype || x.meta.device != y.meta.device || x.meta.requires_grad != y.meta.requires_grad ||
        x.meta.sizes.size() != y.meta.sizes.size())
      return fail("argument " + std::to_string(i) + " differs in dtype, device, requires_grad or rank");
    const std::vector<int64_t> vx = batch_ints(x.meta), vy = batch_ints(y.meta);
    for (size_t k = 0; k < vx.size(); ++k) {
      std::optional<AffineInt> l = fit_affine(batch_a, vx[k], batch_b, vy[k]);
      if (!l) return fail("argument " + std::to_string(i) + "'s sizes or strides are not whole-number lines in the batch size");
      g.arg_lines_[i].push_back(*l);
    }
  }
  // Everything but the arguments' metadata must be the same.
  if (a.scalars_ != b.scalars_) return fail("the non-tensor arguments differ");
  if (a.param_impls_ != b.param_impls_ || a.param_names_ != b.param_names_ || a.param_metas_ != b.param_metas_)
    return fail("the module's parameters or buffers differ");
  if (a.training_ != b.training_ || a.grad_enabled_ != b.grad_enabled_ || a.autocast_cpu_ != b.autocast_cpu_ ||
      a.autocast_cuda_ != b.autocast_cuda_ || a.autocast_cpu_dtype_ != b.autocast_cpu_dtype_ ||
      a.autocast_cuda_dtype_ != b.autocast_cuda_dtype_)
    return fail("grad mode, autocast or the training mode differ");
  return g;
}

std::optional<std::string> Guards::check(const CallState& call) const {
  if (call.args.size() != args_.size())
    return "the call passes " + std::to_string(call.args.size()) + " tensor arguments (captured with " +
           std::to_string(args_.size()) + ")";
  const int64_t batch = symbolic() ? batch_size_of(call.args) : -1;
  if (symbolic() && batch < 2)
    return "batch size " + std::to_string(batch) + " (sizes 0 and 1 are specialized, not symbolic)";
  for (size_t i = 0; i < args_.size(); ++i) {
    const TensorGuard& want = args_[i];
    const Tensor& a = call.args[i];
    if (a.defined() != want.defined)
      return "argument " + std::to_string(i) + (a.defined() ? " is defined" : " is undefined") + " (captured otherwise)";
    if (!a.defined()) continue;
    if (symbolic() && a.dim() != static_cast<int64_t>(want.meta.sizes.size()))
      return "argument " + std::to_string(i) + ": " + std::to_string(a.dim()) + " dims (captured with " +
             std::to_string(want.meta.sizes.size()) + ")";
    const std::string d =
        meta_diff(symbolic() ? meta_at(want.meta, arg_lines_[i], batch) : want.meta, TensorMeta::of(a));
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
    if (symbolic() && args_[i].defined) os << ", sizes " << sizes_text(args_[i].meta, arg_lines_[i]) << " for any batch size B >= 2";
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
