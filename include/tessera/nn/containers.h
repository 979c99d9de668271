// Containers: Sequential (chains forward), ModuleList and ModuleDict (hold modules for a parent's
// forward). Children are owned (Note [Module registration]) and named as in PyTorch: "0", "1", ... in
// Sequential and ModuleList, the key in ModuleDict, so state_dict keys read "0.weight",
// "layers.1.bias", "heads.cls.weight".
#pragma once
#include <concepts>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::nn {

namespace detail {
template <class M>
concept ModuleValue = std::derived_from<std::remove_cvref_t<M>, Module>;

// A container's copy of a module given by value: moved from an rvalue, a shallow copy of an lvalue.
template <ModuleValue M> std::shared_ptr<Module> own(M&& m) {
  return std::make_shared<std::remove_cvref_t<M>>(std::forward<M>(m));
}
}  // namespace detail

// An indexed list of owned modules (the common part of Sequential and ModuleList).
class ModuleSequence : public Module {
 public:
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  // Negative indices count from the end; IndexError when out of range.
  Module& operator[](int64_t index) const;
  template <class M> M& at(int64_t index) const { return (*this)[index].template as<M>(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 protected:
  ModuleSequence() = default;
  void append_owned(std::shared_ptr<Module> m);

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

class Sequential : public ModuleSequence {
 public:
  Sequential() = default;
  // Sequential(Linear(4, 8), ReLU(), Linear(8, 2)). A single Sequential argument copies instead.
  template <detail::ModuleValue... Ms>
    requires(sizeof...(Ms) > 0 && !(sizeof...(Ms) == 1 && (std::same_as<std::remove_cvref_t<Ms>, Sequential> && ...)))
  explicit Sequential(Ms&&... ms) {
    (append_owned(detail::own(std::forward<Ms>(ms))), ...);
  }
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);

  template <detail::ModuleValue M> Sequential& push_back(M&& m) {
    append_owned(detail::own(std::forward<M>(m)));
    return *this;
  }
  Sequential& push_back(std::shared_ptr<Module> m);
  // Each child's forward(Tensor), in order.
  Tensor forward(Tensor input) override;
};

class ModuleList : public ModuleSequence {
 public:
  ModuleList() = default;
  template <detail::ModuleValue... Ms>
    requires(sizeof...(Ms) > 0 && !(sizeof...(Ms) == 1 && (std::same_as<std::remove_cvref_t<Ms>, ModuleList> && ...)))
  explicit ModuleList(Ms&&... ms) {
    (append_owned(detail::own(std::forward<Ms>(ms))), ...);
  }
  explicit ModuleList(const std::vector<std::shared_ptr<Module>>& modules);

  template <detail::ModuleValue M> ModuleList& append(M&& m) {
    append_owned(detail::own(std::forward<M>(m)));
    return *this;
  }
  ModuleList& append(std::shared_ptr<Module> m);
  template <detail::ModuleValue M> ModuleList& push_back(M&& m) { return append(std::forward<M>(m)); }
  ModuleList& extend(const ModuleSequence& other);  // shares other's modules
};

class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  // Inserts or replaces (keeping the first insertion's position, as Python's dict).
  template <detail::ModuleValue M> ModuleDict& insert(const std::string& key, M&& m) {
    return insert(key, detail::own(std::forward<M>(m)));
  }
  ModuleDict& insert(const std::string& key, std::shared_ptr<Module> m);
  Module& operator[](const std::string& key) const;  // IndexError naming the key when absent
  template <class M> M& at(const std::string& key) const { return (*this)[key].template as<M>(); }
  bool contains(const std::string& key) const;
  size_t size() const { return items_.size(); }
  std::vector<std::string> keys() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> items_;
};

}  // namespace tessera::nn
