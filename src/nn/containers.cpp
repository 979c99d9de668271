// Sequential, ModuleList, ModuleDict. Each child is registered under its index or key, so the
// parent's traversal (parameters, state_dict, to) sees it; items_ keeps the order and typed access.
#include "tessera/nn/containers.h"

#include <algorithm>

namespace tessera::nn {

Module& ModuleSequence::operator[](int64_t index) const {
  const int64_t n = static_cast<int64_t>(items_.size());
  TS_CHECK(index >= -n && index < n, IndexError, name(), ": index ", index, " is out of range for a ", name(),
           " of ", n, " modules");
  return *items_[static_cast<size_t>(index < 0 ? index + n : index)];
}

void ModuleSequence::append_owned(std::shared_ptr<Module> m) {
  TS_CHECK(m != nullptr, ValueError, name(), ": cannot append a null module");
  register_module(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) append_owned(m);
}

Sequential& Sequential::push_back(std::shared_ptr<Module> m) {
  append_owned(std::move(m));
  return *this;
}

Tensor Sequential::forward(Tensor input) {
  for (const auto& m : *this) input = (*m)(std::move(input));  // with each child's hooks
  return input;
}

ModuleList::ModuleList(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) append_owned(m);
}

ModuleList& ModuleList::append(std::shared_ptr<Module> m) {
  append_owned(std::move(m));
  return *this;
}

ModuleList& ModuleList::extend(const ModuleSequence& other) {
  // Copy the handles first: `other` may be this list.
  std::vector<std::shared_ptr<Module>> add(other.begin(), other.end());
  for (auto& m : add) append_owned(std::move(m));
  return *this;
}

ModuleDict& ModuleDict::insert(const std::string& key, std::shared_ptr<Module> m) {
  TS_CHECK(m != nullptr, ValueError, "ModuleDict: cannot insert a null module under '", key, "'");
  register_module(key, m);
  auto it = std::find_if(items_.begin(), items_.end(), [&](const auto& kv) { return kv.first == key; });
  if (it != items_.end()) it->second = std::move(m);
  else items_.emplace_back(key, std::move(m));
  return *this;
}

Module& ModuleDict::operator[](const std::string& key) const {
  for (const auto& [k, m] : items_)
    if (k == key) return *m;
  TS_THROW(IndexError, "ModuleDict: no module under key '", key, "'");
}

bool ModuleDict::contains(const std::string& key) const {
  return std::any_of(items_.begin(), items_.end(), [&](const auto& kv) { return kv.first == key; });
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, m] : items_) out.push_back(k);
  return out;
}

}  // namespace tessera::nn
