// nn::Module: registration, traversal (and the slots of Note [Tensor slots]), train/eval, to(),
// state_dict and load_state_dict. Members are found through their offset from the module (Note
// [Module registration]); to() converts tensors in place behind their shared TensorImpl (Note
// [Module.to]).
#include "tessera/nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "autograd/graph.h"
#include "tensor/tensor_impl.h"
#include "tessera/autograd.h"
#include "tessera/functions.h"

namespace tessera::nn {
namespace {

// A registered lvalue lies in the registering object: past the Module base itself and within a
// bound no module layout reaches. A local variable or a heap tensor usually lies outside it, which
// turns a later crash into an error at registration.
constexpr std::ptrdiff_t kMaxMemberOffset = std::ptrdiff_t(1) << 20;

std::string demangle(const char* mangled) {
  int status = 0;
  char* s = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && s ? s : mangled;
  std::free(s);
  return out;
}

// "tessera::nn::Linear" -> "Linear"; "main()::Net" -> "Net"; keeps template arguments whole.
std::string short_type_name(const std::string& full) {
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    char c = full[i];
    if (c == '<' || c == '(') ++depth;
    else if (c == '>' || c == ')') --depth;
    else if (depth == 0 && c == ':' && i + 1 < full.size() && full[i + 1] == ':') start = i + 2;
  }
  return full.substr(start);
}

std::string join_quoted(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", \"" : "\"") + keys[i] + "\"";
  return out;
}

// Moves `t` to (device, dtype) behind its own TensorImpl (Note [Module.to]).
void convert_in_place(const Tensor& t, std::optional<Device> device, std::optional<DType> dtype) {
  const DType dt = dtype && t.is_floating_point() ? *dtype : t.dtype();
  const Device dev = device.value_or(t.device());
  if (dt == t.dtype() && dev == t.device()) return;
  // To the meta device nothing is copied (it holds no data): shapes and dtypes only, as PyTorch.
  auto convert = [&](const Tensor& x, DType d) {
    NoGradGuard no_grad;
    return dev.is_meta() ? empty(x.sizes(), TensorOptions(d, dev)) : x.to(dev, d, /*non_blocking=*/false, /*copy=*/true);
  };
  Tensor converted = convert(t, dt);
  TensorImpl* impl = t.impl();
  std::unique_ptr<AutogradMetaBase> meta = std::move(impl->autograd_meta);
  *impl = std::move(*converted.impl());
  impl->autograd_meta = std::move(meta);
  if (autograd::AutogradMeta* m = autograd::meta_of(t)) {
    if (m->grad.defined()) m->grad = convert(m->grad, m->grad.is_floating_point() ? dt : m->grad.dtype());
    m->grad_accumulator.reset();  // a new one is made with the new dtype and device on demand
  }
}

}  // namespace

Tensor Module::forward(Tensor) {
  TS_THROW(NotImplementedError, "forward: ", name(), " does not define forward(Tensor); declare "
           "`Tensor forward(Tensor input) override` or call its own forward overload");
}

// ---- registration -------------------------------------------------------------------------------

std::ptrdiff_t Module::member_offset(const std::string& name, const void* member) const {
  const std::ptrdiff_t off = reinterpret_cast<const char*>(member) - reinterpret_cast<const char*>(this);
  const bool inside_base = off >= 0 && off < static_cast<std::ptrdiff_t>(sizeof(Module));
  TS_CHECK(!inside_base && off > -kMaxMemberOffset && off < kMaxMemberOffset, ValueError, this->name(),
           ": '", name, "' is not a data member of this module; register a member by reference, or pass "
           "a temporary (or std::move, or a std::shared_ptr for a module) to give the module ownership");
  return off;
}

void Module::check_new_name(const std::string& name, const char* what) const {
  TS_CHECK(!name.empty(), ValueError, this->name(), ": ", what, " name can't be empty string \"\"");
  TS_CHECK(name.find('.') == std::string::npos, ValueError, this->name(), ": ", what, " name can't contain \".\", got \"",
           name, "\"");
}

Tensor& Module::add_tensor(const std::string& name, Kind kind, Tensor* member, Tensor&& value, bool persistent) {
  const char* what = kind == Kind::Parameter ? "parameter" : "buffer";
  check_new_name(name, what);
  for (const ModuleSlot& m : modules_)
    TS_CHECK(m.name != name, ValueError, this->name(), ": attribute '", name, "' already exists (a submodule)");
  TensorSlot slot{name, kind, persistent, std::nullopt, Tensor()};
  if (member) slot.offset = member_offset(name, member);
  else slot.owned = std::move(value);
  auto it = std::find_if(tensors_.begin(), tensors_.end(), [&](const TensorSlot& s) { return s.name == name; });
  if (it != tensors_.end()) {
    TS_CHECK(it->kind == kind, ValueError, this->name(), ": attribute '", name, "' already exists (a ",
             it->kind == Kind::Parameter ? "parameter" : "buffer", ")");
    *it = std::move(slot);
    return slot_tensor(*it);
  }
  tensors_.push_back(std::move(slot));
  return slot_tensor(tensors_.back());
}

namespace {
void make_parameter(const std::string& module, const std::string& name, Tensor& t, bool requires_grad) {
  if (!t.defined()) return;
  TS_CHECK(t.is_leaf(), ValueError, module, ": cannot assign non-leaf Tensor to parameter '", name,
           "'; register a detached tensor (or compute it in forward)");
  if (requires_grad && !t.requires_grad()) {
    TS_CHECK(t.is_floating_point(), DTypeError, module, ": parameter '", name, "' is ", dtype_name(t.dtype()),
             "; only floating-point parameters can require gradients (pass requires_grad = false)");
    t.requires_grad_(true);
  }
}
}  // namespace

// The tensor is made a parameter before it is added, so a refused one leaves no slot behind.
Tensor& Module::register_parameter(const std::string& name, Tensor& member, bool requires_grad) {
  make_parameter(this->name(), name, member, requires_grad);
  return add_tensor(name, Kind::Parameter, &member, Tensor(), true);
}
Tensor& Module::register_parameter(const std::string& name, Tensor&& value, bool requires_grad) {
  make_parameter(this->name(), name, value, requires_grad);
  return add_tensor(name, Kind::Parameter, nullptr, std::move(value), true);
}
Tensor& Module::register_buffer(const std::string& name, Tensor& member, bool persistent) {
  return add_tensor(name, Kind::Buffer, &member, Tensor(), persistent);
}
Tensor& Module::register_buffer(const std::string& name, Tensor&& value, bool persistent) {
  return add_tensor(name, Kind::Buffer, nullptr, std::move(value), persistent);
}

void Module::add_member_module(const std::string& name, Module& member) {
  const std::ptrdiff_t off = member_offset(name, &member);
  add_owned_module(name, nullptr);  // checks the name and makes (or finds) the slot
  for (ModuleSlot& m : modules_)
    if (m.name == name) m = ModuleSlot{name, off, nullptr};
}

void Module::add_owned_module(const std::string& name, std::shared_ptr<Module> owned) {
  check_new_name(name, "module");
  for (const TensorSlot& t : tensors_)
    TS_CHECK(t.name != name, ValueError, this->name(), ": attribute '", name, "' already exists (a ",
             t.kind == Kind::Parameter ? "parameter" : "buffer", ")");
  TS_CHECK(owned.get() != this, ValueError, this->name(), ": a module cannot be its own submodule");
  for (ModuleSlot& m : modules_) {
    if (m.name == name) {
      m = ModuleSlot{name, std::nullopt, std::move(owned)};
      return;
    }
  }
  modules_.push_back(ModuleSlot{name, std::nullopt, std::move(owned)});
}

void Module::register_modules(std::initializer_list<NamedModule> members) {
  for (const NamedModule& m : members) add_member_module(m.name, m.module);
}

Tensor& Module::slot_tensor(const TensorSlot& s) const {
  if (s.offset) return *reinterpret_cast<Tensor*>(const_cast<char*>(reinterpret_cast<const char*>(this)) + *s.offset);
  return const_cast<Tensor&>(s.owned);
}

Module* Module::slot_module(const ModuleSlot& s) const {
  if (s.offset) return reinterpret_cast<Module*>(const_cast<char*>(reinterpret_cast<const char*>(this)) + *s.offset);
  return s.owned.get();
}

// ---- traversal ----------------------------------------------------------------------------------

void Module::collect_tensors(Kind kind, const std::string& prefix, bool recurse, bool persistent_only, bool dedup,
                             std::vector<std::pair<std::string, Tensor>>& out,
                             std::vector<const void*>& seen) const {
  for (const TensorSlot& s : tensors_) {
    if (s.kind != kind || (persistent_only && !s.persistent)) continue;
    const Tensor& t = slot_tensor(s);
    if (!t.defined()) continue;
    if (dedup) {
      if (std::find(seen.begin(), seen.end(), t.impl()) != seen.end()) continue;
      seen.push_back(t.impl());
    }
    out.emplace_back(prefix + s.name, t);
  }
  if (!recurse) return;
  for (const ModuleSlot& m : modules_) {
    const Module* child = slot_module(m);
    if (child) child->collect_tensors(kind, prefix + m.name + ".", true, persistent_only, dedup, out, seen);
  }
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(const std::string& prefix, bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const void*> seen;
  collect_tensors(Kind::Parameter, prefix.empty() ? "" : prefix + ".", recurse, false, true, out, seen);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters("", recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(const std::string& prefix, bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const void*> seen;
  collect_tensors(Kind::Buffer, prefix.empty() ? "" : prefix + ".", recurse, false, true, out, seen);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers("", recurse)) out.push_back(t);
  return out;
}

void Module::collect_slots(const std::string& prefix, std::vector<NamedTensorSlot>& out) {
  for (const TensorSlot& s : tensors_) out.push_back(NamedTensorSlot{prefix + s.name, s.kind == Kind::Parameter, slot_tensor(s)});
  for (const ModuleSlot& m : modules_)
    if (Module* child = slot_module(m)) child->collect_slots(prefix + m.name + ".", out);
}

std::vector<Module::NamedTensorSlot> Module::named_tensor_slots(const std::string& prefix) {
  std::vector<NamedTensorSlot> out;
  collect_slots(prefix.empty() ? "" : prefix + ".", out);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, Module*>> out;
  std::vector<const Module*> seen;
  for (const ModuleSlot& m : modules_) {
    Module* child = slot_module(m);
    if (!child || std::find(seen.begin(), seen.end(), child) != seen.end()) continue;
    seen.push_back(child);
    out.emplace_back(m.name, child);
  }
  return out;
}

std::vector<Module*> Module::children() const {
  std::vector<Module*> out;
  for (auto& [n, m] : named_children()) out.push_back(m);
  return out;
}

void Module::collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out,
                             std::vector<const Module*>& seen) {
  if (std::find(seen.begin(), seen.end(), this) != seen.end()) return;
  seen.push_back(this);
  out.emplace_back(prefix, this);
  for (const ModuleSlot& m : modules_) {
    Module* child = slot_module(m);
    if (child) child->collect_modules(prefix.empty() ? m.name : prefix + "." + m.name, out, seen);
  }
}

std::vector<std::pair<std::string, Module*>> Module::named_modules(const std::string& prefix) {
  std::vector<std::pair<std::string, Module*>> out;
  std::vector<const Module*> seen;
  collect_modules(prefix, out, seen);
  return out;
}

std::vector<Module*> Module::modules() {
  std::vector<Module*> out;
  for (auto& [n, m] : named_modules()) out.push_back(m);
  return out;
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (Module* c : children()) c->apply(fn);
  fn(*this);
  return *this;
}

Module& Module::get_submodule(const std::string& target) const {
  const Module* cur = this;
  std::string path;
  size_t pos = 0;
  while (pos < target.size()) {
    size_t dot = target.find('.', pos);
    std::string part = target.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const Module* next = nullptr;
    for (const ModuleSlot& m : cur->modules_)
      if (m.name == part) next = cur->slot_module(m);
    TS_CHECK(next, IndexError, "get_submodule: ", cur->name(), (path.empty() ? "" : " ("), path, (path.empty() ? "" : ")"),
             " has no attribute `", part, "`");
    path += (path.empty() ? "" : ".") + part;
    cur = next;
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return const_cast<Module&>(*cur);
}

namespace {
std::pair<std::string, std::string> split_last(const std::string& target) {
  size_t dot = target.rfind('.');
  if (dot == std::string::npos) return {"", target};
  return {target.substr(0, dot), target.substr(dot + 1)};
}
}  // namespace

Tensor Module::get_parameter(const std::string& target) const {
  auto [path, leaf] = split_last(target);
  const Module& m = get_submodule(path);
  for (const TensorSlot& s : m.tensors_)
    if (s.kind == Kind::Parameter && s.name == leaf) return m.slot_tensor(s);
  TS_THROW(IndexError, "get_parameter: ", m.name(), " has no parameter `", leaf, "`");
}

Tensor Module::get_buffer(const std::string& target) const {
  auto [path, leaf] = split_last(target);
  const Module& m = get_submodule(path);
  for (const TensorSlot& s : m.tensors_)
    if (s.kind == Kind::Buffer && s.name == leaf) return m.slot_tensor(s);
  TS_THROW(IndexError, "get_buffer: ", m.name(), " has no buffer `", leaf, "`");
}

void Module::throw_bad_cast(const char* target_type) const {
  TS_THROW(ValueError, "as: the module is a ", name(), ", not a ", short_type_name(demangle(target_type)));
}

// ---- mode, device, gradients --------------------------------------------------------------------

Module& Module::train(bool mode) {
  for (Module* m : modules()) m->training_ = mode;
  return *this;
}

namespace {
std::vector<Tensor> all_tensors(const Module& m) {
  std::vector<Tensor> out = m.parameters();
  for (const Tensor& b : m.buffers())
    if (std::none_of(out.begin(), out.end(), [&](const Tensor& t) { return t.is_same(b); })) out.push_back(b);
  return out;
}
}  // namespace

Module& Module::to(Device device) {
  for (const Tensor& t : all_tensors(*this)) convert_in_place(t, device, std::nullopt);
  return *this;
}
Module& Module::to(DType dtype) {
  TS_CHECK(is_floating_point(dtype), DTypeError, "to: ", name(), ".to() only accepts floating point dtypes, but got ",
           dtype_name(dtype));
  for (const Tensor& t : all_tensors(*this)) convert_in_place(t, std::nullopt, dtype);
  return *this;
}
Module& Module::to(Device device, DType dtype) {
  TS_CHECK(is_floating_point(dtype), DTypeError, "to: ", name(), ".to() only accepts floating point dtypes, but got ",
           dtype_name(dtype));
  for (const Tensor& t : all_tensors(*this)) convert_in_place(t, device, dtype);
  return *this;
}

Module& Module::requires_grad_(bool requires_grad) {
  for (Tensor& p : parameters()) p.requires_grad_(requires_grad);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  for (const Tensor& p : parameters()) p.zero_grad(set_to_none);
}

// ---- state ----------------------------------------------------------------------------------------

StateDict Module::state_dict(const std::string& prefix) const {
  std::vector<std::pair<std::string, Tensor>> items;
  std::vector<const void*> seen;
  const std::string p = prefix.empty() ? "" : prefix + ".";
  // Parameters, then buffers, without dedup: a tied weight is saved under each of its names.
  collect_tensors(Kind::Parameter, p, true, true, false, items, seen);
  collect_tensors(Kind::Buffer, p, true, true, false, items, seen);
  StateDict out;
  for (auto& [k, t] : items) out.emplace(k, t.detach());
  return out;
}

LoadStateDictResult Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor>> own;
  std::vector<const void*> seen;
  collect_tensors(Kind::Parameter, "", true, true, false, own, seen);
  collect_tensors(Kind::Buffer, "", true, true, false, own, seen);
  LoadStateDictResult result;
  std::set<std::string> own_keys;
  for (auto& [k, t] : own) {
    own_keys.insert(k);
    if (!state.count(k)) result.missing_keys.push_back(k);
  }
  for (auto& [k, t] : state)
    if (!own_keys.count(k)) result.unexpected_keys.push_back(k);
  if (strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty())) {
    std::string msg = "load_state_dict: Error(s) in loading state_dict for " + name() + ":";
    if (!result.missing_keys.empty()) msg += "\n\tMissing key(s) in state_dict: " + join_quoted(result.missing_keys) + ".";
    if (!result.unexpected_keys.empty())
      msg += "\n\tUnexpected key(s) in state_dict: " + join_quoted(result.unexpected_keys) + ".";
    throw ValueError(msg);
  }
  // Every shape is checked before anything is copied, so a failed load leaves the module unchanged.
  for (auto& [k, t] : own) {
    auto it = state.find(k);
    if (it == state.end()) continue;
    TS_CHECK(it->second.defined(), ValueError, "load_state_dict: the value of '", k, "' is an undefined tensor");
    TS_CHECK(it->second.sizes() == t.sizes(), ShapeError, "load_state_dict: size mismatch for ", k,
             ": copying a param with shape ", it->second.sizes(), " from checkpoint, the shape in current model is ",
             t.sizes(), ".");
  }
  NoGradGuard no_grad;
  for (auto& [k, t] : own) {
    auto it = state.find(k);
    if (it != state.end()) Tensor(t).copy_(it->second);
  }
  return result;
}

// ---- printing -------------------------------------------------------------------------------------

std::string Module::name() const { return short_type_name(demangle(typeid(*this).name())); }
std::string Module::extra_repr() const { return ""; }

void Module::repr_into(std::ostream& os, int indent) const {
  const std::string pad(static_cast<size_t>(indent) + 2, ' ');
  os << name() << "(";
  const std::string extra = extra_repr();
  auto kids = named_children();
  if (kids.empty()) {
    os << extra << ")";
    return;
  }
  os << "\n";
  if (!extra.empty()) os << pad << extra << "\n";
  for (auto& [n, child] : kids) {
    os << pad << "(" << n << "): ";
    child->repr_into(os, indent + 2);
    os << "\n";
  }
  os << std::string(static_cast<size_t>(indent), ' ') << ")";
}

std::string Module::repr() const {
  std::ostringstream os;
  repr_into(os, 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

}  // namespace tessera::nn
